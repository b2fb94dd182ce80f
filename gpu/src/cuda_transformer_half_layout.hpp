#pragma once
// The GPU's bfloat16 layout of GPT's, BERT's and ViT's kinds under bf16-mixed (docs/gpu.md,
// docs/memory-model.md 12.10): what the GPU's kernels will save per layer, tensor for tensor the
// CPU's (core/src/cpu/run_transformer_half.cpp, run_heads_half.cpp, run_vit_half.cpp,
// run_patch_half.cpp): the float32 residual stream and layer-norm statistics, the linears' bfloat16
// input casts and weight copies, bfloat16 attention and GELU tensors. checkHalfTransformerLayer
// proves the chain's numbers equal this layout before anything runs. Internal to gpu/.
#include <cstdint>

#include "remat/exec/layer_checks.hpp"
#include "remat/model/chain.hpp"

namespace remat::gpu {

// transformer_block's E (byte offsets, packed in the CPU's order). Unused regions are 0 bytes wide.
struct HalfBlockLayout {
  std::uint64_t stats1 = 0, stats2 = 0;  // ln_1's, ln_2's mean and rstd (float32)
  std::uint64_t h1 = 0, s2 = 0;          // ln_2's float32 input; post-norm: h1 is ln_1's input, s2 ln_2's
  std::uint64_t qkvCast = 0, qkvCopy = 0, merged = 0, projCopy = 0;
  std::uint64_t fc1Cast = 0, fc1Copy = 0, fc = 0, gelu = 0, fc2Copy = 0;
  std::uint64_t mask1 = 0, mask2 = 0;                                       // residual dropout masks (p > 0)
  std::uint64_t qkvOut = 0, attnOut = 0, lse = 0;                           // fused
  std::uint64_t q = 0, k = 0, v = 0, probs = 0, dropped = 0, attnMask = 0;  // math
  std::uint64_t savedBytes = 0;
};

// lm_head's and cls_head's E: [ln statistics][the linear's input cast][its weight copy].
struct HalfHeadLayout {
  std::uint64_t stats = 0, inputCast = 0, weightCopy = 0, savedBytes = 0;
};

// patch_embedding's E: [the image's cast][conv_proj's weight copy][the dropout mask].
struct HalfPatchLayout {
  std::uint64_t imageCast = 0, weightCopy = 0, mask = 0, savedBytes = 0;
};

HalfBlockLayout halfBlockLayout(const Shape& input, const LayerSpec& spec);
HalfHeadLayout halfLmHeadLayout(const Shape& input, const LayerSpec& spec);
HalfHeadLayout halfClsHeadLayout(const Shape& input, const LayerSpec& spec);
HalfPatchLayout halfPatchLayout(const Shape& input, const LayerSpec& spec);

// token_embedding, transformer_block, lm_head, patch_embedding, cls_head.
bool hasHalfTransformerLayout(LayerKind kind);

// Layer l (one of those kinds) of a bf16-mixed chain: its parameters, in / out flags and E equal
// the GPU's bfloat16 layout; `inputHalf`: x(l-1) is bfloat16 (refused: these kinds read the float32
// residual stream or the image). Errors name the layer (check's label).
Status checkHalfTransformerLayer(const Chain& chain, std::size_t l, bool inputHalf, const LayerChecks& check);

}  // namespace remat::gpu
