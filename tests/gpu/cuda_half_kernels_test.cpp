// bf16-mixed's own GPU kernels (gpu/src/kernels_half.cu, issue 24) against the CPU backend's
// (core/src/cpu/kernels_half.cpp): autocast's casts, a bfloat16 gradient into its float32 master,
// a linear's bfloat16 bias gradient, dropout (the same mask and values) and the loss's seed from
// bfloat16 logits agree bit for bit; the activations agree with the CPU's rule (float32, one
// rounding). The CNN kernels (kernels_half_norm.cu, kernels_half_pool.cu): batch norm's forward,
// statistics and backward, the global pool and the broadcasting product against double-precision
// references within bfloat16's rounding. Blocks' bfloat16 sub, div and broadcasting add and the
// accumulating dropout backward (kernels_half_arith.cu) are the CPU's bit for bit; ConvNeXt's
// layer scale, float32 add and layer norm (kernels_half_convnext.cu) are the references rounded
// once (the layer norm within bfloat16's rounding). Needs a GPU: without one every test skips, saying why.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cpu/kernels.hpp"  // the CPU backend's (core/src/cpu)
#include "device_array.hpp"
#include "kernels_half.hpp"
#include "kernels_half_arith.hpp"
#include "kernels_half_conv.hpp"
#include "kernels_half_convnext.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_device.hpp"

namespace remat::gpu {
namespace {

using cpu::BFloat16;
using kernels::Bf16;

std::vector<float> randomFloats(std::size_t count, std::uint32_t seed, float scale = 4.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> out(count);
  for (float& v : out) v = dist(gen);
  return out;
}

std::vector<BFloat16> halves(const std::vector<float>& values) {
  std::vector<BFloat16> out;
  for (float v : values) out.emplace_back(v);
  return out;
}

void expectSameBits(const std::vector<BFloat16>& gpu, const std::vector<BFloat16>& cpu, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) differ += gpu[i].bits != cpu[i].bits ? 1 : 0;
  EXPECT_EQ(differ, 0u) << what << ": elements whose bits differ from the CPU's";
}

class CudaHalfKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status available = cudaDeviceAvailable();
    if (!available.isOk()) GTEST_SKIP() << "bf16-mixed kernels on the GPU: " << available.message();
  }
};

TEST_F(CudaHalfKernelsTest, CastsAndMasterGradientsAreTheCpus) {
  const std::size_t n = 10007;
  std::vector<float> values = randomFloats(n, 1);
  values[0] = 1.00390625f;  // exactly between two bfloat16s: rounds to even
  values[1] = 3.0e38f;
  DeviceArray<float> from(n), master(n);
  DeviceArray<Bf16> half(n);
  from.upload(values);
  ASSERT_TRUE(kernels::castToHalf(nullptr, static_cast<kernels::Index>(n), from.get(), half.get()).isOk());
  std::vector<BFloat16> cpuHalf(n);
  cpu::castToHalf(static_cast<cpu::Index>(n), values.data(), cpuHalf.data());
  expectSameBits(half.download<BFloat16>(), cpuHalf, "castToHalf");
  ASSERT_TRUE(kernels::castToFloat(nullptr, static_cast<kernels::Index>(n), half.get(), master.get()).isOk());
  std::vector<float> cpuFloat(n);
  cpu::castToFloat(static_cast<cpu::Index>(n), cpuHalf.data(), cpuFloat.data());
  EXPECT_EQ(master.download<float>(), cpuFloat);
  ASSERT_TRUE(kernels::addHalfInto(nullptr, static_cast<kernels::Index>(n), half.get(), master.get()).isOk());
  cpu::addHalfInto(static_cast<cpu::Index>(n), cpuHalf.data(), cpuFloat.data());
  EXPECT_EQ(master.download<float>(), cpuFloat);
}

