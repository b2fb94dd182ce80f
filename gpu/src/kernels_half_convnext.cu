// ConvNeXt's bf16-mixed inner ops (kernels_half_convnext.hpp). The layer norm is
// kernels_layernorm.cu's kernels, templated on the element type (bfloat16 read as float32, its
// output and d(input) rounded once; statistics and parameter gradients float32). The element-wise
// kernels here run one thread per element; layer_scale's gamma gradient one thread per channel
// over (n, h, w) in order.
#include "half_io.cuh"
#include "kernels_half_convnext.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using namespace half_io;  // the grid helpers, f (widen) and h (round once)

__global__ void layerScaleForwardKernel(Dims4 d, const Bf16* x, const float* gamma, float* y) {
  const Index count = d.n * d.c * d.h * d.w, plane = d.h * d.w;
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] = f(x[i]) * gamma[(i / plane) % d.c];
}

__global__ void layerScaleInputGradKernel(Dims4 d, const float* dy, const float* gamma, Bf16* dx, bool accumulate) {
  const Index count = d.n * d.c * d.h * d.w, plane = d.h * d.w;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = dy[i] * gamma[(i / plane) % d.c];
    dx[i] = h(accumulate ? f(dx[i]) + g : g);
  }
}

__global__ void layerScaleGammaGradKernel(Dims4 d, const float* dy, const Bf16* x, float* dGamma) {
  const Index plane = d.h * d.w;
  for (Index c = firstIndex(); c < d.c; c += gridStride()) {
    float sum = 0.0f;
    for (Index n = 0; n < d.n; ++n)
      for (Index p = 0; p < plane; ++p) {
        const Index i = (n * d.c + c) * plane + p;
        sum += dy[i] * f(x[i]);
      }
    dGamma[c] += sum;
  }
}

__device__ inline float load(const void* p, bool half, Index i) {
  return half ? f(static_cast<const Bf16*>(p)[i]) : static_cast<const float*>(p)[i];
}

__global__ void addMixedKernel(Index count, const void* a, bool aHalf, const void* b, bool bHalf, float* y) {
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] = load(a, aHalf, i) + load(b, bHalf, i);
}

__global__ void copyOrAddFloatToHalfKernel(Index count, const float* g, Bf16* d, bool accumulate) {
  for (Index i = firstIndex(); i < count; i += gridStride()) d[i] = h(accumulate ? f(d[i]) + g[i] : g[i]);
}

}  // namespace

Status layerScaleForwardHalf(cudaStream_t stream, const Dims4& d, const Bf16* x, const float* gamma, float* y) {
  const Index count = d.n * d.c * d.h * d.w;
  if (count == 0) return Status::ok();
  layerScaleForwardKernel<<<blocksFor(count), grid::kThreads, 0, stream>>>(d, x, gamma, y);
  REMAT_CUDA_CHECK_LAUNCH("layerScaleForwardKernel");
  return Status::ok();
}

Status layerScaleBackwardHalf(cudaStream_t stream, const Dims4& d, const float* dy, const Bf16* x, const float* gamma,
                              Bf16* dx, bool accumulate, float* dGamma) {
  const Index count = d.n * d.c * d.h * d.w;
  if (count == 0) return Status::ok();
  if (dx != nullptr) {
    layerScaleInputGradKernel<<<blocksFor(count), grid::kThreads, 0, stream>>>(d, dy, gamma, dx, accumulate);
    REMAT_CUDA_CHECK_LAUNCH("layerScaleInputGradKernel");
  }
  layerScaleGammaGradKernel<<<blocksFor(d.c), grid::kThreads, 0, stream>>>(d, dy, x, dGamma);
  REMAT_CUDA_CHECK_LAUNCH("layerScaleGammaGradKernel");
  return Status::ok();
}

Status addMixed(cudaStream_t stream, Index count, const void* a, bool aHalf, const void* b, bool bHalf, float* y) {
  if (count == 0) return Status::ok();
  addMixedKernel<<<blocksFor(count), grid::kThreads, 0, stream>>>(count, a, aHalf, b, bHalf, y);
  REMAT_CUDA_CHECK_LAUNCH("addMixedKernel");
  return Status::ok();
}

Status copyOrAddFloatToHalf(cudaStream_t stream, Index count, const float* g, Bf16* d, bool accumulate) {
  if (count == 0) return Status::ok();
  copyOrAddFloatToHalfKernel<<<blocksFor(count), grid::kThreads, 0, stream>>>(count, g, d, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("copyOrAddFloatToHalfKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
