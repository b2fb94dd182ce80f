// The graph-to-chain cut. In the data ops' (topological) order, a boundary after op k is a cut
// when exactly one tensor crosses it: every later op reads only that tensor (an articulation
// tensor). The ops between two cuts are one plain layer when there is one of them, else a block
// whose inner ops they are. The cut does not depend on which topological order the file has: a
// tensor that alone carries everything forward has all its ancestors before it and all its
// descendants after it in every order.
#include <algorithm>

#include "onnx_graph.hpp"
#include "remat/base/text.hpp"
#include "remat/model/block.hpp"
#include "remat/model/operators.hpp"

namespace remat::onnx_import {
namespace {

// The data ops the output depends on, in order; the others are dropped.
std::vector<std::size_t> liveOps(Graph& g, std::size_t outputActivation) {
  const auto& ops = g.ops();
  std::vector<bool> live(ops.size(), false);
  std::vector<std::size_t> stack;
  if (g.activations()[outputActivation].producer != kNone) stack.push_back(g.activations()[outputActivation].producer);
  while (!stack.empty()) {
    const std::size_t op = stack.back();
    stack.pop_back();
    if (live[op]) continue;
    live[op] = true;
    for (std::size_t in : ops[op].inputs)
      if (g.activations()[in].producer != kNone) stack.push_back(g.activations()[in].producer);
  }
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (live[i])
      order.push_back(i);
    else
      g.countDropped(ops[i].opType);
  }
  return order;
}

// Boundaries k (after the first k live ops, 0..n) that exactly one tensor crosses.
std::vector<std::size_t> findCuts(const Graph& g, const std::vector<std::size_t>& order, std::size_t output) {
  const std::size_t n = order.size();
  std::vector<std::size_t> position(g.ops().size(), kNone);
  for (std::size_t k = 0; k < n; ++k) position[order[k]] = k;
  // Tensor t is alive over boundaries (position of its producer + 1) .. (position of its last reader).
  std::vector<std::size_t> lastRead(g.activations().size(), kNone);
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t in : g.ops()[order[k]].inputs) lastRead[in] = k;
  lastRead[output] = n;
  std::vector<int> delta(n + 2, 0);
  for (std::size_t t = 0; t < g.activations().size(); ++t) {
    if (lastRead[t] == kNone) continue;
    const std::size_t producer = g.activations()[t].producer;
    const std::size_t first = producer == kNone ? 0 : position[producer] + 1;
    ++delta[first];
    --delta[lastRead[t] + 1];
  }
  std::vector<std::size_t> cuts;
  int alive = 0;
  for (std::size_t k = 0; k <= n; ++k) {
    alive += delta[k];
    if (alive == 1) cuts.push_back(k);
  }
  return cuts;
}

// The longest common prefix of dotted names, at a dot.
std::string commonModule(const std::vector<std::string>& names) {
  std::string prefix = names.front();
  for (const std::string& name : names) {
    while (!prefix.empty() && !(name == prefix || name.rfind(prefix + ".", 0) == 0)) {
      const std::size_t dot = prefix.rfind('.');
      prefix = dot == std::string::npos ? std::string() : prefix.substr(0, dot);
    }
  }
  return prefix;
}

bool blockKindOf(const DataOp& op, BlockOpKind& kind) {
  if (op.role == OpRole::Add) return (kind = BlockOpKind::Add), true;
  if (op.role == OpRole::Concat) return (kind = BlockOpKind::Concat), true;
  if (op.role == OpRole::Mul) return (kind = BlockOpKind::Mul), true;
  if (op.role == OpRole::Sub) return (kind = BlockOpKind::Sub), true;
  if (op.role == OpRole::Div) return (kind = BlockOpKind::Div), true;
  if (op.role == OpRole::Slice) return (kind = BlockOpKind::Slice), true;
  if (op.role == OpRole::ChannelShuffle) return (kind = BlockOpKind::ChannelShuffle), true;
  if (op.role == OpRole::LayerScale) return (kind = BlockOpKind::LayerScale), true;
  const std::optional<BlockOpKind> inner = operatorInfo(op.layer.kind).blockOp;  // the kind's description
  if (!inner) return false;
  kind = *inner;
  return true;
}