TEST_F(CudaHalfKernelsTest, BiasGradientDropoutAndLossSeedAreTheCpus) {
  const cpu::Index rows = 37, features = 130;
  const std::size_t n = static_cast<std::size_t>(rows * features);
  const std::vector<BFloat16> dy = halves(randomFloats(n, 2));
  DeviceArray<Bf16> dyDevice(n), y(n), dx(n);
  DeviceArray<float> db(static_cast<std::size_t>(features));
  dyDevice.upload(dy);
  std::vector<float> cpuDb = randomFloats(static_cast<std::size_t>(features), 3);
  db.upload(cpuDb);
  ASSERT_TRUE(kernels::addHalfBiasGradient(nullptr, rows, features, dyDevice.get(), db.get()).isOk());
  cpu::addHalfBiasGradient(rows, features, dy.data(), cpuDb.data());
  EXPECT_EQ(db.download<float>(), cpuDb);

  const std::uint64_t key = rng::streamKey(42, rng::Purpose::Dropout, 3);
  DeviceArray<std::uint8_t> mask(n);
  ASSERT_TRUE(kernels::dropoutForwardHalf(nullptr, static_cast<kernels::Index>(n), 0.3, key, dyDevice.get(), y.get(),
                                          mask.get())
                  .isOk());
  const cpu::ActivationLayout layout{rows, features, 1, 1, false};
  std::vector<BFloat16> cpuY(n), cpuDx(n);
  std::vector<std::uint8_t> cpuMask(n);
  cpu::dropoutForward(layout, 0.3, key, dy.data(), cpuY.data(), cpuMask.data());
  expectSameBits(y.download<BFloat16>(), cpuY, "dropoutForwardHalf");
  EXPECT_EQ(mask.download<std::uint8_t>(), cpuMask);
  ASSERT_TRUE(
      kernels::dropoutBackwardHalf(nullptr, static_cast<kernels::Index>(n), 0.3, mask.get(), dyDevice.get(), dx.get())
          .isOk());
  cpu::dropoutBackward(static_cast<cpu::Index>(n), 0.3, cpuMask.data(), dy.data(), cpuDx.data());
  expectSameBits(dx.download<BFloat16>(), cpuDx, "dropoutBackwardHalf");

  std::vector<LabelIndex> labels(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < labels.size(); ++r) labels[r] = static_cast<LabelIndex>((r * 7) % features);
  DeviceArray<LabelIndex> labelsDevice(labels.size());
  labelsDevice.upload(labels);
  ASSERT_TRUE(
      kernels::softmaxCrossEntropyBackwardHalf(nullptr, rows, features, dyDevice.get(), labelsDevice.get(), dx.get())
          .isOk());
  cpu::softmaxCrossEntropyBackward(layout, dy.data(), labels.data(), cpuDx.data());
  expectSameBits(dx.download<BFloat16>(), cpuDx, "softmaxCrossEntropyBackwardHalf");
}

// relu and relu6 against their definitions: y = max(x, 0) (min 6) exactly, the gradient passed
// through or zeroed; gelu's forward within one bfloat16 rounding of float32's formula.
TEST_F(CudaHalfKernelsTest, ActivationsFollowTheirRules) {
  const std::size_t n = 4099;
  const std::vector<BFloat16> x = halves(randomFloats(n, 4, 8.0f)), dy = halves(randomFloats(n, 5));
  DeviceArray<Bf16> xDevice(n), dyDevice(n), y(n), dx(n);
  xDevice.upload(x);
  dyDevice.upload(dy);
  using kernels::HalfActivation;
  for (HalfActivation kind : {HalfActivation::Relu, HalfActivation::Relu6}) {
    const kernels::HalfActivationFn fn{kind};
    const auto count = static_cast<kernels::Index>(n);
    ASSERT_TRUE(kernels::activationForwardHalf(nullptr, fn, count, xDevice.get(), y.get()).isOk());
    ASSERT_TRUE(
        kernels::activationBackwardHalf(nullptr, fn, count, xDevice.get(), dyDevice.get(), dx.get(), false).isOk());
    const std::vector<BFloat16> gy = y.download<BFloat16>(), gdx = dx.download<BFloat16>();
    for (std::size_t i = 0; i < n; ++i) {
      const float v = x[i].value();
      const float want = kind == HalfActivation::Relu ? (v > 0 ? v : 0.0f) : (v > 0 ? (v < 6 ? v : 6.0f) : 0.0f);
      const bool passes = kind == HalfActivation::Relu ? v > 0 : (v > 0 && v < 6);
      ASSERT_EQ(gy[i].value(), want) << i;
      ASSERT_EQ(gdx[i].value(), passes ? dy[i].value() : 0.0f) << i;
    }
  }
  const kernels::HalfActivationFn gelu{HalfActivation::Pointwise, kernels::Pointwise::Gelu};
  ASSERT_TRUE(
      kernels::activationForwardHalf(nullptr, gelu, static_cast<kernels::Index>(n), xDevice.get(), y.get()).isOk());
  const std::vector<BFloat16> gy = y.download<BFloat16>();
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i].value();
    const float want = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
    EXPECT_NEAR(gy[i].value(), want, std::fabs(want) / 128.0f + 1e-6f) << i;
  }
}

