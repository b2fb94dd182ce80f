// Shape inference entry point for buildChain: the primitive kinds (layers_primitive.cpp) and the
// composite blocks, whose numbers come from their inner graph (block.cpp, block_layout.cpp).
#include "layer_inference.hpp"

#include <algorithm>

#include "layers_common.hpp"
#include "remat/model/block.hpp"

namespace remat::detail {
namespace {

Status inferBlock(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  auto graph = buildBlockGraph(spec, input, dtype);
  if (!graph) return graph.status();
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, graph->tensors.back().shape, dtype, graph->paramCount, 0.0));
  for (const BlockOp& op : graph->ops) {
    out.paramTensors.insert(out.paramTensors.end(), op.paramTensors.begin(), op.paramTensors.end());
    out.largestOpParamCount = std::max(out.largestOpParamCount, op.paramCount);
  }
  LayerNumbers& m = out.numbers;
  m.needsInput = graph->needsInput;
  // The final ReLU of a ResNet block reads x(l): out = yes (docs/memory-model.md section 5 and
  // docs/layers.md explain why yes is exact and free at chain level).
  m.needsOutput = graph->needsOutput;
  m.extraBytes = graph->extraBytes;
  m.fwdWorkspaceBytes = graph->fwdWorkspaceBytes;
  m.bwdWorkspaceBytes = graph->bwdWorkspaceBytes;
  m.fwdCost = graph->fwdCost;
  m.bwdCost = 2.0 * graph->fwdCost;
  return Status::ok();
}

}  // namespace

Status inferLayer(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  if (isComposite(spec.kind)) return inferBlock(spec, input, dtype, out);
  if (spec.kind == LayerKind::Abstract || spec.kind == LayerKind::Flatten)
    return Status::internal("'" + std::string(kindName(spec.kind)) + "' has no shape inference (buildChain folds it)");
  return inferPrimitiveLayer(spec, input, dtype, out);
}

}  // namespace remat::detail
