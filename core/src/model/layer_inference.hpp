#pragma once
// Shape inference and model numbers for the real (non-abstract) layer kinds. Internal to core.
#include "remat/model/chain.hpp"

namespace remat::detail {

// Fills out.outputShape, out.paramCount and out.numbers (except measured overrides, which the
// caller applies) from spec and the layer's input shape. Errors say which field is wrong and why;
// the caller adds the layer index and name.
Status inferLayer(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out);

}  // namespace remat::detail
