// Kernels with reductions: adaptive average pooling and the softmax cross-entropy seed. Each output
// is reduced by one thread or one block in a fixed order, so results are bitwise reproducible. The
// adaptive pool's kernels are templated on the element type: bf16-mixed's (kernels_half_conv.hpp)
// run them on bfloat16, each sum in float32 and rounded once on write (half_io.cuh).
#include "half_io.cuh"
#include "kernels.hpp"
#include "kernels_half_conv.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

constexpr int kThreads = 256;

using half_io::load;   // widen (float passes through)
using half_io::store;  // round once for bfloat16

__device__ Index binStart(Index i, Index in, Index out) { return (i * in) / out; }
__device__ Index binEnd(Index i, Index in, Index out) { return ((i + 1) * in + out - 1) / out; }

// One thread per output element.
template <typename T>
__global__ void adaptiveAvgPoolForwardKernel(AdaptivePoolGeometry g, const T* x, T* y) {
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index ow = i % g.outWidth, oh = (i / g.outWidth) % g.outHeight, plane = i / (g.outWidth * g.outHeight);
    const Index h0 = binStart(oh, g.inHeight, g.outHeight), h1 = binEnd(oh, g.inHeight, g.outHeight);
    const Index w0 = binStart(ow, g.inWidth, g.outWidth), w1 = binEnd(ow, g.inWidth, g.outWidth);
    const T* in = x + plane * g.inHeight * g.inWidth;
    float sum = 0.0f;
    for (Index ih = h0; ih < h1; ++ih)
      for (Index iw = w0; iw < w1; ++iw) sum += load(in[ih * g.inWidth + iw]);
    y[i] = store<T>(sum / static_cast<float>((h1 - h0) * (w1 - w0)));
  }
}

// One thread per input element, gathering from every bin that contains it (no atomics).
template <typename T>
__global__ void adaptiveAvgPoolBackwardKernel(AdaptivePoolGeometry g, const T* dy, T* dx) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index iw = i % g.inWidth, ih = (i / g.inWidth) % g.inHeight, plane = i / (g.inWidth * g.inHeight);
    const T* grad = dy + plane * g.outHeight * g.outWidth;
    float sum = 0.0f;
    for (Index oh = 0; oh < g.outHeight; ++oh) {
      const Index h0 = binStart(oh, g.inHeight, g.outHeight), h1 = binEnd(oh, g.inHeight, g.outHeight);
      if (ih < h0 || ih >= h1) continue;
      for (Index ow = 0; ow < g.outWidth; ++ow) {
        const Index w0 = binStart(ow, g.inWidth, g.outWidth), w1 = binEnd(ow, g.inWidth, g.outWidth);
        if (iw < w0 || iw >= w1) continue;
        sum += load(grad[oh * g.outWidth + ow]) / static_cast<float>((h1 - h0) * (w1 - w0));
      }
    }
    dx[i] = store<T>(sum);
  }
}

// One block per sample: the row's maximum, then the sum of exponentials in double (as the CPU
// reference does), both with a fixed shared-memory tree.
__global__ void softmaxCrossEntropyBackwardKernel(Index classes, float invBatch, const float* logits,
                                                  const std::int64_t* labels, float* grad) {
  __shared__ float maxShared[kThreads];
  __shared__ double sumShared[kThreads];
  const Index n = blockIdx.x;
  const float* row = logits + n * classes;
  float* out = grad + n * classes;
  float localMax = -__int_as_float(0x7f800000);  // -inf
  for (Index k = threadIdx.x; k < classes; k += blockDim.x) localMax = row[k] > localMax ? row[k] : localMax;
  maxShared[threadIdx.x] = localMax;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s && maxShared[threadIdx.x + s] > maxShared[threadIdx.x])
      maxShared[threadIdx.x] = maxShared[threadIdx.x + s];
    __syncthreads();
  }
  const float maxValue = maxShared[0];
  double localSum = 0.0;
  for (Index k = threadIdx.x; k < classes; k += blockDim.x) localSum += exp(static_cast<double>(row[k] - maxValue));
  sumShared[threadIdx.x] = localSum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) sumShared[threadIdx.x] += sumShared[threadIdx.x + s];
    __syncthreads();
  }
  const double invSum = 1.0 / sumShared[0];
  const Index label = labels[n];
  for (Index k = threadIdx.x; k < classes; k += blockDim.x) {
    const float p = static_cast<float>(exp(static_cast<double>(row[k] - maxValue)) * invSum) * invBatch;
    out[k] = k == label ? p - invBatch : p;
  }
}

