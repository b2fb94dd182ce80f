#pragma once
// RAII owners of CUDA, cuDNN and cuBLAS objects: streams, events, library handles and the cuDNN
// descriptors. Each is created through a factory that returns Result<> (creation can fail: no
// device, out of memory) and destroyed exactly once, so an error anywhere frees everything.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <type_traits>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat::gpu {

// Owns one handle of pointer type Handle (they all are pointers to opaque structs) and destroys it
// with Destroy. Move-only.
template <typename Handle, auto Destroy>
class UniqueHandle {
  static_assert(std::is_pointer_v<Handle>);

 public:
  UniqueHandle() = default;
  explicit UniqueHandle(Handle handle) : handle_(handle) {}
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = other.handle_;
      other.handle_ = nullptr;
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  Handle get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }
  void reset() {
    if (handle_ != nullptr) (void)Destroy(handle_);  // nothing useful to do with a failed destroy
    handle_ = nullptr;
  }

 private:
  Handle handle_ = nullptr;
};

using Stream = UniqueHandle<cudaStream_t, cudaStreamDestroy>;
using Event = UniqueHandle<cudaEvent_t, cudaEventDestroy>;
using CudnnHandle = UniqueHandle<cudnnHandle_t, cudnnDestroy>;
using CublasHandle = UniqueHandle<cublasHandle_t, cublasDestroy>;
using TensorDescriptor = UniqueHandle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = UniqueHandle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = UniqueHandle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using PoolingDescriptor = UniqueHandle<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;

// A 4-D NCHW shape as cuDNN's int dimensions. 2-D [N, C] tensors are [N, C, 1, 1].
struct Dims4 {
  int n = 0, c = 0, h = 1, w = 1;
  std::uint64_t elements() const {
    return static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(c) * static_cast<std::uint64_t>(h) *
           static_cast<std::uint64_t>(w);
  }
  bool operator==(const Dims4&) const = default;
};

// Checks the rank (2 or 4) and that every dimension fits cuDNN's int; the error names the shape.
Result<Dims4> toDims4(const Shape& shape);

Result<Stream> createStream();  // non-blocking with respect to the legacy default stream
Result<Event> createEvent();    // with timing
Result<CudnnHandle> createCudnnHandle(cudaStream_t stream);
// cuBLAS without a workspace of its own (cublasSetWorkspace(nullptr, 0)): every byte it uses comes
// from us, so the memory counts stay exact; deterministic (no atomics); exact float32 math unless
// allowTf32.
Result<CublasHandle> createCublasHandle(cudaStream_t stream, bool allowTf32);

// Fully packed NCHW, float32 unless bfloat16 (bf16-mixed's activations).
Result<TensorDescriptor> createTensorDescriptor(const Dims4& dims, bool bfloat16 = false);
// Per-channel [1, C, 1, 1] (biases, batch-norm scale and statistics).
Result<TensorDescriptor> createChannelDescriptor(int channels);

struct ConvGeometry {
  Dims4 input;
  int outChannels = 0;
  int kernel = 1, stride = 1, padding = 0, groups = 1;  // the height's (and the width's when square)
  // The width's where they differ (Inception-v3's 1x7 and 7x1); -1 is the height's.
  int kernelWidth = -1, strideWidth = -1, paddingWidth = -1;
  int kernelW() const { return kernelWidth < 0 ? kernel : kernelWidth; }
  int strideW() const { return strideWidth < 0 ? stride : strideWidth; }
  int paddingW() const { return paddingWidth < 0 ? padding : paddingWidth; }
  // A mixed precision: x, y and the filter in the half type (bfloat16 under bf16-mixed, float16
  // under fp16-mixed: gpu/src/half_type.hpp's current one), still float32 accumulation (cuDNN's
  // PSEUDO_BFLOAT16 / PSEUDO_HALF configurations).
  bool bfloat16 = false;
};
// [K, C / groups, kh, kw], NCHW, float32 or the half type as the geometry says.
Result<FilterDescriptor> createFilterDescriptor(const ConvGeometry& geometry);
// Cross-correlation (PyTorch's convolution), float32 accumulation, the groups set; FMA math only
// unless allowTf32 (TF32 tensor cores round inputs to 10 mantissa bits).
Result<ConvolutionDescriptor> createConvolutionDescriptor(const ConvGeometry& geometry, bool allowTf32);
// The output dimensions cuDNN computes for the convolution (checks them against our own rule).
Result<Dims4> convolutionOutputDims(const ConvGeometry& geometry, bool allowTf32);

enum class PoolMode { Max, AverageIncludePadding };
struct PoolGeometry {
  Dims4 input;
  int kernel = 1, stride = 1, padding = 0;
  PoolMode mode = PoolMode::Max;
  bool bfloat16 = false;  // a mixed precision: x and y in the half type (bfloat16 or float16), as ConvGeometry
};
// Max pooling is deterministic in cuDNN's CUDNN_POOLING_MAX_DETERMINISTIC mode; average pooling
// counts the padding in the divisor (PyTorch's count_include_pad=True).
Result<PoolingDescriptor> createPoolingDescriptor(const PoolGeometry& geometry);
Result<Dims4> poolingOutputDims(const PoolGeometry& geometry);

}  // namespace remat::gpu
