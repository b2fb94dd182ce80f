#pragma once
// Helpers shared by the layer kinds' shape inference (layers_*.cpp, block*.cpp). Internal to core.
#include <cstdint>
#include <string>
#include <string_view>

#include "remat/base/status.hpp"
#include "remat/model/block.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {

// Every integer field is at most this, so the shape arithmetic (dimension + 2 * padding, ...) can
// never overflow int64 once buildChain has checked that the input's bytes fit in 64 bits.
inline constexpr std::int64_t kMaxFieldValue = kMaxIntegerField;

Status checkPositiveField(std::string_view field, std::int64_t value);
Status checkNonNegativeField(std::string_view field, std::int64_t value);

// a * b, or false when it does not fit in 64 bits.
bool checkedMul(std::uint64_t a, std::uint64_t b, std::uint64_t& out);
// A layer's parameter tensors (ChainLayer::paramTensors): the weight, then the bias when it has one.
std::vector<std::uint64_t> weightAndBias(std::uint64_t weights, std::uint64_t biases);

// Fills out.outputShape and the model numbers that every kind shares: a (checked against
// overflow), p = paramCount * dtype bytes, the cost (fwd = forwardFlop / 1e9 GFLOP, bwd = 2 * fwd),
// and wf = wb = 0.
Status setCommonNumbers(ChainLayer& out, Shape outputShape, DType dtype, std::uint64_t paramCount, double forwardFlop);

// The shape rules of the primitive and pointwise kinds, named by their descriptions (operators.cpp).
Status inferConv2d(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferPool(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferAdaptiveAvgPool(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferBatchNorm(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferLinear(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferDropout(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
Status inferLayerNorm(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);
// Any pointwise kind: y has x's shape; in/out from the description's backward reads; no E.
Status inferPointwise(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);

// The primitive and pointwise kinds (everything but abstract, flatten and the composite blocks),
// through their descriptions' shape rules.
Status inferPrimitiveLayer(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);

// Fills in everything of a block graph that follows from its tensors and ops (tensors[].shape,
// bytes, producer; ops[] with inputs, output and their backward reads): lifetimes, the saved set,
// the in/out flags, the forward arena, E and the gradient arena (block_layout.cpp).
Status layoutBlockGraph(BlockGraph& graph);

}  // namespace remat::detail