// |a - b| within `relative` of the largest reference magnitude, element by element.
void expectNear(const std::vector<BFloat16>& gpu, const std::vector<double>& reference, double relative,
                const char* what) {
  ASSERT_EQ(gpu.size(), reference.size()) << what;
  double scale = 0.0, worst = 0.0;
  for (double r : reference) scale = std::max(scale, std::fabs(r));
  for (std::size_t i = 0; i < gpu.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(gpu[i].value()) - reference[i]));
  EXPECT_LE(worst, relative * scale) << what << ": max |gpu - reference| " << worst << ", max " << scale;
  EXPECT_GT(scale, 0.0) << what;
}

// Training-mode batch norm over [N, C, H, W] in double precision: y, mean, inverse std, and the
// backward's dx, dgamma, dbeta for a given dy.
struct NormReference {
  std::vector<double> y, mean, invStd, dx, dgamma, dbeta;
};

NormReference batchNormReference(const kernels::Dims4& d, const std::vector<float>& x, const std::vector<float>& gamma,
                                 const std::vector<float>& beta, const std::vector<float>& dy) {
  const std::size_t plane = static_cast<std::size_t>(d.h * d.w), count = static_cast<std::size_t>(d.n) * plane;
  NormReference r{std::vector<double>(x.size()), {}, {}, std::vector<double>(x.size()), {}, {}};
  auto at = [&](std::size_t c, std::size_t m) {
    return ((m / plane) * static_cast<std::size_t>(d.c) + c) * plane + m % plane;
  };
  for (std::size_t c = 0; c < static_cast<std::size_t>(d.c); ++c) {
    double mean = 0.0, var = 0.0, sumDy = 0.0, sumDyXhat = 0.0;
    for (std::size_t m = 0; m < count; ++m) mean += x[at(c, m)];
    mean /= static_cast<double>(count);
    for (std::size_t m = 0; m < count; ++m) var += (x[at(c, m)] - mean) * (x[at(c, m)] - mean);
    const double invStd = 1.0 / std::sqrt(var / static_cast<double>(count) + 1e-5);
    for (std::size_t m = 0; m < count; ++m) {
      const double xhat = (x[at(c, m)] - mean) * invStd;
      r.y[at(c, m)] = xhat * gamma[c] + beta[c];
      sumDy += dy[at(c, m)];
      sumDyXhat += dy[at(c, m)] * xhat;
    }
    for (std::size_t m = 0; m < count; ++m) {
      const double xhat = (x[at(c, m)] - mean) * invStd, n = static_cast<double>(count);
      r.dx[at(c, m)] = gamma[c] * invStd * (dy[at(c, m)] - sumDy / n - xhat * sumDyXhat / n);
    }
    r.mean.push_back(mean);
    r.invStd.push_back(invStd);
    r.dgamma.push_back(sumDyXhat);
    r.dbeta.push_back(sumDy);
  }
  return r;
}

// Values exactly representable in bfloat16, so the reference sees what the kernel reads.
std::vector<float> roundedToHalf(std::vector<float> values) {
  for (float& v : values) v = BFloat16(v).value();
  return values;
}

