#pragma once
// The pointwise activations' formulas, shared by the float32 kernels (kernels_elementwise.cu) and
// the bfloat16 ones (kernels_half.cu), which compute in float32 and round once.
#include "kernels.hpp"

namespace remat::gpu::kernels {

// PyTorch's formulas (aten/src/ATen/native/cuda/Activation*.cu), in float.
__device__ inline float pointwiseValue(Pointwise fn, float x) {
  switch (fn) {
    case Pointwise::Sigmoid: return 1.0f / (1.0f + expf(-x));
    case Pointwise::Tanh: return tanhf(x);
    case Pointwise::Silu: return x / (1.0f + expf(-x));
    case Pointwise::HardSwish: return x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case Pointwise::HardSigmoid: return fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case Pointwise::Gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  }
  return 0.0f;
}

// d f / d x at the saved tensor s (y for sigmoid and tanh, x for the others).
__device__ inline float pointwiseSlope(Pointwise fn, float s) {
  switch (fn) {
    case Pointwise::Sigmoid: return s * (1.0f - s);
    case Pointwise::Tanh: return 1.0f - s * s;
    case Pointwise::Silu: {
      const float sig = 1.0f / (1.0f + expf(-s));
      return sig * (1.0f + s * (1.0f - sig));
    }
    case Pointwise::HardSwish: return s < -3.0f ? 0.0f : (s <= 3.0f ? s / 3.0f + 0.5f : 1.0f);
    case Pointwise::HardSigmoid: return (s > -3.0f && s < 3.0f) ? 1.0f / 6.0f : 0.0f;
    case Pointwise::Gelu: {
      const float cdf = 0.5f * (1.0f + erff(s * 0.70710678118654752f));
      const float pdf = expf(-0.5f * s * s) * 0.39894228040143268f;
      return cdf + s * pdf;
    }
  }
  return 0.0f;
}

}  // namespace remat::gpu::kernels
