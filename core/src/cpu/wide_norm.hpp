// A float32 LayerNormOp's backward on bfloat16 tensors, as pure bf16's layers run it
// (run_transformer_pure.cpp, run_vit_pure.cpp, run_heads_pure.cpp, run_embeddings.cpp): x, d(y) and
// the [2 * width] parameters widened into float32 work regions, oneDNN's float32 backward from the
// float32 statistics, the parameters' gradients rounded once into their bfloat16 ones. d(x) stays
// in float32 in work.dx: each caller rounds it, adds it to a residual or scatters it.
#pragma once

#include <cstring>

#include "dnnl_layers.hpp"
#include "kernels.hpp"

namespace remat::cpu {

// The float32 regions (workspace) the backward widens into, and oneDNN's scratch.
struct WideNormWork {
  float* x = nullptr;
  float* dy = nullptr;
  float* dx = nullptr;
  float* params = nullptr;
  float* dParams = nullptr;
  std::byte* dnnl = nullptr;
};

// `count` elements of rows of `width`; `params` and `paramGrads`: the norm's weight then bias.
inline Status wideNormBackward(const DnnlContext& context, const LayerNormOp& op, Index count, Index width,
                               const BFloat16* x, const BFloat16* dy, const BFloat16* params, const float* stats,
                               BFloat16* paramGrads, const WideNormWork& work) {
  castToFloat(count, x, work.x);
  castToFloat(count, dy, work.dy);
  castToFloat(2 * width, params, work.params);
  std::memset(work.dParams, 0, static_cast<std::size_t>(2 * width) * sizeof(float));  // oneDNN adds into it
  REMAT_RETURN_IF_ERROR(op.backward(context, work.x, work.dy, work.params, stats, work.dx, work.dParams, work.dnnl));
  addFloatIntoHalf(2 * width, work.dParams, paramGrads);
  return Status::ok();
}

}  // namespace remat::cpu
