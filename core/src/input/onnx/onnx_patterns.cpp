// The node patterns torch's exporter writes for one PyTorch op, read back as that op (the memory
// model counts what PyTorch's autograd keeps for the op it runs, not for the pieces):
//   SiLU:  Sigmoid(x) -> Mul(x, that)                                  (nn.SiLU at every opset)
//   HardSwish: HardSigmoid(x; 1/6, 1/2) -> Mul(x, that)                (nn.Hardswish below opset 14)
//   GELU:  Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x, that) -> Mul(0.5) (nn.GELU below opset 20)
// A pattern's nodes follow each other (Constant nodes between them skipped) and each inner result
// has no other reader; anything else is left to the ordinary conversion, which refuses what it
// cannot read.
#include <cmath>

#include "onnx_graph.hpp"
#include "remat/model/operators.hpp"

namespace remat::onnx_import {
namespace {

// How far a pattern's next node may be, counting the Constant nodes torch puts between them.
constexpr std::size_t kLookahead = 4;

const onnx::NodeProto& nodeAt(const Graph& g, std::size_t node) { return g.proto().node(static_cast<int>(node)); }

// The first node after `node` that is not a Constant, within kLookahead nodes.
std::optional<std::size_t> nextNode(const Graph& g, std::size_t node) {
  const auto count = static_cast<std::size_t>(g.proto().node_size());
  for (std::size_t n = node + 1; n < count && n <= node + kLookahead; ++n)
    if (nodeAt(g, n).op_type() != "Constant") return n;
  return std::nullopt;
}

// Node `n` is `opType` with one output, read by exactly one node input.
bool isSoleStep(const Graph& g, std::size_t n, const char* opType) {
  const onnx::NodeProto& node = nodeAt(g, n);
  return node.op_type() == opType && node.output_size() == 1 && g.readers(node.output(0)) == 1;
}

// The node's two inputs are `known` and another; that other one, or "" when not.
std::string partner(const onnx::NodeProto& node, const std::string& known) {
  if (node.input_size() != 2) return {};
  if (node.input(0) == known) return node.input(1);
  if (node.input(1) == known) return node.input(0);
  return {};
}

// A scalar's value: a constant the walk already knows, or the `value` of a Constant node among the
// pattern's own nodes (torch puts it between them, so the walk has not reached it yet).
std::optional<double> scalarOf(const Graph& g, std::size_t from, const std::string& tensor) {
  if (tensor.empty()) return std::nullopt;
  if (const Constant* c = g.constant(tensor)) {
    if (c->values.size() == 1) return c->values.front();
    return std::nullopt;
  }
  const auto count = static_cast<std::size_t>(g.proto().node_size());
  for (std::size_t n = from; n < count && n <= from + 5 * kLookahead; ++n) {
    const onnx::NodeProto& node = nodeAt(g, n);
    if (node.op_type() != "Constant" || node.output_size() != 1 || node.output(0) != tensor) continue;
    if (const onnx::AttributeProto* value = findAttribute(node, "value"); value != nullptr && value->has_t()) {
      auto decoded = decodeTensor(value->t(), 1);
      if (decoded && decoded->values.size() == 1) return decoded->values.front();
    }
    return std::nullopt;
  }
  return std::nullopt;
}

// The constant is of the model's float type, as ONNX's Add / Mul / Div require of both operands
// (an int64 1 beside the Erf is an invalid model, not GELU): an initializer, or a Constant node
// near the pattern (torch writes it just before its reader). Anything else is not the pattern.
bool hasModelType(const Graph& g, std::size_t from, const std::string& tensor) {
  using T = onnx::TensorProto;
  const std::int32_t want = g.dtype() == DType::Float16    ? T::FLOAT16
                            : g.dtype() == DType::BFloat16 ? T::BFLOAT16
                                                           : T::FLOAT;
  if (const Weight* w = g.weight(tensor); w != nullptr && w->initializer != nullptr)
    return w->initializer->data_type() == want;
  const auto count = static_cast<std::size_t>(g.proto().node_size());
  const std::size_t window = 5 * kLookahead;
  for (std::size_t n = from > window ? from - window : 0; n < count && n <= from + window; ++n) {
    const onnx::NodeProto& node = nodeAt(g, n);
    if (node.op_type() != "Constant" || node.output_size() != 1 || node.output(0) != tensor) continue;
    if (findAttribute(node, "value_float") != nullptr) return want == T::FLOAT;
    const onnx::AttributeProto* value = findAttribute(node, "value");
    return value != nullptr && value->has_t() && value->t().data_type() == want;
  }
  return false;
}

bool isScalar(const Graph& g, std::size_t from, const std::string& tensor, double value) {
  const std::optional<double> v = scalarOf(g, from, tensor);
  return v && std::fabs(*v - value) <= 1e-6 * std::fabs(value) && hasModelType(g, from, tensor);
}

Status appendPointwise(Graph& g, std::size_t first, LayerKind kind, std::size_t input, const std::string& output,
                       const std::vector<std::size_t>& fused) {
  const Shape shape = g.activations()[input].shape;
  appendOp(g, makeOp(g, first, kind, {input}), shape, output);
  for (std::size_t n : fused) {
    g.markFused(n);
    g.countFolded(nodeAt(g, n).op_type());
  }
  return Status::ok();
}

// f(x) at `node`, then Mul(x, f(x)): Sigmoid gives SiLU; HardSigmoid in PyTorch's form (alpha 1/6,
// beta 1/2) gives HardSwish, as torch writes it below opset 14.
Result<bool> convertTimesSelf(Graph& g, std::size_t node, std::size_t x) {
  const onnx::NodeProto& gate = nodeAt(g, node);
  const bool hard = gate.op_type() == "HardSigmoid";
  if (hard &&
      !(std::fabs(floatAttribute(gate, "alpha", 0.2) - 1.0 / 6.0) < 1e-6 && floatAttribute(gate, "beta", 0.5) == 0.5))
    return false;  // the HardSigmoid's own conversion says what is wrong
  if (!isSoleStep(g, node, gate.op_type().c_str())) return false;
  const auto mul = nextNode(g, node);
  if (!mul || nodeAt(g, *mul).op_type() != "Mul" || partner(nodeAt(g, *mul), gate.output(0)) != gate.input(0))
    return false;
  const LayerKind kind = hard ? LayerKind::HardSwish : LayerKind::Silu;
  REMAT_RETURN_IF_ERROR(appendPointwise(g, node, kind, x, nodeAt(g, *mul).output(0), {*mul}));
  return true;
}

// Div(x, sqrt 2) at `node`, Erf, Add(1), Mul(x, .), Mul(0.5).
Result<bool> convertGelu(Graph& g, std::size_t node, std::size_t x) {
  const onnx::NodeProto& div = nodeAt(g, node);
  if (!isSoleStep(g, node, "Div") || div.input_size() != 2 || !isScalar(g, node, div.input(1), std::sqrt(2.0)))
    return false;
  const auto erf = nextNode(g, node);
  if (!erf || !isSoleStep(g, *erf, "Erf") || nodeAt(g, *erf).input(0) != div.output(0)) return false;
  const auto add = nextNode(g, *erf);
  if (!add || !isSoleStep(g, *add, "Add") ||
      !isScalar(g, node, partner(nodeAt(g, *add), nodeAt(g, *erf).output(0)), 1.0))
    return false;
  const auto mulX = nextNode(g, *add);
  if (!mulX || !isSoleStep(g, *mulX, "Mul") || partner(nodeAt(g, *mulX), nodeAt(g, *add).output(0)) != div.input(0))
    return false;
  const auto half = nextNode(g, *mulX);
  if (!half || nodeAt(g, *half).op_type() != "Mul" || nodeAt(g, *half).output_size() != 1 ||
      !isScalar(g, node, partner(nodeAt(g, *half), nodeAt(g, *mulX).output(0)), 0.5))
    return false;
  REMAT_RETURN_IF_ERROR(
      appendPointwise(g, node, LayerKind::Gelu, x, nodeAt(g, *half).output(0), {*erf, *add, *mulX, *half}));
  return true;
}

}  // namespace

Result<bool> convertPatternNode(Graph& g, std::size_t node) {
  const onnx::NodeProto& n = nodeAt(g, node);
  if (n.input_size() < 1 || n.output_size() < 1) return false;
  const auto x = g.activation(n.input(0));
  if (!x) return false;
  if (n.op_type() == "Sigmoid" || n.op_type() == "HardSigmoid") return convertTimesSelf(g, node, *x);
  if (n.op_type() == "Div") return convertGelu(g, node, *x);
  return false;
}

}  // namespace remat::onnx_import
