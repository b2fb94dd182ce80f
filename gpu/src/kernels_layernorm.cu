// Layer normalization over the last axis of a row-major [rows][features] matrix, or over the
// channels of an NCHW tensor (ConvNeXt's LayerNorm2d: a row is one of the N*H*W positions, its
// features `inner` = H*W floats apart), in training mode,
// as PyTorch's native_layer_norm: the forward saves each row's mean and rstd = 1 / sqrt(var + eps)
// (float32, E's 2 * rows floats), the backward reads x, them and the weight. One block per row with
// a fixed shared-memory tree, and one thread per feature summing the rows in order for the weight
// and bias gradients: bitwise reproducible, no atomics. The kernels are templated on the element
// type of x, y, dy and dx: ConvNeXt's bf16-mixed layer norm (kernels_half_convnext.hpp) reads
// bfloat16 as float32 and rounds its output and d(input) once (half_io.cuh); its statistics and
// parameter gradients stay float32.
#include "half_io.cuh"
#include "kernels.hpp"
#include "kernels_half_convnext.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

constexpr int kThreads = 256;

using half_io::load;   // widen (float passes through)
using half_io::store;  // round once for bfloat16

// Feature f of row r in [N][features][inner] with rows the N * inner positions (inner = 1: the
// row-major [rows][features] matrix).
__device__ __forceinline__ Index at(Index r, Index f, Index features, Index inner) {
  return (r / inner) * features * inner + f * inner + r % inner;
}

// The block's sum of `value` (every thread gets it); `shared` holds kThreads floats.
__device__ float blockSum(float value, float* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const float sum = shared[0];
  __syncthreads();  // shared is reused by the next call
  return sum;
}

