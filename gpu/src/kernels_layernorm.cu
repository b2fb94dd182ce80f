// Layer normalization over the last axis of a row-major [rows][features] matrix, in training mode,
// as PyTorch's native_layer_norm: the forward saves each row's mean and rstd = 1 / sqrt(var + eps)
// (float32, E's 2 * rows floats), the backward reads x, them and the weight. One block per row with
// a fixed shared-memory tree, and one thread per feature summing the rows in order for the weight
// and bias gradients: bitwise reproducible, no atomics.
#include "kernels.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

constexpr int kThreads = 256;

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
__global__ void layerNormForwardKernel(Index features, float epsilon, const float* x, const float* weightBias, float* y,
                                       float* mean, float* rstd) {
  __shared__ float partial[kThreads];
  const Index r = blockIdx.x;
  const float* row = x + r * features;
  float local = 0.0f;
  for (Index f = threadIdx.x; f < features; f += blockDim.x) local += row[f];
  const float mu = blockSum(local, partial) / static_cast<float>(features);
  local = 0.0f;
  for (Index f = threadIdx.x; f < features; f += blockDim.x) local += (row[f] - mu) * (row[f] - mu);
  const float inv = rsqrtf(blockSum(local, partial) / static_cast<float>(features) + epsilon);
  for (Index f = threadIdx.x; f < features; f += blockDim.x)
    y[r * features + f] = (row[f] - mu) * inv * weightBias[f] + weightBias[features + f];
  if (threadIdx.x == 0 && mean != nullptr) {
    mean[r] = mu;
    rstd[r] = inv;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight, xhat = (x - mean) * rstd.
__global__ void layerNormInputGradKernel(Index features, const float* x, const float* dy, const float* weight,
                                         const float* mean, const float* rstd, float* dx) {
  __shared__ float partial[kThreads];
  const Index r = blockIdx.x;
  const float mu = mean[r], inv = rstd[r];
  const float* row = x + r * features;
  const float* grad = dy + r * features;
  float sumG = 0.0f, sumGx = 0.0f;
  for (Index f = threadIdx.x; f < features; f += blockDim.x) {
    const float g = grad[f] * weight[f];
    sumG += g;
    sumGx += g * (row[f] - mu) * inv;
  }
  const float meanG = blockSum(sumG, partial) / static_cast<float>(features);
  const float meanGx = blockSum(sumGx, partial) / static_cast<float>(features);
  for (Index f = threadIdx.x; f < features; f += blockDim.x) {
    const float xhat = (row[f] - mu) * inv;
    dx[r * features + f] = inv * (grad[f] * weight[f] - meanG - xhat * meanGx);
  }
}

// d(weight)[f] += sum over rows of dy * xhat; d(bias)[f] += sum over rows of dy, in row order.
__global__ void layerNormParamGradKernel(Index rows, Index features, const float* x, const float* dy, const float* mean,
                                         const float* rstd, float* dWeightBias) {
  for (Index f = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; f < features;
       f += static_cast<Index>(gridDim.x) * blockDim.x) {
    float dw = 0.0f, db = 0.0f;
    for (Index r = 0; r < rows; ++r) {
      const float grad = dy[r * features + f];
      dw += grad * (x[r * features + f] - mean[r]) * rstd[r];
      db += grad;
    }
    dWeightBias[f] += dw;
    dWeightBias[features + f] += db;
  }
}

unsigned rowBlocks(Index rows) { return static_cast<unsigned>(rows); }

}  // namespace

Status layerNormForward(cudaStream_t stream, Index rows, Index features, float epsilon, const float* x,
                        const float* weightBias, float* y, float* stats) {
  if (rows == 0 || features == 0) return Status::ok();
  if (rows > 2147483647) return Status::invalid("layer norm over more than 2^31 - 1 rows");
  layerNormForwardKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(features, epsilon, x, weightBias, y, stats,
                                                                   stats != nullptr ? stats + rows : nullptr);
  REMAT_CUDA_CHECK_LAUNCH("layerNormForwardKernel");
  return Status::ok();
}

Status layerNormBackward(cudaStream_t stream, Index rows, Index features, const float* x, const float* dy,
                         const float* weightBias, const float* stats, float* dx, float* dWeightBias) {
  if (rows == 0 || features == 0) return Status::ok();
  if (rows > 2147483647) return Status::invalid("layer norm over more than 2^31 - 1 rows");
  if (dx != nullptr) {
    layerNormInputGradKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(features, x, dy, weightBias, stats, stats + rows,
                                                                       dx);
    REMAT_CUDA_CHECK_LAUNCH("layerNormInputGradKernel");
  }
  const Index blocks = (features + kThreads - 1) / kThreads;
  layerNormParamGradKernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(
      rows, features, x, dy, stats, stats + rows, dWeightBias);
  REMAT_CUDA_CHECK_LAUNCH("layerNormParamGradKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
