// The optimizer's update on the GPU (memory-model.md section 11.3): SGD, momentum, Adam and AdamW
// as torch.optim computes them with their defaults, elementwise over float32 in place, with the
// CPU backend's formulas and order of operations (core/src/cpu/optimizer_step.cpp) so that both
// backends' weights agree after a step. Abstract layers' parameters get the CPU's bytewise update.
#include "kernel_grid.cuh"
#include "kernels.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

__global__ void sgdKernel(OptimizerSpans s, OptimizerScalars k) {
  for (Index i = firstIndex(); i < s.count; i += gridStride()) s.params[i] -= k.learningRate * s.grads[i];
}

// dampening 0: buf = momentum * buf + g; p -= lr * buf.
__global__ void momentumKernel(OptimizerSpans s, OptimizerScalars k) {
  for (Index i = firstIndex(); i < s.count; i += gridStride()) {
    s.state[i] = k.momentum * s.state[i] + s.grads[i];
    s.params[i] -= k.learningRate * s.state[i];
  }
}

// _multi_tensor_adam(w): lerp of exp_avg, exp_avg_sq * beta2 + (1 - beta2) g^2, the denominator
// sqrt(v) / sqrt(1 - beta2^t) + eps, then p += -(lr / (1 - beta1^t)) * m / denominator; AdamW first
// decays p by 1 - lr * wd. The single-tensor loop keeps the square root in a buffer of its own.
__global__ void adamKernel(OptimizerSpans s, OptimizerScalars k, bool decoupledDecay) {
  for (Index i = firstIndex(); i < s.count; i += gridStride()) {
    if (decoupledDecay) s.params[i] *= 1.0f - k.learningRate * k.weightDecay;
    const float g = s.grads[i];
    s.state[i] += (g - s.state[i]) * (1.0f - k.beta1);
    s.stateSquare[i] = s.stateSquare[i] * k.beta2 + (1.0f - k.beta2) * g * g;
    float root = sqrtf(s.stateSquare[i]);
    if (s.squareRoot != nullptr) {
      s.squareRoot[i] = root;
      root = s.squareRoot[i];
    }
    s.denominator[i] = root / k.biasCorrection2Sqrt + k.epsilon;
    s.params[i] += -k.stepSize * s.state[i] / s.denominator[i];
  }
}

__global__ void abstractUpdateKernel(unsigned char* params, const unsigned char* grads, unsigned char* state,
                                     unsigned char* denominator, Index bytes) {
  for (Index i = firstIndex(); i < bytes; i += gridStride()) {
    const unsigned char g = grads[i];
    params[i] = static_cast<unsigned char>(params[i] - g);
    if (state != nullptr) state[i] = static_cast<unsigned char>(state[i] + g);
    if (denominator != nullptr) denominator[i] = params[i];
  }
}

}  // namespace

Status optimizerUpdate(cudaStream_t stream, OptimizerUpdate update, const OptimizerSpans& spans,
                       const OptimizerScalars& scalars) {
  if (spans.count == 0) return Status::ok();
  const unsigned blocks = blocksFor(spans.count);
  switch (update) {
    case OptimizerUpdate::Sgd:
      sgdKernel<<<blocks, kThreads, 0, stream>>>(spans, scalars);
      REMAT_CUDA_CHECK_LAUNCH("sgdKernel");
      break;
    case OptimizerUpdate::Momentum:
      momentumKernel<<<blocks, kThreads, 0, stream>>>(spans, scalars);
      REMAT_CUDA_CHECK_LAUNCH("momentumKernel");
      break;
    case OptimizerUpdate::Adam:
    case OptimizerUpdate::AdamW:
      adamKernel<<<blocks, kThreads, 0, stream>>>(spans, scalars, update == OptimizerUpdate::AdamW);
      REMAT_CUDA_CHECK_LAUNCH("adamKernel");
      break;
  }
  return Status::ok();
}

Status abstractOptimizerUpdate(cudaStream_t stream, void* params, const void* grads, void* state, void* denominator,
                               std::uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  const Index count = static_cast<Index>(bytes);
  abstractUpdateKernel<<<blocksFor(count), kThreads, 0, stream>>>(
      static_cast<unsigned char*>(params), static_cast<const unsigned char*>(grads), static_cast<unsigned char*>(state),
      static_cast<unsigned char*>(denominator), count);
  REMAT_CUDA_CHECK_LAUNCH("abstractUpdateKernel");
  return Status::ok();
}

namespace {

__global__ void accumulateFloatsKernel(Index count, float* dst, const float* src) {
  for (Index i = firstIndex(); i < count; i += gridStride()) dst[i] += src[i];
}

__global__ void accumulateBytesKernel(Index count, unsigned char* dst, const unsigned char* src) {
  for (Index i = firstIndex(); i < count; i += gridStride()) dst[i] = static_cast<unsigned char>(dst[i] + src[i]);
}

}  // namespace

Status accumulateFloats(cudaStream_t stream, Index count, float* dst, const float* src) {
  if (count == 0) return Status::ok();
  accumulateFloatsKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, dst, src);
  REMAT_CUDA_CHECK_LAUNCH("accumulateFloatsKernel");
  return Status::ok();
}

Status accumulateBytes(cudaStream_t stream, std::uint64_t bytes, void* dst, const void* src) {
  if (bytes == 0) return Status::ok();
  const auto count = static_cast<Index>(bytes);
  accumulateBytesKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, static_cast<unsigned char*>(dst),
                                                                   static_cast<const unsigned char*>(src));
  REMAT_CUDA_CHECK_LAUNCH("accumulateBytesKernel");
  return Status::ok();
}

namespace {

__global__ void gradScalerMultiplyKernel(Index count, const float* scale, float* data) {
  const float s = *scale;
  for (Index i = firstIndex(); i < count; i += gridStride()) data[i] *= s;
}

// PyTorch's inv_scale = scale.double().reciprocal().float(); a non-finite product flags foundInf
// (an inf or NaN gradient stays so after the multiply; a finite one times 1/scale <= 1 stays finite).
__global__ void gradScalerUnscaleKernel(Index count, const float* scale, float* grads, float* foundInf) {
  const auto inverse = static_cast<float>(1.0 / static_cast<double>(*scale));
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = grads[i] * inverse;
    grads[i] = g;
    if (!isfinite(g)) *foundInf = 1.0f;
  }
}

__global__ void gradScalerUpdateKernel(float factor, float* scale) { *scale *= factor; }

}  // namespace

Status gradScalerMultiply(cudaStream_t stream, Index count, const float* scale, float* data) {
  if (count == 0) return Status::ok();
  gradScalerMultiplyKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, scale, data);
  REMAT_CUDA_CHECK_LAUNCH("gradScalerMultiplyKernel");
  return Status::ok();
}

Status gradScalerUnscale(cudaStream_t stream, Index count, const float* scale, float* grads, float* foundInf) {
  if (count == 0) return Status::ok();
  gradScalerUnscaleKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, scale, grads, foundInf);
  REMAT_CUDA_CHECK_LAUNCH("gradScalerUnscaleKernel");
  return Status::ok();
}

Status gradScalerUpdate(cudaStream_t stream, float factor, float* scale) {
  gradScalerUpdateKernel<<<1, 1, 0, stream>>>(factor, scale);
  REMAT_CUDA_CHECK_LAUNCH("gradScalerUpdateKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
