// Elementwise kernels: activations, residual add, strided row copies (concatenation), dropout and
// the bias of linear layers. Grid-stride
// loops over 64-bit indices; every element is computed the same way whatever the launch shape, so
// results are bitwise reproducible.
#include "kernel_grid.cuh"
#include "kernels.hpp"
#include "pointwise.cuh"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

__global__ void reluForwardKernel(Index count, const float* x, float* y) {
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void reluBackwardKernel(Index count, const float* y, const float* dy, float* dx, bool accumulate) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = y[i] > 0.0f ? dy[i] : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void relu6ForwardKernel(Index count, const float* x, float* y) {
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] = x[i] > 0.0f ? (x[i] < 6.0f ? x[i] : 6.0f) : 0.0f;
}

__global__ void relu6BackwardKernel(Index count, const float* x, const float* dy, float* dx, bool accumulate) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = (x[i] > 0.0f && x[i] < 6.0f) ? dy[i] : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void pointwiseForwardKernel(Pointwise fn, Index count, const float* x, float* y) {
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] = pointwiseValue(fn, x[i]);
}

__global__ void pointwiseBackwardKernel(Pointwise fn, Index count, const float* saved, const float* dy, float* dx,
                                        bool accumulate) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = dy[i] * pointwiseSlope(fn, saved[i]);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void addKernel(Index count, const float* a, const float* b, float* out) {
  for (Index i = firstIndex(); i < count; i += gridStride()) out[i] = a[i] + b[i];
}

__global__ void addIntoKernel(Index count, const float* a, float* out) {
  for (Index i = firstIndex(); i < count; i += gridStride()) out[i] += a[i];
}

__global__ void addRowsIntoKernel(Index rows, Index width, const float* from, Index fromStride, float* to,
                                  Index toStride) {
  const Index count = rows * width;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index r = i / width, c = i % width;
    to[r * toStride + c] += from[r * fromStride + c];
  }
}

__global__ void dropoutForwardKernel(Index count, float threshold, float scale, bool dropAll, std::uint64_t key,
                                     const float* x, float* y, std::uint8_t* mask) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const bool keep = !dropAll && rng::uniform01(rng::at(key, static_cast<std::uint64_t>(i))) >= threshold;
    y[i] = keep ? x[i] * scale : 0.0f;
    if (mask != nullptr) mask[i] = keep ? 1 : 0;
  }
}

__global__ void dropoutBackwardKernel(Index count, float scale, const std::uint8_t* mask, const float* dy, float* dx,
                                      bool accumulate) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = mask[i] ? dy[i] * scale : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void addRowBiasKernel(Index rows, Index features, const float* bias, float* y) {
  const Index count = rows * features;
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] += bias[i % features];
}

// One thread per feature, rows summed in order: the same sum on every run.
__global__ void rowBiasGradKernel(Index rows, Index features, const float* dy, float* db) {
  for (Index f = firstIndex(); f < features; f += gridStride()) {
    float sum = 0.0f;
    for (Index r = 0; r < rows; ++r) sum += dy[r * features + f];
    db[f] += sum;
  }
}

}  // namespace

Status reluForward(cudaStream_t stream, Index count, const float* x, float* y) {
  if (count == 0) return Status::ok();
  reluForwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, x, y);
  REMAT_CUDA_CHECK_LAUNCH("reluForwardKernel");
  return Status::ok();
}

Status reluBackward(cudaStream_t stream, Index count, const float* y, const float* dy, float* dx, bool accumulate) {
  if (count == 0) return Status::ok();
  reluBackwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, y, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("reluBackwardKernel");
  return Status::ok();
}

Status relu6Forward(cudaStream_t stream, Index count, const float* x, float* y) {
  if (count == 0) return Status::ok();
  relu6ForwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, x, y);
  REMAT_CUDA_CHECK_LAUNCH("relu6ForwardKernel");
  return Status::ok();
}

