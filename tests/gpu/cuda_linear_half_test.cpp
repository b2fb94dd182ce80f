// bf16-mixed's bfloat16 products for the transformer kinds on the GPU (gpu/src/cuda_linear_half.cpp,
// issue 24) against float32 sums of the same bfloat16 values on the host: the strided-batched
// GEMM over heads (q k^T with a transposed B, P v) and a linear over token rows (y = x W^T + b,
// dx = dy W, the bfloat16 weight gradient added into a float32 master, the bias gradient) agree
// within one bfloat16 step (cuBLAS's summation order is its own). Needs a GPU: without one every
// test skips, saying why.
#include "cuda_linear_half.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "cpu/kernels.hpp"  // the CPU backend's BFloat16 (core/src/cpu)
#include "device_array.hpp"
#include "remat/gpu/cuda_device.hpp"

namespace remat::gpu {
namespace {

using cpu::BFloat16;
using kernels::Bf16;

std::vector<BFloat16> randomHalves(std::size_t count, std::uint32_t seed) {
  return gpu::randomHalves(count, seed, 1.0f);  // device_array.hpp's, in [-1.0, 1.0)
}

// Within one bfloat16 step of the reference (2^-7 of it) or 1e-2 of its largest element.
template <typename T>
void expectNear(const std::vector<T>& gpu, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(gpu.size(), want.size()) << what;
  float largest = 0.0f;
  for (float v : want) largest = std::max(largest, std::fabs(v));
  std::size_t far = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    float value;
    if constexpr (std::is_same_v<T, BFloat16>)
      value = gpu[i].value();
    else
      value = gpu[i];
    far += std::fabs(value - want[i]) > std::fabs(want[i]) / 128.0f + 1e-2f * largest ? 1 : 0;
  }
  EXPECT_EQ(far, 0u) << what << ": elements further than one bfloat16 step from the reference";
  EXPECT_GT(largest, 0.0f) << what;
}

class CudaLinearHalfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status available = cudaDeviceAvailable();
    if (!available.isOk()) GTEST_SKIP() << "bf16 products on the GPU: " << available.message();
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    context_.cublas = handle_;
  }
  void TearDown() override {
    if (handle_ != nullptr) cublasDestroy(handle_);
  }
  LayerContext context_;

 private:
  cublasHandle_t handle_ = nullptr;
};

// scores[b][i][j] = q_i . k_j over 6 heads of 11 x 8: the attention's q k^T.
TEST_F(CudaLinearHalfTest, BatchedProductsOverHeadsAreTheSums) {
  const std::size_t heads = 6, S = 11, dh = 8;
  const std::vector<BFloat16> q = randomHalves(heads * S * dh, 1), k = randomHalves(heads * S * dh, 2);
  DeviceArray<Bf16> qd(q.size()), kd(k.size()), scores(heads * S * S);
  qd.upload(q);
  kd.upload(k);
  RowMajorGemm g;
  g.transB = true;
  g.m = S, g.n = S, g.k = dh, g.lda = dh, g.ldb = dh, g.ldc = S;
  g.strideA = S * dh, g.strideB = S * dh, g.strideC = S * S, g.batch = heads;
  ASSERT_TRUE(gemmHalfBatched(context_, g, qd.get(), kd.get(), scores.get(), "q k^T").isOk());
  std::vector<float> want;
  for (std::size_t b = 0; b < heads; ++b)
    for (std::size_t i = 0; i < S; ++i)
      for (std::size_t j = 0; j < S; ++j) {
        float sum = 0.0f;
        for (std::size_t c = 0; c < dh; ++c) sum += q[(b * S + i) * dh + c].value() * k[(b * S + j) * dh + c].value();
        want.push_back(sum);
      }
  expectNear(scores.download<BFloat16>(), want, "q k^T");
}

TEST_F(CudaLinearHalfTest, ALinearOverTokenRowsIsAutocasts) {
  const std::size_t rows = 23, in = 40, out = 24;
  const std::vector<BFloat16> x = randomHalves(rows * in, 3), w = randomHalves(out * in, 4),
                              dy = randomHalves(rows * out, 5);
  std::vector<float> bias(out), master(out * in, 0.5f), biasGrad(out, 0.25f);
  for (std::size_t o = 0; o < out; ++o) bias[o] = 0.1f * static_cast<float>(o);
  DeviceArray<Bf16> xd(x.size()), wd(w.size()), dyd(dy.size()), y(rows * out), dx(rows * in), dwHalf(out * in);
  DeviceArray<float> biasd(out), dw(master.size()), db(out);
  xd.upload(x), wd.upload(w), dyd.upload(dy), biasd.upload(bias), dw.upload(master), db.upload(biasGrad);
  const Linear op{static_cast<Index>(rows), static_cast<Index>(in), static_cast<Index>(out), "fc"};
  ASSERT_TRUE(halfLinearForward(context_, op, xd.get(), wd.get(), biasd.get(), y.get()).isOk());
  ASSERT_TRUE(
      halfLinearBackward(context_, op, xd.get(), dyd.get(), wd.get(), dx.get(), dwHalf.get(), dw.get(), db.get())
          .isOk());
  std::vector<float> wantY, wantDx, wantDw, wantDb;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      float sum = 0.0f;
      for (std::size_t i = 0; i < in; ++i) sum += x[r * in + i].value() * w[o * in + i].value();
      wantY.push_back(BFloat16(sum).value() + bias[o]);
    }
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < in; ++i) {
      float sum = 0.0f;
      for (std::size_t o = 0; o < out; ++o) sum += dy[r * out + o].value() * w[o * in + i].value();
      wantDx.push_back(sum);
    }
  for (std::size_t o = 0; o < out; ++o) {
    for (std::size_t i = 0; i < in; ++i) {
      float sum = 0.0f;
      for (std::size_t r = 0; r < rows; ++r) sum += dy[r * out + o].value() * x[r * in + i].value();
      wantDw.push_back(master[o * in + i] + sum);
    }
    float sum = 0.0f;
    for (std::size_t r = 0; r < rows; ++r) sum += dy[r * out + o].value();
    wantDb.push_back(biasGrad[o] + sum);
  }
  expectNear(y.download<BFloat16>(), wantY, "y");
  expectNear(dx.download<BFloat16>(), wantDx, "dx");
  expectNear(dw.download<float>(), wantDw, "dW (float32 master)");
  expectNear(db.download<float>(), wantDb, "db (float32 master)");
}

}  // namespace
}  // namespace remat::gpu
