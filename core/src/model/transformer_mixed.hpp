#pragma once
// The transformer kinds' numbers under a mixed precision (docs/memory-model.md 12.10), applied by
// withPrecision (precision.cpp) to a layer built in float32. Internal to core.
#include <cstdint>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {

// token_embedding, transformer_block, lm_head, patch_embedding, cls_head.
bool hasTransformerMixedRule(LayerKind kind);

// Rewrites a float32-built layer's e, wf, wb, in (and cls_head's a) as CPU autocast runs it with
// half dtype `half`; returns its output's dtype (float32 but for cls_head's half logits).
Result<DType> mixTransformerLayer(ChainLayer& layer, const LayerSpec& spec, DType half);

// The half weight copies a mixed transformer layer saves (0 for other layers).
std::uint64_t transformerWeightCopyBytes(const ChainLayer& layer);

}  // namespace remat::detail
