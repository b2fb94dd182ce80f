#include "remat/gpu/cuda_resources.hpp"

#include <limits>
#include <string>

#include "half_type.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {

namespace {

std::string dimsToString(const Dims4& d) {
  return "[" + std::to_string(d.n) + ", " + std::to_string(d.c) + ", " + std::to_string(d.h) + ", " +
         std::to_string(d.w) + "]";
}

}  // namespace

Result<Dims4> toDims4(const Shape& shape) {
  if (shape.size() != 2 && shape.size() != 4)
    return Status::invalid("the GPU backend takes [N, C] or [N, C, H, W] tensors, got " + shapeToString(shape));
  for (auto d : shape) {
    if (d <= 0 || d > std::numeric_limits<int>::max())
      return Status::invalid("tensor shape " + shapeToString(shape) + " has a dimension outside 1..2^31-1 (cuDNN)");
  }
  Dims4 dims;
  dims.n = static_cast<int>(shape[0]);
  dims.c = static_cast<int>(shape[1]);
  if (shape.size() == 4) {
    dims.h = static_cast<int>(shape[2]);
    dims.w = static_cast<int>(shape[3]);
  }
  // cuDNN's packed strides are ints as well.
  if (dims.elements() > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    return Status::invalid("tensor shape " + shapeToString(shape) + " has more than 2^31-1 elements (cuDNN)");
  return dims;
}

Result<Stream> createStream() {
  cudaStream_t stream = nullptr;
  REMAT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream(stream);
}

Result<Event> createEvent() {
  cudaEvent_t event = nullptr;
  REMAT_CUDA_CHECK(cudaEventCreate(&event));
  return Event(event);
}

Result<CudnnHandle> createCudnnHandle(cudaStream_t stream) {
  cudnnHandle_t raw = nullptr;
  REMAT_CUDNN_CHECK(cudnnCreate(&raw));
  CudnnHandle handle(raw);
  REMAT_CUDNN_CHECK(cudnnSetStream(handle.get(), stream));
  return handle;
}

Result<CublasHandle> createCublasHandle(cudaStream_t stream, bool allowTf32) {
  cublasHandle_t raw = nullptr;
  REMAT_CUBLAS_CHECK(cublasCreate(&raw));
  CublasHandle handle(raw);
  REMAT_CUBLAS_CHECK(cublasSetStream(handle.get(), stream));
  // After cublasSetStream: setting a stream resets the workspace to cuBLAS's own default pool.
  REMAT_CUBLAS_CHECK(cublasSetWorkspace(handle.get(), nullptr, 0));
  REMAT_CUBLAS_CHECK(cublasSetAtomicsMode(handle.get(), CUBLAS_ATOMICS_NOT_ALLOWED));
  REMAT_CUBLAS_CHECK(cublasSetMathMode(handle.get(), allowTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  REMAT_CUBLAS_CHECK(cublasSetPointerMode(handle.get(), CUBLAS_POINTER_MODE_HOST));
  return handle;
}

Result<TensorDescriptor> createTensorDescriptor(const Dims4& dims, bool bfloat16) {
  cudnnTensorDescriptor_t raw = nullptr;
  REMAT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&raw));
  TensorDescriptor desc(raw);
  const cudnnDataType_t type = bfloat16 ? cudnnHalfType() : CUDNN_DATA_FLOAT;
  REMAT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc.get(), CUDNN_TENSOR_NCHW, type, dims.n, dims.c, dims.h, dims.w));
  return desc;
}

Result<TensorDescriptor> createChannelDescriptor(int channels) {
  return createTensorDescriptor(Dims4{1, channels, 1, 1});
}

Result<FilterDescriptor> createFilterDescriptor(const ConvGeometry& g) {
  if (g.groups <= 0 || g.input.c % g.groups != 0 || g.outChannels % g.groups != 0)
    return Status::invalid("convolution groups " + std::to_string(g.groups) + " do not divide the channels " +
                           std::to_string(g.input.c) + " -> " + std::to_string(g.outChannels));
  cudnnFilterDescriptor_t raw = nullptr;
  REMAT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&raw));
  FilterDescriptor desc(raw);
  const cudnnDataType_t type = g.bfloat16 ? cudnnHalfType() : CUDNN_DATA_FLOAT;
  REMAT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(desc.get(), type, CUDNN_TENSOR_NCHW, g.outChannels, g.input.c / g.groups,
                                               g.kernel, g.kernelW()));
  return desc;
}

Result<ConvolutionDescriptor> createConvolutionDescriptor(const ConvGeometry& g, bool allowTf32) {
  cudnnConvolutionDescriptor_t raw = nullptr;
  REMAT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&raw));
  ConvolutionDescriptor desc(raw);
  REMAT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(desc.get(), g.padding, g.paddingW(), g.stride, g.strideW(), 1, 1,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  REMAT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(desc.get(), g.groups));
  REMAT_CUDNN_CHECK(cudnnSetConvolutionMathType(desc.get(), allowTf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  return desc;
}

Result<Dims4> convolutionOutputDims(const ConvGeometry& g, bool allowTf32) {
  auto input = createTensorDescriptor(g.input, g.bfloat16);
  if (!input) return input.status();
  auto filter = createFilterDescriptor(g);
  if (!filter) return filter.status();
  auto conv = createConvolutionDescriptor(g, allowTf32);
  if (!conv) return conv.status();
  Dims4 out;
  REMAT_CUDNN_CHECK(
      cudnnGetConvolution2dForwardOutputDim(conv->get(), input->get(), filter->get(), &out.n, &out.c, &out.h, &out.w));
  // PyTorch's rule, which the chain's shape inference used: floor((in + 2p - k) / s) + 1.
  const Dims4 expected{g.input.n, g.outChannels, (g.input.h + 2 * g.padding - g.kernel) / g.stride + 1,
                       (g.input.w + 2 * g.paddingW() - g.kernelW()) / g.strideW() + 1};
  if (out != expected)
    return Status::internal("cuDNN's convolution output " + dimsToString(out) + " differs from PyTorch's " +
                            dimsToString(expected));
  return out;
}

Result<PoolingDescriptor> createPoolingDescriptor(const PoolGeometry& g) {
  cudnnPoolingDescriptor_t raw = nullptr;
  REMAT_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&raw));
  PoolingDescriptor desc(raw);
  const cudnnPoolingMode_t mode =
      g.mode == PoolMode::Max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
  REMAT_CUDNN_CHECK(cudnnSetPooling2dDescriptor(desc.get(), mode, CUDNN_PROPAGATE_NAN, g.kernel, g.kernel, g.padding,
                                                g.padding, g.stride, g.stride));
  return desc;
}

Result<Dims4> poolingOutputDims(const PoolGeometry& g) {
  auto input = createTensorDescriptor(g.input, g.bfloat16);
  if (!input) return input.status();
  auto pool = createPoolingDescriptor(g);
  if (!pool) return pool.status();
  Dims4 out;
  REMAT_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(pool->get(), input->get(), &out.n, &out.c, &out.h, &out.w));
  return out;
}

}  // namespace remat::gpu
