#include "remat/exec/layer_checks.hpp"

#include <algorithm>
#include <cctype>

namespace remat {

std::string layerLabel(const Chain& chain, std::size_t l) {
  if (l == 0) return "the input x0";
  const ChainLayer& layer = chain.layers[l - 1];
  return "layer " + std::to_string(l) + " ('" + layer.name + "', " + std::string(kindName(layer.kind)) + ")";
}

namespace {
std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}
}  // namespace

Status LayerChecks::fail(const std::string& message) const {
  return Status::invalid(device + ": " + label + ": " + message);
}

Status LayerChecks::expectFlag(bool have, bool want, const char* field) const {
  if (want && !have)
    return fail("its " + upper(device) + " backward reads that tensor, but the chain says " + field + " = false");
  return Status::ok();
}

Status LayerChecks::expectExtra(std::uint64_t have, std::uint64_t want) const {
  if (have != want)
    return fail("its " + upper(device) + " kernel saves " + std::to_string(want) +
                " extra bytes, the chain says e = " + std::to_string(have));
  return Status::ok();
}

Status LayerChecks::expectParams(std::uint64_t have, std::uint64_t want) const {
  if (have != want)
    return fail("expected " + std::to_string(want) + " parameters, the chain says " + std::to_string(have));
  return Status::ok();
}

Status LayerChecks::realLayer(const Chain& chain, std::size_t l, bool inputReal, std::uint64_t inputElements) const {
  const ChainLayer& layer = chain.layers[l - 1];
  if (chain.dtype != DType::Float32)
    return fail("the " + upper(device) + " backend runs float32 only; the chain is " +
                std::string(dtypeName(chain.dtype)));
  if (layer.specIndex >= chain.spec.layers.size())
    return fail("the chain has no layer spec for it (spec index " + std::to_string(layer.specIndex) + ")");
  if (!inputReal) return fail("its input is not a float32 activation");
  if (layer.inputShape.empty() || layer.outputShape.empty() || inputElements != elementCount(layer.inputShape))
    return fail("its input shape " + shapeToString(layer.inputShape) + " does not match the previous output");
  if (layer.numbers.outBytes != elementCount(layer.outputShape) * 4)
    return fail("a = " + std::to_string(layer.numbers.outBytes) + " bytes does not match its output shape " +
                shapeToString(layer.outputShape));
  return Status::ok();
}

Status LayerChecks::blockNumbers(const BlockGraph& graph, const ChainLayer& layer) const {
  const LayerNumbers& m = layer.numbers;
  if (graph.outBytes != m.outBytes || graph.extraBytes != m.extraBytes || graph.needsInput != m.needsInput ||
      graph.needsOutput != m.needsOutput || graph.paramCount != layer.paramCount)
    return fail("the chain's numbers for this block differ from its inner graph's");
  return Status::ok();
}

Status LayerChecks::innerConv(const BlockOp& op, std::uint64_t weightCount) const {
  if (weightCount != op.paramCount)
    return fail("inner conv '" + op.layer.name + "' has a bias or an unexpected parameter count");
  return Status::ok();
}

Status LayerChecks::innerBatchNorm(const BlockOp& op, std::uint64_t channels) const {
  if (op.paramCount != 2 * channels || op.statsBytes != 2 * channels * 4)
    return fail("inner batch norm '" + op.layer.name + "' has unexpected parameter or statistics bytes");
  return Status::ok();
}

Status LayerChecks::innerWithoutParams(const BlockOp& op) const {
  if (op.paramCount != 0) return fail("inner op '" + op.layer.name + "' has parameters");
  return Status::ok();
}

}  // namespace remat
