// Host-only tests of the GPU backend: they run everywhere the backend builds, with or without a GPU
// (status conversion, descriptor shape computations, algorithm choice, the no-device path).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "remat/gpu/cuda_check.hpp"
#include "remat/gpu/cuda_device.hpp"
#include "remat/gpu/cuda_resources.hpp"
#include "remat/gpu/cudnn_ops.hpp"

namespace remat::gpu {
namespace {

Status failingCuda(cudaError_t error) {
  REMAT_CUDA_CHECK(error);
  return Status::ok();
}

Status failingCudnn(cudnnStatus_t status) {
  REMAT_CUDNN_CHECK(status);
  return Status::ok();
}

Status failingCublas(cublasStatus_t status) {
  REMAT_CUBLAS_CHECK(status);
  return Status::ok();
}

TEST(GpuStatus, SuccessPassesThrough) {
  EXPECT_TRUE(failingCuda(cudaSuccess).isOk());
  EXPECT_TRUE(failingCudnn(CUDNN_STATUS_SUCCESS).isOk());
  EXPECT_TRUE(failingCublas(CUBLAS_STATUS_SUCCESS).isOk());
}

TEST(GpuStatus, CudaOutOfMemoryNamesExpressionAndPlace) {
  const Status s = failingCuda(cudaErrorMemoryAllocation);
  EXPECT_EQ(s.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(s.message().find("error failed at tests/gpu/gpu_host_test.cpp:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cudaErrorMemoryAllocation"), std::string::npos) << s.message();
}

TEST(GpuStatus, OtherCudaErrorsAreInternal) {
  const Status s = failingCuda(cudaErrorInvalidValue);
  EXPECT_EQ(s.code(), ErrorCode::Internal);
  EXPECT_NE(s.message().find("cudaErrorInvalidValue"), std::string::npos) << s.message();
}

TEST(GpuStatus, CudnnCodesMapToKinds) {
  EXPECT_EQ(failingCudnn(CUDNN_STATUS_ALLOC_FAILED).code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(failingCudnn(CUDNN_STATUS_BAD_PARAM).code(), ErrorCode::InvalidInput);
  EXPECT_EQ(failingCudnn(CUDNN_STATUS_NOT_SUPPORTED).code(), ErrorCode::InvalidInput);
  const Status s = failingCudnn(CUDNN_STATUS_INTERNAL_ERROR);
  EXPECT_EQ(s.code(), ErrorCode::Internal);
  EXPECT_NE(s.message().find("status failed at tests/gpu/gpu_host_test.cpp:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(cudnnGetErrorString(CUDNN_STATUS_INTERNAL_ERROR)), std::string::npos) << s.message();
}

TEST(GpuStatus, CublasCodesMapToKinds) {
  const Status oom = failingCublas(CUBLAS_STATUS_ALLOC_FAILED);
  EXPECT_EQ(oom.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(oom.message().find("CUBLAS_STATUS_ALLOC_FAILED"), std::string::npos) << oom.message();
  EXPECT_EQ(failingCublas(CUBLAS_STATUS_EXECUTION_FAILED).code(), ErrorCode::Internal);
  EXPECT_EQ(cublasStatusName(static_cast<cublasStatus_t>(12345)), "cublasStatus_t 12345");
}

TEST(GpuStatus, ShortSourcePathKeepsTheProjectPart) {
  const std::string inside = std::string(REMAT_SOURCE_DIR) + "/gpu/src/a.cpp";
  EXPECT_STREQ(shortSourcePath(inside.c_str()), "gpu/src/a.cpp");
  EXPECT_STREQ(shortSourcePath("/elsewhere/core/src/b.cpp"), "/elsewhere/core/src/b.cpp");
  EXPECT_STREQ(shortSourcePath("plain.cpp"), "plain.cpp");
}

TEST(GpuShapes, Dims4FromShapes) {
  auto four = toDims4({2, 3, 4, 5});
  ASSERT_TRUE(four.isOk());
  EXPECT_EQ(*four, (Dims4{2, 3, 4, 5}));
  EXPECT_EQ(four->elements(), 120u);
  auto two = toDims4({8, 10});
  ASSERT_TRUE(two.isOk());
  EXPECT_EQ(*two, (Dims4{8, 10, 1, 1}));
  EXPECT_FALSE(toDims4({2, 3, 4}).isOk());
  EXPECT_FALSE(toDims4({2, 0, 4, 4}).isOk());
  auto huge = toDims4({65536, 65536, 1, 1});
  ASSERT_FALSE(huge.isOk());
  EXPECT_NE(huge.status().message().find("2^31-1 elements"), std::string::npos);
}

// Descriptors are host objects: cuDNN computes output shapes without a GPU.
TEST(GpuShapes, ConvolutionOutputMatchesPyTorchRule) {
  ConvGeometry g{.input = {4, 3, 224, 224}, .outChannels = 64, .kernel = 7, .stride = 2, .padding = 3};
  auto out = convolutionOutputDims(g, false);
  ASSERT_TRUE(out.isOk()) << out.status().message();
  EXPECT_EQ(*out, (Dims4{4, 64, 112, 112}));
  g.groups = 3;
  g.outChannels = 6;
  out = convolutionOutputDims(g, false);
  ASSERT_TRUE(out.isOk()) << out.status().message();
  EXPECT_EQ(out->c, 6);
  g.outChannels = 7;  // not a multiple of the groups
  EXPECT_FALSE(convolutionOutputDims(g, false).isOk());
}

TEST(GpuShapes, PoolingOutputFloorMode) {
  auto out = poolingOutputDims({.input = {2, 8, 112, 112}, .kernel = 3, .stride = 2, .padding = 1});
  ASSERT_TRUE(out.isOk()) << out.status().message();
  EXPECT_EQ(*out, (Dims4{2, 8, 56, 56}));
  out = poolingOutputDims(
      {.input = {2, 8, 7, 7}, .kernel = 2, .stride = 2, .padding = 0, .mode = PoolMode::AverageIncludePadding});
  ASSERT_TRUE(out.isOk()) << out.status().message();
  EXPECT_EQ(*out, (Dims4{2, 8, 3, 3}));  // floor(7 / 2): ceil mode would give 4
}

std::vector<AlgorithmCandidate> candidates() {
  // Best first, as cuDNN ranks them.
  return {
      {5, true, 1u << 30, true, false},  // fastest but huge
      {3, true, 4096, false, false},     // non-deterministic
      {2, true, 8192, true, true},       // tensor ops
      {1, false, 0, true, false},        // not available
      {0, true, 16384, true, false},    {4, true, 0, true, false},
  };
}

TEST(GpuAlgorithms, ChoosesTheFirstAcceptableThatFits) {
  const auto all = candidates();
  // The choice; a failure, and algorithm -1, when there is none.
  auto choose = [&](std::uint64_t limitBytes, bool requireDeterministic, bool allowTensorOps) {
    auto choice = chooseAlgorithm(all, limitBytes, requireDeterministic, allowTensorOps, "conv1 forward");
    EXPECT_TRUE(choice.isOk()) << choice.status().message();
    return choice.isOk() ? *choice : AlgorithmChoice{.algo = -1, .workspaceBytes = 0};
  };
  const AlgorithmChoice unlimited = choose(~0ull, false, true);
  EXPECT_EQ(unlimited.algo, 5);
  EXPECT_EQ(unlimited.workspaceBytes, 1u << 30);
  EXPECT_EQ(choose(10000, false, true).algo, 3);  // tight
  EXPECT_EQ(choose(10000, true, true).algo, 2);   // deterministic
  EXPECT_EQ(choose(20000, true, false).algo, 0);  // exact float32
  const AlgorithmChoice zero = choose(0, true, false);
  EXPECT_EQ(zero.algo, 4);
  EXPECT_EQ(zero.workspaceBytes, 0u);
}

TEST(GpuAlgorithms, ErrorNamesTheLayerAndTheSmallestNeed) {
  std::vector<AlgorithmCandidate> some = {{0, true, 4096, true, false}, {1, true, 2048, true, false}};
  auto none = chooseAlgorithm(some, 1024, true, false, "conv3 backward filter");
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().code(), ErrorCode::InvalidInput);
  const std::string& m = none.status().message();
  EXPECT_NE(m.find("conv3 backward filter"), std::string::npos) << m;
  EXPECT_NE(m.find("1024 B"), std::string::npos) << m;
  EXPECT_NE(m.find("smallest needs 2048 B"), std::string::npos) << m;
  EXPECT_NE(m.find("remat profile"), std::string::npos) << m;
  auto unusable = chooseAlgorithm(std::vector<AlgorithmCandidate>{{0, false, 0, true, false}}, 0, false, true, "x");
  ASSERT_FALSE(unusable.isOk());
  EXPECT_NE(unusable.status().message().find("none of the 1 candidates"), std::string::npos);
}

TEST(GpuAlgorithms, NamesOfTheAlgorithms) {
  EXPECT_EQ(forwardAlgorithmName(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM), "IMPLICIT_PRECOMP_GEMM");
  EXPECT_EQ(backwardDataAlgorithmName(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1), "ALGO_1");
  EXPECT_EQ(backwardFilterAlgorithmName(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING), "FFT_TILING");
  EXPECT_EQ(forwardAlgorithmName(99), "?");
}

// Without a GPU the factory fails with a message that says so; with one it opens the device.
TEST(GpuDevice, FactoryReportsAMissingDevice) {
  const Status available = cudaDeviceAvailable();
  auto device = createCudaDevice();
  if (!available.isOk()) {
    EXPECT_EQ(available.message().rfind("no CUDA device: ", 0), 0u) << available.message();
    ASSERT_FALSE(device.isOk());
    EXPECT_EQ(device.status().message().rfind("no CUDA device: ", 0), 0u) << device.status().message();
    EXPECT_EQ(device.status().code(), ErrorCode::InvalidInput);
  } else {
    ASSERT_TRUE(device.isOk()) << device.status().message();
    EXPECT_EQ((*device)->name(), "gpu");
    EXPECT_FALSE((*device)->info().name.empty());
  }
  const Status missing = cudaDeviceAvailable(1 << 20);
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.message().rfind("no CUDA device: ", 0), 0u) << missing.message();
}

}  // namespace
}  // namespace remat::gpu