TEST_F(CudaHalfKernelsTest, BatchNormIsTheDoublePrecisionReferenceRoundedOnce) {
  const kernels::Dims4 d{3, 5, 7, 9};
  const std::size_t count = static_cast<std::size_t>(d.n * d.c * d.h * d.w);
  const std::vector<float> x = roundedToHalf(randomFloats(count, 21));
  const std::vector<float> dy = roundedToHalf(randomFloats(count, 22, 1.0f));
  const std::vector<float> gamma = randomFloats(5, 23, 2.0f), beta = randomFloats(5, 24, 1.0f);
  const NormReference r = batchNormReference(d, x, gamma, beta, dy);
  DeviceArray<Bf16> dx(count), dyHalf(count), xHalf(count), y(count);
  DeviceArray<float> params(10), stats(10), grads(10);
  xHalf.upload(halves(x));
  dyHalf.upload(halves(dy));
  std::vector<float> both = gamma;
  both.insert(both.end(), beta.begin(), beta.end());
  params.upload(both);
  grads.upload(std::vector<float>(10, 1.0f));  // parameter gradients are added into
  ASSERT_TRUE(kernels::batchNormForwardHalf(nullptr, d, 1e-5f, xHalf.get(), params.get(), params.get() + 5, y.get(),
                                            stats.get())
                  .isOk());
  expectNear(y.download<BFloat16>(), r.y, 1.0 / 128, "y");
  const std::vector<float> saved = stats.download<float>();
  for (std::size_t c = 0; c < 5; ++c) {
    EXPECT_NEAR(saved[c], r.mean[c], 1e-5) << "mean " << c;
    EXPECT_NEAR(saved[5 + c], r.invStd[c], 1e-4 * r.invStd[c]) << "inverse std " << c;
  }
  ASSERT_TRUE(kernels::batchNormBackwardHalf(nullptr, d, xHalf.get(), dyHalf.get(), params.get(), stats.get(), dx.get(),
                                             grads.get(), grads.get() + 5, false)
                  .isOk());
  expectNear(dx.download<BFloat16>(), r.dx, 1.0 / 64, "dx");
  const std::vector<float> g = grads.download<float>();
  for (std::size_t c = 0; c < 5; ++c) {
    EXPECT_NEAR(g[c], 1.0 + r.dgamma[c], 1e-3 * (1.0 + std::fabs(r.dgamma[c]))) << "dgamma " << c;
    EXPECT_NEAR(g[5 + c], 1.0 + r.dbeta[c], 1e-3 * (1.0 + std::fabs(r.dbeta[c]))) << "dbeta " << c;
  }
}

// Squeeze-and-Excitation: the global pool, and y = s * x with s [N, C, 1, 1]; d(s) sums over H, W.
TEST_F(CudaHalfKernelsTest, SqueezeKernelsAreTheReferenceRoundedOnce) {
  const kernels::Dims4 x{2, 6, 5, 4}, s{2, 6, 1, 1};
  const std::size_t count = 2 * 6 * 5 * 4, plane = 20;
  const std::vector<float> values = roundedToHalf(randomFloats(count, 31));
  const std::vector<float> scales = roundedToHalf(randomFloats(12, 32, 1.0f));
  const std::vector<float> grads = roundedToHalf(randomFloats(count, 33, 1.0f));
  DeviceArray<Bf16> xs(count), ss(12), pooled(12), product(count), dy(count), dScale(12);
  xs.upload(halves(values));
  ss.upload(halves(scales));
  dy.upload(halves(grads));
  ASSERT_TRUE(kernels::globalAvgPoolForwardHalf(nullptr, x, xs.get(), pooled.get()).isOk());
  ASSERT_TRUE(kernels::mulForwardHalf(nullptr, x, s, x, ss.get(), xs.get(), product.get()).isOk());
  ASSERT_TRUE(kernels::mulBackwardOperandHalf(nullptr, x, s, x, dy.get(), xs.get(), dScale.get(), false).isOk());
  std::vector<double> mean(12, 0.0), y(count), dS(12, 0.0);
  for (std::size_t i = 0; i < count; ++i) {
    mean[i / plane] += values[i] / static_cast<double>(plane);
    y[i] = static_cast<double>(scales[i / plane]) * values[i];
    dS[i / plane] += static_cast<double>(grads[i]) * values[i];
  }
  expectNear(pooled.download<BFloat16>(), mean, 1.0 / 128, "global pool");
  expectNear(product.download<BFloat16>(), y, 1.0 / 128, "product");
  expectNear(dScale.download<BFloat16>(), dS, 1.0 / 128, "d(scale)");
}

