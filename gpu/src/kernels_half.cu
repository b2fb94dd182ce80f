// bf16-mixed's own kernels (kernels_half.hpp): each element computed in float32 from its
// bfloat16 inputs and rounded once to nearest even, as the CPU backend's kernels_half.cpp does, so
// the two backends agree bit for bit wherever the float32 arithmetic does.
#include "half_io.cuh"
#include "kernels_half.hpp"
#include "pointwise.cuh"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using namespace half_io;  // the grid helpers, f (widen) and h (round once)

__global__ void castToHalfKernel(Index count, const float* from, Bf16* to) {
  for (Index i = firstIndex(); i < count; i += gridStride()) to[i] = h(from[i]);
}

__global__ void castToFloatKernel(Index count, const Bf16* from, float* to) {
  for (Index i = firstIndex(); i < count; i += gridStride()) to[i] = f(from[i]);
}

__global__ void addHalfIntoKernel(Index count, const Bf16* from, float* to) {
  for (Index i = firstIndex(); i < count; i += gridStride()) to[i] += f(from[i]);
}

// One thread per feature, the rows in order (no atomics).
__global__ void addHalfBiasGradientKernel(Index rows, Index features, const Bf16* dy, float* db) {
  for (Index o = firstIndex(); o < features; o += gridStride()) {
    float sum = 0.0f;
    for (Index r = 0; r < rows; ++r) sum += f(dy[r * features + o]);
    db[o] += f(h(sum));
  }
}

__global__ void addRowBiasHalfKernel(Index rows, Index features, const float* bias, Bf16* y) {
  const Index count = rows * features;
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] = h(f(y[i]) + bias[i % features]);
}

__device__ inline float activationValue(const HalfActivationFn& fn, float x) {
  if (fn.kind == HalfActivation::Relu) return x > 0.0f ? x : 0.0f;
  if (fn.kind == HalfActivation::Relu6) return x > 0.0f ? (x < 6.0f ? x : 6.0f) : 0.0f;
  return pointwiseValue(fn.fn, x);
}

// The gradient's factor at the saved value (y for relu, sigmoid and tanh; x for the others).
__device__ inline float activationSlope(const HalfActivationFn& fn, float s) {
  if (fn.kind == HalfActivation::Relu) return s > 0.0f ? 1.0f : 0.0f;
  if (fn.kind == HalfActivation::Relu6) return (s > 0.0f && s < 6.0f) ? 1.0f : 0.0f;
  return pointwiseSlope(fn.fn, s);
}

__global__ void activationForwardHalfKernel(HalfActivationFn fn, Index count, const Bf16* x, Bf16* y) {
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] = h(activationValue(fn, f(x[i])));
}

__global__ void activationBackwardHalfKernel(HalfActivationFn fn, Index count, const Bf16* saved, const Bf16* dy,
                                             Bf16* dx, bool accumulate) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    // relu and relu6 pass dy through or zero it: no rounding (the CPU's select); the others multiply.
    const float slope = activationSlope(fn, f(saved[i]));
    const float g = fn.kind == HalfActivation::Pointwise ? f(dy[i]) * slope : (slope != 0.0f ? f(dy[i]) : 0.0f);
    dx[i] = h(accumulate ? f(dx[i]) + f(h(g)) : g);
  }
}

__global__ void addHalfKernel(Index count, const Bf16* a, const Bf16* b, Bf16* out) {
  for (Index i = firstIndex(); i < count; i += gridStride()) out[i] = h(f(a[i]) + f(b[i]));
}

__global__ void copyOrAddHalfKernel(Index count, const Bf16* a, Bf16* out, bool accumulate) {
  for (Index i = firstIndex(); i < count; i += gridStride()) out[i] = accumulate ? h(f(out[i]) + f(a[i])) : a[i];
}

__global__ void dropoutForwardHalfKernel(Index count, float threshold, float scale, bool dropAll, std::uint64_t key,
                                         const Bf16* x, Bf16* y, std::uint8_t* mask) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const bool keep = !dropAll && rng::uniform01(rng::at(key, static_cast<std::uint64_t>(i))) >= threshold;
    y[i] = h(keep ? f(x[i]) * scale : 0.0f);
    if (mask != nullptr) mask[i] = keep ? 1 : 0;
  }
}

__global__ void dropoutBackwardHalfKernel(Index count, float scale, const std::uint8_t* mask, const Bf16* dy,
                                          Bf16* dx) {
  for (Index i = firstIndex(); i < count; i += gridStride()) dx[i] = h(mask[i] ? f(dy[i]) * scale : 0.0f);
}

