// bf16-mixed's kernels around the convolutions and the adaptive pool (kernels_half_conv.hpp): each
// computes in float32 from bfloat16 and rounds once to nearest even, as kernels_half.cu.
#include "kernel_grid.cuh"
#include "kernels_half_conv.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

__device__ inline float f(Bf16 v) { return __bfloat162float(v); }
__device__ inline Bf16 h(float v) { return __float2bfloat16_rn(v); }

__device__ inline Index binStart(Index i, Index in, Index out) { return (i * in) / out; }
__device__ inline Index binEnd(Index i, Index in, Index out) { return ((i + 1) * in + out - 1) / out; }

__global__ void addChannelBiasHalfKernel(Index count, Index channels, Index plane, const float* bias, Bf16* y) {
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] = h(f(y[i]) + bias[(i / plane) % channels]);
}

// One thread per channel, samples then positions in order (no atomics).
__global__ void addHalfChannelBiasGradientKernel(Index batch, Index channels, Index plane, const Bf16* dy, float* db) {
  for (Index c = firstIndex(); c < channels; c += gridStride()) {
    float sum = 0.0f;
    for (Index n = 0; n < batch; ++n) {
      const Bf16* row = dy + (n * channels + c) * plane;
      for (Index i = 0; i < plane; ++i) sum += f(row[i]);
    }
    db[c] += f(h(sum));
  }
}

__global__ void adaptiveAvgPoolForwardHalfKernel(AdaptivePoolGeometry g, const Bf16* x, Bf16* y) {
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index ow = i % g.outWidth, oh = (i / g.outWidth) % g.outHeight, plane = i / (g.outWidth * g.outHeight);
    const Index h0 = binStart(oh, g.inHeight, g.outHeight), h1 = binEnd(oh, g.inHeight, g.outHeight);
    const Index w0 = binStart(ow, g.inWidth, g.outWidth), w1 = binEnd(ow, g.inWidth, g.outWidth);
    const Bf16* in = x + plane * g.inHeight * g.inWidth;
    float sum = 0.0f;
    for (Index ih = h0; ih < h1; ++ih)
      for (Index iw = w0; iw < w1; ++iw) sum += f(in[ih * g.inWidth + iw]);
    y[i] = h(sum / static_cast<float>((h1 - h0) * (w1 - w0)));
  }
}

// One thread per input element, gathering from every bin that holds it.
__global__ void adaptiveAvgPoolBackwardHalfKernel(AdaptivePoolGeometry g, const Bf16* dy, Bf16* dx) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index iw = i % g.inWidth, ih = (i / g.inWidth) % g.inHeight, plane = i / (g.inWidth * g.inHeight);
    const Bf16* grad = dy + plane * g.outHeight * g.outWidth;
    float sum = 0.0f;
    for (Index oh = 0; oh < g.outHeight; ++oh) {
      const Index h0 = binStart(oh, g.inHeight, g.outHeight), h1 = binEnd(oh, g.inHeight, g.outHeight);
      if (ih < h0 || ih >= h1) continue;
      for (Index ow = 0; ow < g.outWidth; ++ow) {
        const Index w0 = binStart(ow, g.inWidth, g.outWidth), w1 = binEnd(ow, g.inWidth, g.outWidth);
        if (iw >= w0 && iw < w1) sum += f(grad[oh * g.outWidth + ow]) / static_cast<float>((h1 - h0) * (w1 - w0));
      }
    }
    dx[i] = h(sum);
  }
}

}  // namespace

Status addChannelBiasHalf(cudaStream_t stream, Index batch, Index channels, Index plane, const float* bias, Bf16* y) {
  const Index count = batch * channels * plane;
  if (count == 0) return Status::ok();
  addChannelBiasHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, channels, plane, bias, y);
  REMAT_CUDA_CHECK_LAUNCH("addChannelBiasHalfKernel");
  return Status::ok();
}

Status addHalfChannelBiasGradient(cudaStream_t stream, Index batch, Index channels, Index plane, const Bf16* dy,
                                  float* db) {
  if (channels == 0) return Status::ok();
  addHalfChannelBiasGradientKernel<<<blocksFor(channels), kThreads, 0, stream>>>(batch, channels, plane, dy, db);
  REMAT_CUDA_CHECK_LAUNCH("addHalfChannelBiasGradientKernel");
  return Status::ok();
}

Status adaptiveAvgPoolForwardHalf(cudaStream_t stream, const AdaptivePoolGeometry& g, const Bf16* x, Bf16* y) {
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  if (count == 0) return Status::ok();
  adaptiveAvgPoolForwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(g, x, y);
  REMAT_CUDA_CHECK_LAUNCH("adaptiveAvgPoolForwardHalfKernel");
  return Status::ok();
}

Status adaptiveAvgPoolBackwardHalf(cudaStream_t stream, const AdaptivePoolGeometry& g, const Bf16* dy, Bf16* dx) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  if (count == 0) return Status::ok();
  adaptiveAvgPoolBackwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(g, dy, dx);
  REMAT_CUDA_CHECK_LAUNCH("adaptiveAvgPoolBackwardHalfKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
