// ConvNeXt's bf16-mixed inner ops (kernels_half_convnext.hpp). The layer norm is
// kernels_layernorm.cu's (one thread block per position, a fixed-order tree sum: bitwise
// reproducible) reading bfloat16 as float32 and rounding its output and d(input) once; its
// statistics and parameter gradients stay float32. The element-wise kernels run one thread per
// element; layer_scale's gamma gradient one thread per channel over (n, h, w) in order.
#include "half_io.cuh"
#include "kernels_half_convnext.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using namespace half_io;  // the grid helpers, f (widen) and h (round once)

constexpr int kRowThreads = 256;

__device__ __forceinline__ Index at(Index r, Index c, Index features, Index inner) {
  return (r / inner) * features * inner + c * inner + r % inner;
}

__device__ float blockSum(float value, float* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const float sum = shared[0];
  __syncthreads();
  return sum;
}

__global__ void layerNormForwardHalfKernel(Index features, Index inner, float epsilon, const Bf16* x,
                                           const float* weightBias, Bf16* y, float* mean, float* rstd) {
  __shared__ float partial[kRowThreads];
  const Index r = blockIdx.x;
  float local = 0.0f;
  for (Index c = threadIdx.x; c < features; c += blockDim.x) local += f(x[at(r, c, features, inner)]);
  const float mu = blockSum(local, partial) / static_cast<float>(features);
  local = 0.0f;
  for (Index c = threadIdx.x; c < features; c += blockDim.x) {
    const float d = f(x[at(r, c, features, inner)]) - mu;
    local += d * d;
  }
  const float inv = rsqrtf(blockSum(local, partial) / static_cast<float>(features) + epsilon);
  for (Index c = threadIdx.x; c < features; c += blockDim.x) {
    const Index i = at(r, c, features, inner);
    y[i] = h((f(x[i]) - mu) * inv * weightBias[c] + weightBias[features + c]);
  }
  if (threadIdx.x == 0 && mean != nullptr) {
    mean[r] = mu;
    rstd[r] = inv;
  }
}

__global__ void layerNormInputGradHalfKernel(Index features, Index inner, const Bf16* x, const Bf16* dy,
                                             const float* weight, const float* mean, const float* rstd, Bf16* dx,
                                             bool accumulate) {
  __shared__ float partial[kRowThreads];
  const Index r = blockIdx.x;
  const float mu = mean[r], inv = rstd[r];
  float sumG = 0.0f, sumGx = 0.0f;
  for (Index c = threadIdx.x; c < features; c += blockDim.x) {
    const Index i = at(r, c, features, inner);
    const float g = f(dy[i]) * weight[c];
    sumG += g;
    sumGx += g * (f(x[i]) - mu) * inv;
  }
  const float meanG = blockSum(sumG, partial) / static_cast<float>(features);
  const float meanGx = blockSum(sumGx, partial) / static_cast<float>(features);
  for (Index c = threadIdx.x; c < features; c += blockDim.x) {
    const Index i = at(r, c, features, inner);
    const float xhat = (f(x[i]) - mu) * inv;
    const float value = inv * (f(dy[i]) * weight[c] - meanG - xhat * meanGx);
    dx[i] = h(accumulate ? f(dx[i]) + value : value);
  }
}

__global__ void layerNormParamGradHalfKernel(Index rows, Index features, Index inner, const Bf16* x, const Bf16* dy,
                                             const float* mean, const float* rstd, float* dWeightBias) {
  for (Index c = firstIndex(); c < features; c += gridStride()) {
    float dw = 0.0f, db = 0.0f;
    for (Index r = 0; r < rows; ++r) {
      const Index i = at(r, c, features, inner);
      const float grad = f(dy[i]);
      dw += grad * (f(x[i]) - mean[r]) * rstd[r];
      db += grad;
    }
    dWeightBias[c] += dw;
    dWeightBias[features + c] += db;
  }
}

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

Status checkRows(Index rows, Index inner) {
  if (rows > 2147483647) return Status::invalid("layer norm over more than 2^31 - 1 rows");
  if (inner <= 0 || rows % inner != 0) return Status::internal("layer norm: the rows are not whole images");
  return Status::ok();
}

}  // namespace

Status layerNormForwardHalf(cudaStream_t stream, Index rows, Index features, float epsilon, const Bf16* x,
                            const float* weightBias, Bf16* y, float* stats, Index inner) {
  if (rows == 0 || features == 0) return Status::ok();
  REMAT_RETURN_IF_ERROR(checkRows(rows, inner));
  layerNormForwardHalfKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      features, inner, epsilon, x, weightBias, y, stats, stats != nullptr ? stats + rows : nullptr);
  REMAT_CUDA_CHECK_LAUNCH("layerNormForwardHalfKernel");
  return Status::ok();
}

Status layerNormBackwardHalf(cudaStream_t stream, Index rows, Index features, const Bf16* x, const Bf16* dy,
                             const float* weightBias, const float* stats, Bf16* dx, float* dWeightBias, Index inner,
                             bool accumulate) {
  if (rows == 0 || features == 0) return Status::ok();
  REMAT_RETURN_IF_ERROR(checkRows(rows, inner));
  if (dx != nullptr) {
    layerNormInputGradHalfKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        features, inner, x, dy, weightBias, stats, stats + rows, dx, accumulate);
    REMAT_CUDA_CHECK_LAUNCH("layerNormInputGradHalfKernel");
  }
  layerNormParamGradHalfKernel<<<blocksFor(features), grid::kThreads, 0, stream>>>(rows, features, inner, x, dy, stats,
                                                                                   stats + rows, dWeightBias);
  REMAT_CUDA_CHECK_LAUNCH("layerNormParamGradHalfKernel");
  return Status::ok();
}

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