// Same inner structure: kinds, primitive fields and inputs (an add's two in either order).
bool sameGraph(const BlockGraph& a, const BlockGraph& b) {
  if (a.ops.size() != b.ops.size()) return false;
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const BlockOp &x = a.ops[i], &y = b.ops[i];
    std::vector<std::size_t> xi = x.inputs, yi = y.inputs;
    if (x.kind == BlockOpKind::Add || x.kind == BlockOpKind::Mul) {
      std::sort(xi.begin(), xi.end());
      std::sort(yi.begin(), yi.end());
    }
    const LayerSpec &p = x.layer, &q = y.layer;
    if (x.kind != y.kind || xi != yi || p.outChannels != q.outChannels || p.kernel != q.kernel ||
        p.stride != q.stride || p.padding != q.padding || p.kernelW() != q.kernelW() || p.strideW() != q.strideW() ||
        p.paddingW() != q.paddingW() || p.groups != q.groups || (x.kind == BlockOpKind::Conv2d && p.bias != q.bias))
      return false;
  }
  return true;
}

// A block that is exactly one of torchvision's residual blocks, as the zoo builds them, is written
// as that kind: the same layer as the zoo's, and a shorter chain file.
std::optional<LayerSpec> asResidualKind(const LayerSpec& block, const BlockGraph& graph, const Shape& input) {
  const std::int64_t in = input[1], out = graph.tensors.back().shape[1];
  const std::int64_t first = block.ops.front().kind == BlockOpKind::Conv2d ? block.ops.front().layer.outChannels : 0;
  std::vector<LayerSpec> candidates;
  for (std::int64_t stride : {1, 2}) {
    LayerSpec c;
    c.name = block.name;
    c.outChannels = out;
    c.stride = stride;
    c.kind = LayerKind::BasicBlock;
    candidates.push_back(c);
    c.kind = LayerKind::Bottleneck;
    c.width = first;
    candidates.push_back(c);
    c.kind = LayerKind::InvertedResidual;
    for (std::int64_t ratio : {std::int64_t{1}, in > 0 && first % in == 0 ? first / in : 1}) {
      c.expandRatio = ratio;
      candidates.push_back(c);
    }
  }
  for (const LayerSpec& c : candidates) {
    auto zoo = buildBlockGraph(c, input, graph.dtype);
    if (zoo && sameGraph(*zoo, graph)) return c;
  }
  return std::nullopt;
}

// The ops at positions [from, to) of `order` as one block reading the tensor that crosses `from`.
Result<LayerSpec> pieceToBlock(const Graph& g, const std::vector<std::size_t>& order, std::size_t from, std::size_t to,
                               std::size_t blockNumber) {
  const std::size_t input = from == 0 ? 0 : g.ops()[order[from - 1]].output;
  std::vector<std::size_t> tensorOf(g.activations().size(), kNone);
  tensorOf[input] = 0;
  std::vector<std::string> names;
  LayerSpec block;
  block.kind = LayerKind::Block;
  for (std::size_t k = from; k < to; ++k) {
    const DataOp& op = g.ops()[order[k]];
    BlockOpSpec inner;
    if (!blockKindOf(op, inner.kind))
      return g.fail(
          op.node,
          "is inside a multi-branch piece (nodes " + std::to_string(g.ops()[order[from]].node) + " to " +
              std::to_string(g.ops()[order[to - 1]].node) + ", after tensor " +
              quoteText(g.activations()[input].tensor) +
              "); a block holds Conv, BatchNormalization, the activations, MaxPool, AveragePool, GlobalAveragePool "
              "(or ReduceMean over H and W), Add, Mul, Concat, Dropout, Sub, Div and ShuffleNetV2's channel slice and "
              "shuffle "
              "only");
    inner.layer = op.layer;
    for (std::size_t in : op.inputs) inner.inputs.push_back(tensorOf[in]);
    tensorOf[op.output] = k - from + 1;
    names.push_back(op.name);
    block.ops.push_back(std::move(inner));
  }
  const std::string module = commonModule(names);
  block.name = module.empty() ? "block" + std::to_string(blockNumber) : module;
  for (std::size_t i = 0; i < block.ops.size(); ++i) {
    std::string& name = block.ops[i].layer.name;
    if (module.empty()) continue;
    name = names[i] == module ? std::string(blockOpKindName(block.ops[i].kind)) : names[i].substr(module.size() + 1);
  }
  return block;
}