Status relu6Backward(cudaStream_t stream, Index count, const float* x, const float* dy, float* dx, bool accumulate) {
  if (count == 0) return Status::ok();
  relu6BackwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, x, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("relu6BackwardKernel");
  return Status::ok();
}

Status pointwiseForward(cudaStream_t stream, Pointwise fn, Index count, const float* x, float* y) {
  if (count == 0) return Status::ok();
  pointwiseForwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(fn, count, x, y);
  REMAT_CUDA_CHECK_LAUNCH("pointwiseForwardKernel");
  return Status::ok();
}

Status pointwiseBackward(cudaStream_t stream, Pointwise fn, Index count, const float* saved, const float* dy, float* dx,
                         bool accumulate) {
  if (count == 0) return Status::ok();
  pointwiseBackwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(fn, count, saved, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("pointwiseBackwardKernel");
  return Status::ok();
}

Status add(cudaStream_t stream, Index count, const float* a, const float* b, float* out) {
  if (count == 0) return Status::ok();
  addKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, a, b, out);
  REMAT_CUDA_CHECK_LAUNCH("addKernel");
  return Status::ok();
}

Status copyOrAdd(cudaStream_t stream, Index count, const float* a, float* out, bool accumulate) {
  if (count == 0) return Status::ok();
  if (!accumulate) {
    REMAT_CUDA_CHECK(
        cudaMemcpyAsync(out, a, static_cast<std::size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  }
  addIntoKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, a, out);
  REMAT_CUDA_CHECK_LAUNCH("addIntoKernel");
  return Status::ok();
}

Status copyOrAddRows(cudaStream_t stream, Index rows, Index width, const float* from, Index fromStride, float* to,
                     Index toStride, bool accumulate) {
  if (rows * width == 0) return Status::ok();
  if (!accumulate) {
    constexpr std::size_t kFloat = sizeof(float);
    REMAT_CUDA_CHECK(cudaMemcpy2DAsync(
        to, static_cast<std::size_t>(toStride) * kFloat, from, static_cast<std::size_t>(fromStride) * kFloat,
        static_cast<std::size_t>(width) * kFloat, static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  }
  addRowsIntoKernel<<<blocksFor(rows * width), kThreads, 0, stream>>>(rows, width, from, fromStride, to, toStride);
  REMAT_CUDA_CHECK_LAUNCH("addRowsIntoKernel");
  return Status::ok();
}

Status dropoutForward(cudaStream_t stream, Index count, double p, std::uint64_t key, const float* x, float* y,
                      std::uint8_t* mask) {
  if (count == 0) return Status::ok();
  // The same float constants as the CPU kernel: threshold = float(p), scale = float(1 / (1 - p)).
  const bool dropAll = !(p < 1.0);
  const float scale = dropAll ? 0.0f : static_cast<float>(1.0 / (1.0 - p));
  dropoutForwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, static_cast<float>(p), scale, dropAll, key, x,
                                                                  y, mask);
  REMAT_CUDA_CHECK_LAUNCH("dropoutForwardKernel");
  return Status::ok();
}

Status dropoutBackward(cudaStream_t stream, Index count, double p, const std::uint8_t* mask, const float* dy, float* dx,
                       bool accumulate) {
  if (count == 0) return Status::ok();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  dropoutBackwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, scale, mask, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("dropoutBackwardKernel");
  return Status::ok();
}

Status addRowBias(cudaStream_t stream, Index rows, Index features, const float* bias, float* y) {
  if (rows * features == 0) return Status::ok();
  addRowBiasKernel<<<blocksFor(rows * features), kThreads, 0, stream>>>(rows, features, bias, y);
  REMAT_CUDA_CHECK_LAUNCH("addRowBiasKernel");
  return Status::ok();
}

Status accumulateRowBiasGrad(cudaStream_t stream, Index rows, Index features, const float* dy, float* db) {
  if (features == 0) return Status::ok();
  rowBiasGradKernel<<<blocksFor(features), kThreads, 0, stream>>>(rows, features, dy, db);
  REMAT_CUDA_CHECK_LAUNCH("rowBiasGradKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
