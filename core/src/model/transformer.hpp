#pragma once
// The shape rules and model numbers of the transformer kinds (docs/memory-model.md section 12):
// what PyTorch's autograd saves for one GPT-2 / BERT / ViT layer, as a chain layer. Internal to core.
#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {

Status inferTokenEmbedding(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferTransformerBlock(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferLmHead(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferPatchEmbedding(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferClsHead(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);

}  // namespace remat::detail