// The module of the ops at positions [from, to): their names' common prefix.
std::string pieceModule(const Graph& g, const std::vector<std::size_t>& order, std::size_t from, std::size_t to) {
  std::vector<std::string> names;
  for (std::size_t k = from; k < to; ++k) names.push_back(g.ops()[order[k]].name);
  return commonModule(names);
}

// A block also takes the activations (ReLU, ReLU6) right after it that belong to its module, as
// torchvision's BasicBlock and Bottleneck end in the ReLU after their add: the chain keeps those
// modules whole where the cut alone would split their last op off. Only activations: a layer with
// parameters after a block stays a place for a checkpoint.
std::size_t extendOverModuleTail(const Graph& g, const std::vector<std::size_t>& order,
                                 const std::vector<std::size_t>& cuts, std::size_t c) {
  const std::string module = pieceModule(g, order, cuts[c], cuts[c + 1]);
  if (module.empty()) return c;
  while (c + 2 < cuts.size() && cuts[c + 2] - cuts[c + 1] == 1) {
    const DataOp& next = g.ops()[order[cuts[c + 1]]];
    const bool activation = next.role == OpRole::Layer && isPointwise(next.layer.kind);
    if (!activation || next.name.rfind(module + ".", 0) != 0) break;
    ++c;
  }
  return c;
}

}  // namespace

Result<CutLayers> cutIntoLayers(Graph& g) {
  const auto output = g.activation(g.outputTensor());
  if (!output)
    return Status::invalid(g.source() + ": the output " + quoteText(g.outputTensor()) +
                           " is not computed from the input");
  const std::vector<std::size_t> order = liveOps(g, *output);
  if (order.empty()) return Status::invalid(g.source() + ": the output is the input itself; there are no layers");
  const std::vector<std::size_t> cuts = findCuts(g, order, *output);
  if (cuts.size() == 2 && order.size() > 1)
    return Status::invalid(g.source() +
                           ": no articulation point: no tensor between the input and the output carries "
                           "everything forward alone, so the graph is one multi-branch piece that no chain can follow");
  CutLayers result;
  std::size_t blocks = 0;
  for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
    const std::size_t from = cuts[c];
    const bool single = cuts[c + 1] - from == 1 && g.ops()[order[from]].role == OpRole::Layer;
    if (!single) c = extendOverModuleTail(g, order, cuts, c);
    const std::size_t to = cuts[c + 1];
    const DataOp& last = g.ops()[order[to - 1]];
    if (single) {
      result.layers.push_back(last.layer);
    } else {
      auto block = pieceToBlock(g, order, from, to, ++blocks);
      if (!block) return block.status();
      const Shape& input = g.activations()[from == 0 ? 0 : g.ops()[order[from - 1]].output].shape;
      auto graph = buildBlockGraph(*block, input, g.dtype());
      if (!graph)
        return g.fail(last.node, "the block " + quoteText(block->name) + " it ends: " + graph.status().message());
      const bool nchw = input.size() == 4;  // a block on [N, F] or [N, S, F] is no residual kind
      result.layers.push_back(nchw ? asResidualKind(*block, *graph, input).value_or(*block) : *block);
    }
    result.outputShapes.push_back(g.activations()[last.output].shape);
    result.lastNodes.push_back(last.node);
  }
  return result;
}

}  // namespace remat::onnx_import
