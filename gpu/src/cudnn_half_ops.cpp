// bf16-mixed's cuDNN calls (cudnn_ops.hpp): the float32 ops' descriptors and algorithms, made with
// bfloat16 tensors (ConvGeometry::bfloat16, PoolGeometry::bfloat16), called on bfloat16 data (batch
// norm is an own kernel, kernels_half_norm.cu, as PyTorch keeps bfloat16 off cuDNN's). cuDNN's scaling factors stay
// float (its rule for half data), and the convolution descriptors compute in float32, so every sum is float32 and each
// output is rounded once to bfloat16, as torch.autocast's convolution on cuDNN.
#include "remat/gpu/cuda_check.hpp"
#include "remat/gpu/cudnn_ops.hpp"

namespace remat::gpu {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

}  // namespace

Status ConvOp::forwardHalf(cudnnHandle_t handle, const void* x, const void* w, void* y, void* workspace) const {
  if (!geometry_.bfloat16) return Status::internal("gpu: forwardHalf on a float32 convolution");
  REMAT_CUDNN_CHECK(cudnnConvolutionForward(handle, &kOne, xDesc_.get(), x, wDesc_.get(), w, convForward_.get(),
                                            static_cast<cudnnConvolutionFwdAlgo_t>(forward_.algo), workspace,
                                            forward_.workspaceBytes, &kZero, yDesc_.get(), y));
  return Status::ok();
}

Status ConvOp::backwardDataHalf(cudnnHandle_t handle, const void* dy, const void* w, void* dx, void* workspace,
                                bool accumulate) const {
  if (!geometry_.bfloat16) return Status::internal("gpu: backwardDataHalf on a float32 convolution");
  REMAT_CUDNN_CHECK(cudnnConvolutionBackwardData(handle, &kOne, wDesc_.get(), w, yDesc_.get(), dy, convData_.get(),
                                                 static_cast<cudnnConvolutionBwdDataAlgo_t>(data_.algo), workspace,
                                                 data_.workspaceBytes, accumulate ? &kOne : &kZero, xDesc_.get(), dx));
  return Status::ok();
}

Status ConvOp::backwardFilterHalf(cudnnHandle_t handle, const void* x, const void* dy, void* dw,
                                  void* workspace) const {
  if (!geometry_.bfloat16) return Status::internal("gpu: backwardFilterHalf on a float32 convolution");
  REMAT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, &kOne, xDesc_.get(), x, yDesc_.get(), dy, convFilter_.get(),
                                                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(filter_.algo),
                                                   workspace, filter_.workspaceBytes, &kZero, wDesc_.get(), dw));
  return Status::ok();
}

Status PoolOp::forwardHalf(cudnnHandle_t handle, const void* x, void* y) const {
  REMAT_CUDNN_CHECK(cudnnPoolingForward(handle, pool_.get(), &kOne, xDesc_.get(), x, &kZero, yDesc_.get(), y));
  return Status::ok();
}

Status PoolOp::backwardHalf(cudnnHandle_t handle, const void* x, const void* y, const void* dy, void* dx) const {
  // Average pooling reads neither x nor y; the API wants pointers of their shapes (as backward).
  if (geometry_.mode == PoolMode::AverageIncludePadding) {
    x = dx;
    y = dy;
  }
  REMAT_CUDNN_CHECK(cudnnPoolingBackward(handle, pool_.get(), &kOne, yDesc_.get(), y, yDesc_.get(), dy, xDesc_.get(), x,
                                         &kZero, xDesc_.get(), dx));
  return Status::ok();
}

}  // namespace remat::gpu