// With one channel, the CPU's channels-last Dims4 and the GPU's NCHW are the same order.
TEST_F(CudaHalfKernelsTest, ArithAndDropoutIntoAreTheCpusBitForBit) {
  const cpu::Dims4 cOut{2, 1, 3, 4}, cB{1, 1, 3, 1};
  const kernels::Dims4 gOut{2, 1, 3, 4}, gB{1, 1, 3, 1};
  const auto x = halves(randomFloats(24, 1)), dy = halves(randomFloats(24, 2)), prior = halves(randomFloats(24, 3));
  std::vector<float> bValues = randomFloats(3, 4, 1.0f);
  for (float& v : bValues) v = 1.5f + v;  // away from zero: div
  const auto z = halves(bValues);
  DeviceArray<Bf16> dx(24), dz(3), ddy(24), dy0(24), dd(24), dzGrad(3);
  dx.upload(x), dz.upload(z), ddy.upload(dy);
  const cpu::BroadcastOp cpuOps[] = {cpu::BroadcastOp::Add, cpu::BroadcastOp::Sub, cpu::BroadcastOp::Div};
  const kernels::Arith gpuOps[] = {kernels::Arith::Add, kernels::Arith::Sub, kernels::Arith::Div};
  for (int k = 0; k < 3; ++k) {
    std::vector<BFloat16> y(24), da = prior, db(3);
    cpu::broadcastForward(cpuOps[k], cOut, cOut, cB, x.data(), z.data(), y.data());
    cpu::broadcastBackwardOperand(cpuOps[k], 0, cOut, cOut, cB, dy.data(), x.data(), z.data(), da.data(), true);
    cpu::broadcastBackwardOperand(cpuOps[k], 1, cOut, cOut, cB, dy.data(), x.data(), z.data(), db.data(), false);
    ASSERT_TRUE(kernels::arithForwardHalf(nullptr, gpuOps[k], gOut, gOut, gB, dx.get(), dz.get(), dy0.get()).isOk());
    expectSameBits(dy0.download<BFloat16>(), y, "arith forward");
    dd.upload(prior);
    ASSERT_TRUE(kernels::arithBackwardOperandHalf(nullptr, gpuOps[k], 0, gOut, gOut, gB, ddy.get(), dx.get(), dz.get(),
                                                  dd.get(), true)
                    .isOk());
    expectSameBits(dd.download<BFloat16>(), da, "d(a), added");
    ASSERT_TRUE(kernels::arithBackwardOperandHalf(nullptr, gpuOps[k], 1, gOut, gOut, gB, ddy.get(), dx.get(), dz.get(),
                                                  dzGrad.get(), false)
                    .isOk());
    expectSameBits(dzGrad.download<BFloat16>(), db, "d(b), summed over its broadcast axes");
  }
  std::vector<std::uint8_t> mask(24);
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 != 0 ? 1 : 0;
  std::vector<BFloat16> cpuDx = prior;
  cpu::dropoutBackward(24, 0.3, mask.data(), dy.data(), cpuDx.data(), true);
  DeviceArray<std::uint8_t> dmask(24);
  dmask.upload(mask);
  dd.upload(prior);
  ASSERT_TRUE(kernels::dropoutBackwardHalfInto(nullptr, 24, 0.3, dmask.get(), ddy.get(), dd.get(), true).isOk());
  expectSameBits(dd.download<BFloat16>(), cpuDx, "dropout's backward, added");
}

