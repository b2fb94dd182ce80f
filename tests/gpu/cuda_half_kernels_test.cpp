// bf16-mixed's own GPU kernels (gpu/src/kernels_half.cu, issue 24) against the CPU backend's
// (core/src/cpu/kernels_half.cpp): autocast's casts, a bfloat16 gradient into its float32 master,
// a linear's bfloat16 bias gradient, dropout (the same mask and values) and the loss's seed from
// bfloat16 logits agree bit for bit; the activations agree with the CPU's rule (float32, one
// rounding). Needs a GPU: without one every test skips, saying why.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cpu/kernels.hpp"  // the CPU backend's (core/src/cpu)
#include "kernels_half.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_device.hpp"

namespace remat::gpu {
namespace {

using cpu::BFloat16;
using kernels::Bf16;

// Device memory of `count` elements of T, freed by its owner.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    void* raw = nullptr;
    EXPECT_EQ(cudaMalloc(&raw, count * sizeof(T) + 1), cudaSuccess) << "cudaMalloc of " << count << " elements";
    data_.reset(static_cast<T*>(raw));
  }
  T* get() const { return data_.get(); }
  template <typename H>
  void upload(const std::vector<H>& host) const {
    static_assert(sizeof(H) == sizeof(T));
    ASSERT_EQ(cudaMemcpy(get(), host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  template <typename H>
  std::vector<H> download() const {
    static_assert(sizeof(H) == sizeof(T));
    std::vector<H> host(count_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), get(), count_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  struct Free {
    void operator()(T* p) const { cudaFree(p); }
  };
  std::size_t count_;
  std::unique_ptr<T, Free> data_;
};

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

  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < labels.size(); ++r) labels[r] = static_cast<std::int32_t>((r * 7) % features);
  DeviceArray<std::int32_t> labelsDevice(labels.size());
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

}  // namespace
}  // namespace remat::gpu
