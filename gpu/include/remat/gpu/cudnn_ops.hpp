#pragma once
// cuDNN (legacy API) wrappers for the layer kinds it runs: convolution with a recorded algorithm
// choice and workspace, pooling and batch normalisation in training mode. float32, NCHW. Each op
// owns its descriptors; the caller passes device pointers and a workspace that it allocated
// through the allocator (so every byte is counted).
#include <cudnn.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/gpu/cuda_resources.hpp"

namespace remat::gpu {

// One entry of cuDNN's heuristic list (cudnnGet*Algorithm_v7), best first.
struct AlgorithmCandidate {
  int algo = 0;
  bool available = true;             // status == CUDNN_STATUS_SUCCESS
  std::uint64_t workspaceBytes = 0;  // cudnnGet*WorkspaceSize for this algorithm
  bool deterministic = true;
  bool tensorOps = false;  // TF32 / tensor-core math
};

struct AlgorithmChoice {
  int algo = 0;
  std::uint64_t workspaceBytes = 0;
};

// The first candidate that is available, fits workspaceLimitBytes, is deterministic when that is
// required and uses no tensor ops unless allowed. The error names `what`, the limit and the
// smallest workspace among the otherwise acceptable candidates.
Result<AlgorithmChoice> chooseAlgorithm(std::span<const AlgorithmCandidate> candidates,
                                        std::uint64_t workspaceLimitBytes, bool requireDeterministic,
                                        bool allowTensorOps, std::string_view what);

struct AlgorithmPolicy {
  bool deterministic = true;  // only algorithms whose results do not depend on scheduling
  bool allowTf32 = false;
  std::uint64_t forwardLimitBytes = 0;   // workspace the forward may use
  std::uint64_t backwardLimitBytes = 0;  // workspace each backward pass (data, filter) may use
};

std::string_view forwardAlgorithmName(int algo);
std::string_view backwardDataAlgorithmName(int algo);
std::string_view backwardFilterAlgorithmName(int algo);

// A 2-D convolution (+ optional bias) with its three algorithms chosen once.
class ConvOp {
 public:
  static Result<ConvOp> create(cudnnHandle_t handle, const ConvGeometry& geometry, bool bias,
                               const AlgorithmPolicy& policy, std::string_view name);

  const Dims4& outputDims() const { return output_; }
  std::uint64_t forwardWorkspaceBytes() const { return forward_.workspaceBytes; }
  // The data and filter passes run one after the other and share one workspace.
  std::uint64_t backwardWorkspaceBytes() const;
  std::string describe() const;  // the chosen algorithms and their workspaces

  // y = conv(x, w) (+ b). workspace must hold forwardWorkspaceBytes().
  Status forward(cudnnHandle_t handle, const float* x, const float* w, const float* b, float* y, void* workspace) const;
  // dx = conv^T(dy, w), written, or added into when accumulate. workspace must hold
  // backwardWorkspaceBytes().
  Status backwardData(cudnnHandle_t handle, const float* dy, const float* w, float* dx, void* workspace,
                      bool accumulate = false) const;
  // dw += dW(x, dy); db += sum(dy) when the op has a bias.
  Status backwardParams(cudnnHandle_t handle, const float* x, const float* dy, float* dw, float* db,
                        void* workspace) const;
  bool hasBias() const { return bias_; }

  // bf16-mixed (geometry.bfloat16; cudnn_half_ops.cpp): x, w, y, dx and dw are bfloat16, the
  // sums float32. No bias here: its float32 add onto y and its gradient are own kernels
  // (kernels_half_conv.hpp). forwardHalf writes, backwardDataHalf writes or adds (in float32, one
  // rounding: inside blocks); backwardFilterHalf writes dw
  // (the half gradient, added into the float32 master by the caller).
  Status forwardHalf(cudnnHandle_t handle, const void* x, const void* w, void* y, void* workspace) const;
  Status backwardDataHalf(cudnnHandle_t handle, const void* dy, const void* w, void* dx, void* workspace,
                          bool accumulate = false) const;
  Status backwardFilterHalf(cudnnHandle_t handle, const void* x, const void* dy, void* dw, void* workspace) const;

 private:
  ConvOp() = default;
  Status createTensorDescriptors();  // x, y, w and (with a bias) the bias
  // Each pass's algorithm from cuDNN's heuristic list, asked with `query`, and the pass's own
  // descriptor with the chosen entry's math type. `what` names the pass in errors.
  Status chooseForward(cudnnHandle_t handle, cudnnConvolutionDescriptor_t query, const AlgorithmPolicy& policy,
                       const std::string& what);
  Status chooseBackwardData(cudnnHandle_t handle, cudnnConvolutionDescriptor_t query, const AlgorithmPolicy& policy,
                            const std::string& what);
  Status chooseBackwardFilter(cudnnHandle_t handle, cudnnConvolutionDescriptor_t query, const AlgorithmPolicy& policy,
                              const std::string& what);

  ConvGeometry geometry_;
  Dims4 output_;
  bool bias_ = false;
  TensorDescriptor xDesc_, yDesc_, biasDesc_;
  FilterDescriptor wDesc_;
  ConvolutionDescriptor convForward_, convData_, convFilter_;  // each with its algorithm's math type
  AlgorithmChoice forward_, data_, filter_;
};

// Max (deterministic) or average (padding counted) pooling.
class PoolOp {
 public:
  static Result<PoolOp> create(const PoolGeometry& geometry);
  const Dims4& outputDims() const { return output_; }
  Status forward(cudnnHandle_t handle, const float* x, float* y) const;
  // Max pooling reads x and y; average pooling reads neither (pass nullptr).
  Status backward(cudnnHandle_t handle, const float* x, const float* y, const float* dy, float* dx) const;
  // bf16-mixed (geometry.bfloat16): the same on bfloat16 tensors (cudnn_half_ops.cpp).
  Status forwardHalf(cudnnHandle_t handle, const void* x, void* y) const;
  Status backwardHalf(cudnnHandle_t handle, const void* x, const void* y, const void* dy, void* dx) const;

 private:
  PoolOp() = default;
  PoolGeometry geometry_;
  Dims4 output_;
  TensorDescriptor xDesc_, yDesc_;
  PoolingDescriptor pool_;
};

// Batch normalisation in training mode (batch statistics), per channel over N, H, W; epsilon 1e-5
// like PyTorch. The saved statistics are the mean [C] and the inverse standard deviation [C].
class BatchNormOp {
 public:
  static constexpr double kEpsilon = 1e-5;
  static Result<BatchNormOp> create(const Dims4& dims);
  int channels() const { return dims_.c; }
  // stats is null in discard mode (nothing saved), else 2 * C floats: mean then inverse std.
  Status forward(cudnnHandle_t handle, const float* x, const float* gamma, const float* beta, float* y,
                 float* stats) const;
  // dx written (added into when accumulate); dgamma, dbeta added into.
  Status backward(cudnnHandle_t handle, const float* x, const float* dy, const float* gamma, const float* stats,
                  float* dx, float* dgamma, float* dbeta, bool accumulate = false) const;

 private:
  BatchNormOp() = default;
  Dims4 dims_;
  TensorDescriptor xDesc_, channelDesc_;
};

}  // namespace remat::gpu