__global__ void channelBiasGradKernel(Index batch, Index channels, Index planeSize, const float* dy, float* db) {
  __shared__ float partial[kThreads];
  const Index c = blockIdx.x;
  float sum = 0.0f;
  for (Index n = 0; n < batch; ++n) {
    const float* plane = dy + (n * channels + c) * planeSize;
    for (Index i = threadIdx.x; i < planeSize; i += blockDim.x) sum += plane[i];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[c] += partial[0];
}

unsigned blocksFor(Index count) {
  const Index blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

// Each launches nothing for an empty tensor and checks the launch under the public launcher's kernel
// name (`launchName`: "launch of <kernel>", float32 and bfloat16 apart).
template <typename T>
Status launchAdaptiveForward(cudaStream_t stream, const AdaptivePoolGeometry& g, const T* x, T* y,
                             const char* launchName) {
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  if (count == 0) return Status::ok();
  adaptiveAvgPoolForwardKernel<T><<<blocksFor(count), kThreads, 0, stream>>>(g, x, y);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

template <typename T>
Status launchAdaptiveBackward(cudaStream_t stream, const AdaptivePoolGeometry& g, const T* dy, T* dx,
                              const char* launchName) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  if (count == 0) return Status::ok();
  adaptiveAvgPoolBackwardKernel<T><<<blocksFor(count), kThreads, 0, stream>>>(g, dy, dx);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

}  // namespace

Status adaptiveAvgPoolForward(cudaStream_t stream, const AdaptivePoolGeometry& g, const float* x, float* y) {
  return launchAdaptiveForward(stream, g, x, y, "launch of adaptiveAvgPoolForwardKernel");
}

Status adaptiveAvgPoolBackward(cudaStream_t stream, const AdaptivePoolGeometry& g, const float* dy, float* dx) {
  return launchAdaptiveBackward(stream, g, dy, dx, "launch of adaptiveAvgPoolBackwardKernel");
}

Status adaptiveAvgPoolForwardHalf(cudaStream_t stream, const AdaptivePoolGeometry& g, const Bf16* x, Bf16* y) {
  return launchAdaptiveForward(stream, g, x, y, "launch of adaptiveAvgPoolForwardHalfKernel");
}

Status adaptiveAvgPoolBackwardHalf(cudaStream_t stream, const AdaptivePoolGeometry& g, const Bf16* dy, Bf16* dx) {
  return launchAdaptiveBackward(stream, g, dy, dx, "launch of adaptiveAvgPoolBackwardHalfKernel");
}

Status accumulateChannelBiasGrad(cudaStream_t stream, Index batch, Index channels, Index planeSize, const float* dy,
                                 float* db) {
  if (channels == 0) return Status::ok();
  if (channels > 0x7fffffff) return Status::invalid("bias gradient: " + std::to_string(channels) + " channels");
  channelBiasGradKernel<<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(batch, channels, planeSize, dy, db);
  REMAT_CUDA_CHECK_LAUNCH("channelBiasGradKernel");
  return Status::ok();
}

Status softmaxCrossEntropyBackward(cudaStream_t stream, Index batch, Index classes, const float* logits,
                                   const std::int64_t* labels, float* grad) {
  if (batch == 0 || classes == 0) return Status::ok();
  if (batch > 0x7fffffff)
    return Status::invalid("softmax cross-entropy: batch " + std::to_string(batch) + " too large");
  softmaxCrossEntropyBackwardKernel<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(
      classes, 1.0f / static_cast<float>(batch), logits, labels, grad);
  REMAT_CUDA_CHECK_LAUNCH("softmaxCrossEntropyBackwardKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
