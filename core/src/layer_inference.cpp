#include "layer_inference.hpp"

namespace remat::detail {

Status inferLayer(const LayerSpec& spec, const Shape&, DType, ChainLayer&) {
  return Status::invalid("kind '" + std::string(kindName(spec.kind)) + "' is not supported yet");
}

}  // namespace remat::detail
