#pragma once
// transformer_block under bf16-mixed on the GPU (cuda_transformer_half.cpp, forward;
// cuda_transformer_half_back.cpp, backward): the CPU's run_transformer_half.cpp op for op. The
// residual stream (x(l-1), h1, x(l)) and both layer norms are float32; the four linears read
// bfloat16 casts of the norms' outputs (qkv, fc1; post-norm: qkv casts x(l-1)) or bfloat16 inputs
// (the merged heads, GELU's output) and the weights' bfloat16 copies made each forward
// (cuda_linear_half.cpp); attention runs in bfloat16 (kernels_attention_half.cu: math's products on
// cuBLAS around the bfloat16 softmax, fused the bfloat16 flash kernel); GELU computes in float32
// from its bfloat16 input and rounds; a branch's bfloat16 output is promoted into the float32
// residual. E is cuda_transformer_half_layout.hpp's HalfBlockLayout; a discard-mode forward puts it
// at the start of its workspace. Internal to gpu/.
#include <memory>

#include "cuda_device_impl.hpp"
#include "cuda_linear_half.hpp"
#include "cuda_transformer_half_layout.hpp"
#include "kernels_attention.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {

struct HalfBlockState {
  kernels::AttentionShape g;
  Index tokens = 0, width = 0, hidden = 0;
  bool fused = true, tanhGelu = false, postNorm = false;
  double dropoutP = 0.0;
  float epsilon = 1e-5f;
  // parameter offsets (floats), PyTorch's order as float32's
  Index ln1P = 0, qkvW = 0, qkvB = 0, projW = 0, projB = 0, ln2P = 0, fc1W = 0, fc1B = 0, fc2W = 0, fc2B = 0;
  HalfBlockLayout e;  // E's regions
  // forward scratch (after discardShift in a discard-mode forward)
  std::uint64_t discardShift = 0, fNorm = 0, fQkv = 0, fHeads = 0, fBranch = 0, fFloat = 0, fGelu = 0;
  // backward scratch
  std::uint64_t bHalfRows = 0, bWide = 0, bFloatWide = 0, bRows = 0, bDh1 = 0, bHeads = 0, bCast = 0, bWeight = 0;
  std::uint64_t bSquare = 0, bGradHeads = 0;  // math
};

// Checks the chain's numbers against the layout (cuda_half.cpp did so for the whole chain) and
// sets the layer's workspaces.
Status prepareHalfTransformerBlock(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                                   LayerState& state);
Status forwardHalfTransformerBlock(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                                   const LayerContext& c, const ForwardBuffers& b);
Status backwardHalfTransformerBlock(const LayerState& state, std::size_t l, std::uint64_t seed, const LayerContext& c,
                                    const BackwardBuffers& b);

namespace halfblock {  // shared by the forward and the backward

// The layer's dropout: sites 1 and 2 the residual branches, 3 the attention (the CPU's DropoutDraw).
struct Dropout {
  std::uint64_t key = 0;
  double p = 0.0;
  bool active() const { return p > 0.0; }
  std::uint64_t site(std::uint64_t which) const;
};

struct Ops {
  Linear qkv, proj, fc1, fc2;
  explicit Ops(const HalfBlockState& t)
      : qkv{t.tokens, t.width, 3 * t.width, "qkv"},
        proj{t.tokens, t.width, t.width, "out projection"},
        fc1{t.tokens, t.width, t.hidden, "fc1"},
        fc2{t.tokens, t.hidden, t.width, "fc2"} {}
};

// Math attention's batched products over the N*h heads, [S][dh] each: scores = q k^T (transB),
// out = P v, and the backward's dP = dO v^T, dq = dS k, dk = dS^T q, dv = P^T dO.
RowMajorGemm headProduct(const HalfBlockState& t, bool transA, bool transB, Index m, Index n, Index k);
// The same over any attention shape's N*h heads (Swin's windows: cuda_swin_half.cpp).
RowMajorGemm headProduct(const kernels::AttentionShape& g, bool transA, bool transB, Index m, Index n, Index k);

}  // namespace halfblock
}  // namespace remat::gpu