// One thread per sample, the CPU's order: the row's maximum, the sum of exponentials in double.
__global__ void softmaxCrossEntropyBackwardHalfKernel(Index batch, Index classes, float invBatch, const Bf16* logits,
                                                      const std::int64_t* labels, Bf16* grad, const float* lossScale) {
  const float scale = lossScale != nullptr ? *lossScale : 1.0f;
  for (Index n = firstIndex(); n < batch; n += gridStride()) {
    const Bf16* row = logits + n * classes;
    Bf16* out = grad + n * classes;
    float maxValue = f(row[0]);
    for (Index k = 1; k < classes; ++k) maxValue = f(row[k]) > maxValue ? f(row[k]) : maxValue;
    double sum = 0.0;
    for (Index k = 0; k < classes; ++k) sum += exp(static_cast<double>(f(row[k]) - maxValue));
    const double invSum = 1.0 / sum;
    for (Index k = 0; k < classes; ++k) {
      const float p = static_cast<float>(exp(static_cast<double>(f(row[k]) - maxValue)) * invSum) * invBatch;
      out[k] = h((k == labels[n] ? p - invBatch : p) * scale);
    }
  }
}

}  // namespace

Status castToHalf(cudaStream_t stream, Index count, const float* from, Bf16* to) {
  if (count == 0) return Status::ok();
  castToHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, from, to);
  REMAT_CUDA_CHECK_LAUNCH("castToHalfKernel");
  return Status::ok();
}

Status castToFloat(cudaStream_t stream, Index count, const Bf16* from, float* to) {
  if (count == 0) return Status::ok();
  castToFloatKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, from, to);
  REMAT_CUDA_CHECK_LAUNCH("castToFloatKernel");
  return Status::ok();
}

Status addHalfInto(cudaStream_t stream, Index count, const Bf16* from, float* to) {
  if (count == 0) return Status::ok();
  addHalfIntoKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, from, to);
  REMAT_CUDA_CHECK_LAUNCH("addHalfIntoKernel");
  return Status::ok();
}

Status addHalfBiasGradient(cudaStream_t stream, Index rows, Index features, const Bf16* dy, float* db) {
  if (features == 0) return Status::ok();
  addHalfBiasGradientKernel<<<blocksFor(features), kThreads, 0, stream>>>(rows, features, dy, db);
  REMAT_CUDA_CHECK_LAUNCH("addHalfBiasGradientKernel");
  return Status::ok();
}

Status addRowBiasHalf(cudaStream_t stream, Index rows, Index features, const float* bias, Bf16* y) {
  if (rows * features == 0) return Status::ok();
  addRowBiasHalfKernel<<<blocksFor(rows * features), kThreads, 0, stream>>>(rows, features, bias, y);
  REMAT_CUDA_CHECK_LAUNCH("addRowBiasHalfKernel");
  return Status::ok();
}

Status activationForwardHalf(cudaStream_t stream, const HalfActivationFn& fn, Index count, const Bf16* x, Bf16* y) {
  if (count == 0) return Status::ok();
  activationForwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(fn, count, x, y);
  REMAT_CUDA_CHECK_LAUNCH("activationForwardHalfKernel");
  return Status::ok();
}

Status activationBackwardHalf(cudaStream_t stream, const HalfActivationFn& fn, Index count, const Bf16* saved,
                              const Bf16* dy, Bf16* dx, bool accumulate) {
  if (count == 0) return Status::ok();
  activationBackwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(fn, count, saved, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("activationBackwardHalfKernel");
  return Status::ok();
}

Status addHalf(cudaStream_t stream, Index count, const Bf16* a, const Bf16* b, Bf16* out) {
  if (count == 0) return Status::ok();
  addHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, a, b, out);
  REMAT_CUDA_CHECK_LAUNCH("addHalfKernel");
  return Status::ok();
}

Status copyOrAddHalf(cudaStream_t stream, Index count, const Bf16* a, Bf16* out, bool accumulate) {
  if (count == 0) return Status::ok();
  copyOrAddHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, a, out, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("copyOrAddHalfKernel");
  return Status::ok();
}

Status dropoutForwardHalf(cudaStream_t stream, Index count, double p, std::uint64_t key, const Bf16* x, Bf16* y,
                          std::uint8_t* mask) {
  if (count == 0) return Status::ok();
  const bool dropAll = !(p < 1.0);  // the float32 kernel's constants: the same draws
  const float scale = dropAll ? 0.0f : static_cast<float>(1.0 / (1.0 - p));
  dropoutForwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, static_cast<float>(p), scale, dropAll, key,
                                                                      x, y, mask);
  REMAT_CUDA_CHECK_LAUNCH("dropoutForwardHalfKernel");
  return Status::ok();
}

Status dropoutBackwardHalf(cudaStream_t stream, Index count, double p, const std::uint8_t* mask, const Bf16* dy,
                           Bf16* dx) {
  if (count == 0) return Status::ok();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  dropoutBackwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, scale, mask, dy, dx);
  REMAT_CUDA_CHECK_LAUNCH("dropoutBackwardHalfKernel");
  return Status::ok();
}

Status softmaxCrossEntropyBackwardHalf(cudaStream_t stream, Index batch, Index classes, const Bf16* logits,
                                       const std::int64_t* labels, Bf16* grad, const float* lossScale) {
  if (batch == 0 || classes == 0) return Status::ok();
  const float invBatch = 1.0f / static_cast<float>(batch);
  softmaxCrossEntropyBackwardHalfKernel<<<blocksFor(batch), kThreads, 0, stream>>>(batch, classes, invBatch, logits,
                                                                                   labels, grad, lossScale);
  REMAT_CUDA_CHECK_LAUNCH("softmaxCrossEntropyBackwardHalfKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
