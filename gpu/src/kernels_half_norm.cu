// bf16-mixed's batch normalisation in training mode (kernels_half_conv.hpp): bfloat16 x, y, dy, dx
// with float32 scale, bias, their gradients and the saved mean and inverse standard deviation, as
// PyTorch's CUDA batch norm on a bfloat16 input under autocast. An own kernel rather than cuDNN's
// legacy batch norm, whose bfloat16 support could not be checked without a device. One block per
// channel, sums over the N * H * W elements in float32 through a fixed reduction tree: bitwise
// reproducible, no atomics.
#include "half_io.cuh"
#include "kernels_half_conv.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

constexpr int kNormThreads = 256;

using namespace half_io;  // f (widen) and h (round once)

// The block's sum of each thread's `value`, in a fixed tree; every thread gets the total.
__device__ float blockSum(float value, float* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kNormThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();
  return total;
}

// Element m of channel c: sample m / plane, position m % plane.
__device__ inline Index at(const Dims4& d, Index c, Index m, Index plane) {
  return ((m / plane) * d.c + c) * plane + m % plane;
}

__global__ void batchNormForwardHalfKernel(Dims4 d, float epsilon, const Bf16* x, const float* gamma, const float* beta,
                                           Bf16* y, float* stats) {
  __shared__ float shared[kNormThreads];
  const Index c = blockIdx.x, plane = d.h * d.w, count = d.n * plane;
  float sum = 0.0f;
  for (Index m = threadIdx.x; m < count; m += kNormThreads) sum += f(x[at(d, c, m, plane)]);
  const float mean = blockSum(sum, shared) / static_cast<float>(count);
  float squares = 0.0f;
  for (Index m = threadIdx.x; m < count; m += kNormThreads) {
    const float centred = f(x[at(d, c, m, plane)]) - mean;
    squares += centred * centred;
  }
  const float invStd = 1.0f / sqrtf(blockSum(squares, shared) / static_cast<float>(count) + epsilon);
  const float scale = gamma[c] * invStd, shift = beta[c] - mean * scale;
  for (Index m = threadIdx.x; m < count; m += kNormThreads) {
    const Index i = at(d, c, m, plane);
    y[i] = h(f(x[i]) * scale + shift);
  }
  if (stats != nullptr && threadIdx.x == 0) {
    stats[c] = mean;
    stats[d.c + c] = invStd;
  }
}

__global__ void batchNormBackwardHalfKernel(Dims4 d, const Bf16* x, const Bf16* dy, const float* gamma,
                                            const float* stats, Bf16* dx, float* dgamma, float* dbeta,
                                            bool accumulate) {
  __shared__ float shared[kNormThreads];
  const Index c = blockIdx.x, plane = d.h * d.w, count = d.n * plane;
  const float mean = stats[c], invStd = stats[d.c + c];
  float sumDy = 0.0f, sumDyXhat = 0.0f;
  for (Index m = threadIdx.x; m < count; m += kNormThreads) {
    const Index i = at(d, c, m, plane);
    const float g = f(dy[i]);
    sumDy += g;
    sumDyXhat += g * (f(x[i]) - mean) * invStd;
  }
  const float totalDy = blockSum(sumDy, shared);
  const float totalDyXhat = blockSum(sumDyXhat, shared);
  const float scale = gamma[c] * invStd, n = static_cast<float>(count);
  for (Index m = threadIdx.x; m < count; m += kNormThreads) {
    const Index i = at(d, c, m, plane);
    const float xhat = (f(x[i]) - mean) * invStd;
    const float g = scale * (f(dy[i]) - totalDy / n - xhat * totalDyXhat / n);
    dx[i] = h(accumulate ? f(dx[i]) + g : g);
  }
  if (threadIdx.x == 0) {
    dgamma[c] += totalDyXhat;
    dbeta[c] += totalDy;
  }
}

}  // namespace

Status batchNormForwardHalf(cudaStream_t stream, const Dims4& d, float epsilon, const Bf16* x, const float* gamma,
                            const float* beta, Bf16* y, float* stats) {
  if (d.c == 0 || d.n * d.h * d.w == 0) return Status::ok();
  batchNormForwardHalfKernel<<<static_cast<unsigned>(d.c), kNormThreads, 0, stream>>>(d, epsilon, x, gamma, beta, y,
                                                                                      stats);
  REMAT_CUDA_CHECK_LAUNCH("batchNormForwardHalfKernel");
  return Status::ok();
}

Status batchNormBackwardHalf(cudaStream_t stream, const Dims4& d, const Bf16* x, const Bf16* dy, const float* gamma,
                             const float* stats, Bf16* dx, float* dgamma, float* dbeta, bool accumulate) {
  if (d.c == 0 || d.n * d.h * d.w == 0) return Status::ok();
  if (stats == nullptr) return Status::internal("gpu: bfloat16 batch norm backward without its saved statistics");
  batchNormBackwardHalfKernel<<<static_cast<unsigned>(d.c), kNormThreads, 0, stream>>>(d, x, dy, gamma, stats, dx,
                                                                                       dgamma, dbeta, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("batchNormBackwardHalfKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
