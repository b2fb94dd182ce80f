#pragma once
// Swin's kinds under a mixed precision (docs/memory-model.md 12.10, PyTorch 2's CPU autocast),
// applied by withPrecision (precision.cpp) beside the transformer kinds' rule. Internal to core.
#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {

// swin_embedding, swin_block, patch_merging, swin_head.
bool hasSwinMixedRule(LayerKind kind);

// Rewrites a float32-built Swin layer from its half-built twin (`halfLayer`, dtype `half`): the
// half stream's numbers, autocast's saved copies (the image's cast, the weights' half copies) and,
// in the block, softmax's float32 result; returns its output's dtype (half).
Result<DType> mixSwinLayer(ChainLayer& layer, const ChainLayer& halfLayer, const LayerSpec& spec, DType half);

}  // namespace remat::detail
