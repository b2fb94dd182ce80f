#pragma once
// The shape rules and model numbers of the Swin Transformer kinds (docs/memory-model.md section
// 12.6): what PyTorch's autograd saves for torchvision's patch embedding, one Swin block, a patch
// merging and the head, as one chain layer each. Internal to core.
#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {

Status inferSwinEmbedding(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferSwinBlock(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferPatchMerging(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferSwinHead(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);

}  // namespace remat::detail