TEST_F(CudaHalfKernelsTest, ConvNextKernelsAreTheReferenceRoundedOnce) {
  const kernels::Dims4 d{2, 4, 3, 3};  // N, C, H, W
  const std::size_t count = 72;
  const auto x = halves(randomFloats(count, 5)), dyHalf = halves(randomFloats(count, 6));
  const std::vector<float> gamma = randomFloats(4, 7, 1.0f), dy = randomFloats(count, 8);
  DeviceArray<Bf16> dx(count), ddyHalf(count), dgrad(count);
  DeviceArray<float> dgamma(4), dy32(count), dout(count), dgGamma(4);
  dx.upload(x), ddyHalf.upload(dyHalf), dgamma.upload(gamma), dy32.upload(dy);
  ASSERT_TRUE(kernels::layerScaleForwardHalf(nullptr, d, dx.get(), dgamma.get(), dout.get()).isOk());
  const std::vector<float> y = dout.download<float>();
  std::vector<float> zeros(4, 0.0f);
  dgGamma.upload(zeros);
  ASSERT_TRUE(
      kernels::layerScaleBackwardHalf(nullptr, d, dy32.get(), dx.get(), dgamma.get(), dgrad.get(), false, dgGamma.get())
          .isOk());
  const std::vector<BFloat16> dIn = dgrad.download<BFloat16>();
  const std::vector<float> dGamma = dgGamma.download<float>();
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t c = (i / 9) % 4;
    EXPECT_EQ(y[i], x[i].value() * gamma[c]) << i;  // float32, not rounded
    EXPECT_EQ(dIn[i].bits, BFloat16(dy[i] * gamma[c]).bits) << i;
  }
  for (std::size_t c = 0; c < 4; ++c) {
    double sum = 0.0;
    for (std::size_t n = 0; n < 2; ++n)
      for (std::size_t p = 0; p < 9; ++p) sum += double(dy[(n * 4 + c) * 9 + p]) * x[(n * 4 + c) * 9 + p].value();
    EXPECT_NEAR(dGamma[c], sum, 1e-4 * (1.0 + std::fabs(sum))) << c;
  }
  // The float32 residual add of a bfloat16 and a float32 operand, and its gradient into the former.
  ASSERT_TRUE(
      kernels::addMixed(nullptr, static_cast<kernels::Index>(count), dx.get(), true, dy32.get(), false, dout.get())
          .isOk());
  const std::vector<float> sum = dout.download<float>();
  for (std::size_t i = 0; i < count; ++i) EXPECT_EQ(sum[i], x[i].value() + dy[i]) << i;
  // The layer norm over the channels: each position's C values, float32 statistics.
  std::vector<float> weightBias = randomFloats(8, 9, 1.0f);
  DeviceArray<float> dwb(8), dstats(2 * 18);
  dwb.upload(weightBias);
  ASSERT_TRUE(
      kernels::layerNormForwardHalf(nullptr, 18, 4, 1e-6f, dx.get(), dwb.get(), dgrad.get(), dstats.get(), 9).isOk());
  const std::vector<BFloat16> normed = dgrad.download<BFloat16>();
  for (std::size_t r = 0; r < 18; ++r) {
    const std::size_t n = r / 9, p = r % 9;
    double mean = 0.0, var = 0.0;
    for (std::size_t c = 0; c < 4; ++c) mean += x[(n * 4 + c) * 9 + p].value() / 4.0;
    for (std::size_t c = 0; c < 4; ++c) var += std::pow(x[(n * 4 + c) * 9 + p].value() - mean, 2) / 4.0;
    for (std::size_t c = 0; c < 4; ++c) {
      const std::size_t i = (n * 4 + c) * 9 + p;
      const double ref = (x[i].value() - mean) / std::sqrt(var + 1e-6) * weightBias[c] + weightBias[4 + c];
      EXPECT_NEAR(normed[i].value(), ref, 1e-2 * (1.0 + std::fabs(ref))) << i;  // one bfloat16 rounding
    }
  }
}

}  // namespace
}  // namespace remat::gpu