// Two passes over the row (mean, then the biased variance of x - mean), as PyTorch's CPU kernel.
template <typename T>
__global__ void layerNormForwardKernel(Index features, Index inner, float epsilon, const T* x, const float* weightBias,
                                       T* y, float* mean, float* rstd) {
  __shared__ float partial[kThreads];
  const Index r = blockIdx.x;
  float local = 0.0f;
  for (Index f = threadIdx.x; f < features; f += blockDim.x) local += load(x[at(r, f, features, inner)]);
  const float mu = blockSum(local, partial) / static_cast<float>(features);
  local = 0.0f;
  for (Index f = threadIdx.x; f < features; f += blockDim.x) {
    const float d = load(x[at(r, f, features, inner)]) - mu;
    local += d * d;
  }
  const float inv = rsqrtf(blockSum(local, partial) / static_cast<float>(features) + epsilon);
  for (Index f = threadIdx.x; f < features; f += blockDim.x) {
    const Index i = at(r, f, features, inner);
    y[i] = store<T>((load(x[i]) - mu) * inv * weightBias[f] + weightBias[features + f]);
  }
  if (threadIdx.x == 0 && mean != nullptr) {
    mean[r] = mu;
    rstd[r] = inv;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight, xhat = (x - mean) * rstd.
// dx is written, or added to when `accumulate` (an inner op's input read by more than one op).
template <typename T>
__global__ void layerNormInputGradKernel(Index features, Index inner, const T* x, const T* dy, const float* weight,
                                         const float* mean, const float* rstd, T* dx, bool accumulate) {
  __shared__ float partial[kThreads];
  const Index r = blockIdx.x;
  const float mu = mean[r], inv = rstd[r];
  float sumG = 0.0f, sumGx = 0.0f;
  for (Index f = threadIdx.x; f < features; f += blockDim.x) {
    const Index i = at(r, f, features, inner);
    const float g = load(dy[i]) * weight[f];
    sumG += g;
    sumGx += g * (load(x[i]) - mu) * inv;
  }
  const float meanG = blockSum(sumG, partial) / static_cast<float>(features);
  const float meanGx = blockSum(sumGx, partial) / static_cast<float>(features);
  for (Index f = threadIdx.x; f < features; f += blockDim.x) {
    const Index i = at(r, f, features, inner);
    const float xhat = (load(x[i]) - mu) * inv;
    const float value = inv * (load(dy[i]) * weight[f] - meanG - xhat * meanGx);
    dx[i] = store<T>(accumulate ? load(dx[i]) + value : value);
  }
}

// d(weight)[f] += sum over rows of dy * xhat; d(bias)[f] += sum over rows of dy, in row order.
template <typename T>
__global__ void layerNormParamGradKernel(Index rows, Index features, Index inner, const T* x, const T* dy,
                                         const float* mean, const float* rstd, float* dWeightBias) {
  for (Index f = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; f < features;
       f += static_cast<Index>(gridDim.x) * blockDim.x) {
    float dw = 0.0f, db = 0.0f;
    for (Index r = 0; r < rows; ++r) {
      const Index i = at(r, f, features, inner);
      const float grad = load(dy[i]);
      dw += grad * (load(x[i]) - mean[r]) * rstd[r];
      db += grad;
    }
    dWeightBias[f] += dw;
    dWeightBias[features + f] += db;
  }
}

unsigned rowBlocks(Index rows) { return static_cast<unsigned>(rows); }

Status checkRows(Index rows, Index inner) {
  if (rows > 2147483647) return Status::invalid("layer norm over more than 2^31 - 1 rows");
  if (inner <= 0 || rows % inner != 0) return Status::internal("layer norm: the rows are not whole images");
  return Status::ok();
}

// The launch names each launcher checks its kernels under (float32 and bfloat16 keep their own).
struct LayerNormLaunchNames {
  const char* forward;
  const char* inputGrad;
  const char* paramGrad;
};
constexpr LayerNormLaunchNames kFloatNames{"launch of layerNormForwardKernel", "launch of layerNormInputGradKernel",
                                           "launch of layerNormParamGradKernel"};
constexpr LayerNormLaunchNames kHalfNames{"launch of layerNormForwardHalfKernel",
                                          "launch of layerNormInputGradHalfKernel",
                                          "launch of layerNormParamGradHalfKernel"};

template <typename T>
Status launchForward(cudaStream_t stream, Index rows, Index features, float epsilon, const T* x,
                     const float* weightBias, T* y, float* stats, Index inner, const LayerNormLaunchNames& names) {
  if (rows == 0 || features == 0) return Status::ok();
  REMAT_RETURN_IF_ERROR(checkRows(rows, inner));
  layerNormForwardKernel<T><<<rowBlocks(rows), kThreads, 0, stream>>>(features, inner, epsilon, x, weightBias, y, stats,
                                                                      stats != nullptr ? stats + rows : nullptr);
  return cudaStatus(cudaGetLastError(), names.forward, __FILE__, __LINE__);
}

// paramBlocks: the float32 launcher's capped grid or the bfloat16 one's grid::blocksFor (either
// covers every feature: the kernel's grid-stride loop gives each the same sum).
template <typename T>
Status launchBackward(cudaStream_t stream, Index rows, Index features, const T* x, const T* dy, const float* weightBias,
                      const float* stats, T* dx, float* dWeightBias, Index inner, bool accumulate, unsigned paramBlocks,
                      const LayerNormLaunchNames& names) {
  if (rows == 0 || features == 0) return Status::ok();
  REMAT_RETURN_IF_ERROR(checkRows(rows, inner));
  if (dx != nullptr) {
    layerNormInputGradKernel<T><<<rowBlocks(rows), kThreads, 0, stream>>>(features, inner, x, dy, weightBias, stats,
                                                                          stats + rows, dx, accumulate);
    REMAT_RETURN_IF_ERROR(cudaStatus(cudaGetLastError(), names.inputGrad, __FILE__, __LINE__));
  }
  layerNormParamGradKernel<T>
      <<<paramBlocks, kThreads, 0, stream>>>(rows, features, inner, x, dy, stats, stats + rows, dWeightBias);
  return cudaStatus(cudaGetLastError(), names.paramGrad, __FILE__, __LINE__);
}

}  // namespace

Status layerNormForward(cudaStream_t stream, Index rows, Index features, float epsilon, const float* x,
                        const float* weightBias, float* y, float* stats, Index inner) {
  return launchForward(stream, rows, features, epsilon, x, weightBias, y, stats, inner, kFloatNames);
}

Status layerNormBackward(cudaStream_t stream, Index rows, Index features, const float* x, const float* dy,
                         const float* weightBias, const float* stats, float* dx, float* dWeightBias, Index inner,
                         bool accumulate) {
  const Index blocks = (features + kThreads - 1) / kThreads;
  return launchBackward(stream, rows, features, x, dy, weightBias, stats, dx, dWeightBias, inner, accumulate,
                        static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kFloatNames);
}

Status layerNormForwardHalf(cudaStream_t stream, Index rows, Index features, float epsilon, const Bf16* x,
                            const float* weightBias, Bf16* y, float* stats, Index inner) {
  return launchForward(stream, rows, features, epsilon, x, weightBias, y, stats, inner, kHalfNames);
}

Status layerNormBackwardHalf(cudaStream_t stream, Index rows, Index features, const Bf16* x, const Bf16* dy,
                             const float* weightBias, const float* stats, Bf16* dx, float* dWeightBias, Index inner,
                             bool accumulate) {
  return launchBackward(stream, rows, features, x, dy, weightBias, stats, dx, dWeightBias, inner, accumulate,
                        grid::blocksFor(features), kHalfNames);
}

}  // namespace remat::gpu::kernels
