// The node patterns torch's exporter writes for one PyTorch op, read back as that op (the memory
// model counts what PyTorch's autograd keeps for the op it runs, not for the pieces):
//   SiLU:  Sigmoid(x) -> Mul(x, that)                                  (nn.SiLU at every opset)
//   HardSwish: HardSigmoid(x; 1/6, 1/2) -> Mul(x, that)                (nn.Hardswish below opset 14)
//   GELU:  Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x, that) -> Mul(0.5) (nn.GELU below opset 20)
//   LayerNorm: ReduceMean(x) -> Sub(x, mean) -> Pow(2) -> ReduceMean -> Add(epsilon) -> Sqrt ->
//          Div(Sub's, that) -> Mul(weight) -> Add(bias)             (nn.LayerNorm below opset 17)
// A pattern's nodes follow each other (Constant nodes between them skipped) and each inner result
// has no other reader; anything else is left to the ordinary conversion, which refuses what it
// cannot read. A LayerNorm that starts (ReduceMean over the last axis, then Sub(x, mean)) and does
// not go on as torch writes it is refused at the node where it departs.
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

// ReduceMean over the last axis of a 2-D tensor (with its dims kept unless `anyKeepDims`): the axes
// attribute, or (opset 18 on) the constant input 1.
bool meansLastAxis(const Graph& g, const onnx::NodeProto& node, bool anyKeepDims = false, std::int64_t rank = 2) {
  if (node.op_type() != "ReduceMean" || (!anyKeepDims && intAttribute(node, "keepdims", 1) != 1)) return false;
  std::optional<std::vector<std::int64_t>> axes = intsAttribute(node, "axes");
  if (g.opset() >= 18 && !nodeInput(node, 1).empty()) {
    const Constant* c = g.constant(nodeInput(node, 1));
    if (c == nullptr) return false;
    auto values = integersOf(*c, "axes");
    if (!values) return false;
    axes = std::move(values).value();
  }
  return axes && axes->size() == 1 && ((*axes)[0] == -1 || (*axes)[0] == rank - 1);
}

// The walk over a decomposed LayerNorm once it has begun: each step is the next node, of its op,
// reading what the step before wrote; otherwise the error says where and what was expected.
class LayerNormWalk {
 public:
  LayerNormWalk(Graph& g, std::size_t start) : g_(g), start_(start) {}

  // The node after `prev` (Constants skipped) if it is `op` and reads `input`.
  Result<std::size_t> next(std::size_t prev, const char* op, const std::string& input, const char* expected) const {
    const auto n = nextNode(g_, prev);
    if (!n) return broken(prev, std::string("nothing follows it; expected ") + expected);
    const onnx::NodeProto& node = nodeAt(g_, *n);
    bool reads = false;
    for (const auto& in : node.input()) reads = reads || in == input;
    if (node.op_type() != op || !reads || node.output_size() != 1)
      return broken(*n, std::string("expected ") + expected);
    return *n;
  }

  // Node `n`'s output has `readers` readers, as the pattern's own nodes read it.
  Status readBy(std::size_t n, std::size_t readers) const {
    if (g_.readers(nodeAt(g_, n).output(0)) != readers)
      return broken(n, "its output is read outside the pattern, which reads it " + std::to_string(readers) + " time" +
                           (readers == 1 ? "" : "s"));
    return Status::ok();
  }

  Status broken(std::size_t at, const std::string& why) const {
    return g_.fail(at, "breaks the decomposed LayerNorm that starts at node " + std::to_string(start_) + ": " + why +
                           " (torch writes ReduceMean, Sub, Pow(2), ReduceMean, Add(epsilon), Sqrt, Div, "
                           "Mul(weight), Add(bias))");
  }

 private:
  Graph& g_;
  std::size_t start_;
};

Result<bool> convertLayerNormPattern(Graph& g, std::size_t node, std::size_t x) {
  const onnx::NodeProto& mean = nodeAt(g, node);
  // [N, F], or ConvNeXt's channels-last [N, H, W, C] (the NCHW activation normalized over C).
  const std::size_t rank = g.activations()[x].shape.size();
  const bool channelsLast = rank == 4 && g.isChannelsLast(mean.input(0));
  if ((rank != 2 && !channelsLast) || !meansLastAxis(g, mean, true, static_cast<std::int64_t>(rank)) ||
      mean.output_size() != 1)
    return false;
  const auto subAt = nextNode(g, node);
  if (!subAt) return false;
  const onnx::NodeProto& sub = nodeAt(g, *subAt);
  if (sub.op_type() != "Sub" || sub.input_size() != 2 || sub.input(0) != mean.input(0) ||
      sub.input(1) != mean.output(0))
    return false;
  const LayerNormWalk walk(g, node);
  if (!meansLastAxis(g, mean, false, static_cast<std::int64_t>(rank)))
    return walk.broken(node, "its mean drops the averaged axis (keepdims 0), so x - mean does not broadcast per row");
  REMAT_RETURN_IF_ERROR(walk.readBy(node, 1));
  REMAT_RETURN_IF_ERROR(walk.readBy(*subAt, 2));  // Pow and Div
  const std::string& centred = sub.output(0);
  auto pow = walk.next(*subAt, "Pow", centred, "Pow(x - mean, 2)");
  if (!pow) return pow.status();
  if (nodeAt(g, *pow).input(0) != centred || !isScalar(g, node, nodeAt(g, *pow).input(1), 2.0))
    return walk.broken(*pow, "its exponent is not the constant 2 of the model's float type");
  REMAT_RETURN_IF_ERROR(walk.readBy(*pow, 1));
  auto variance = walk.next(*pow, "ReduceMean", nodeAt(g, *pow).output(0), "ReduceMean over the last axis");
  if (!variance) return variance.status();
  if (!meansLastAxis(g, nodeAt(g, *variance), false, static_cast<std::int64_t>(rank)))
    return walk.broken(*variance, "it does not average over the last axis with its dims kept");
  REMAT_RETURN_IF_ERROR(walk.readBy(*variance, 1));
  auto add = walk.next(*variance, "Add", nodeAt(g, *variance).output(0), "Add(variance, epsilon)");
  if (!add) return add.status();
  const std::string epsilonName = partner(nodeAt(g, *add), nodeAt(g, *variance).output(0));
  const std::optional<double> epsilon = scalarOf(g, node, epsilonName);
  if (!epsilon || !hasModelType(g, node, epsilonName))
    return walk.broken(*add, "its epsilon is not a constant scalar of the model's float type");
  REMAT_RETURN_IF_ERROR(walk.readBy(*add, 1));
  auto sqrt = walk.next(*add, "Sqrt", nodeAt(g, *add).output(0), "Sqrt(variance + epsilon)");
  if (!sqrt) return sqrt.status();
  REMAT_RETURN_IF_ERROR(walk.readBy(*sqrt, 1));
  auto div = walk.next(*sqrt, "Div", nodeAt(g, *sqrt).output(0), "Div(x - mean, that)");
  if (!div) return div.status();
  if (nodeAt(g, *div).input(0) != centred) return walk.broken(*div, "it does not divide x - mean");
  REMAT_RETURN_IF_ERROR(walk.readBy(*div, 1));
  const std::string& normalized = nodeAt(g, *div).output(0);
  const char* affine = "Mul(normalized, weight): layernorm layers have nn.LayerNorm's weight and bias";
  auto mul = walk.next(*div, "Mul", normalized, affine);
  if (!mul) return mul.status();
  REMAT_RETURN_IF_ERROR(walk.readBy(*mul, 1));
  auto shift = walk.next(*mul, "Add", nodeAt(g, *mul).output(0), "Add(scaled, bias)");
  if (!shift) return shift.status();
  const std::string weight = partner(nodeAt(g, *mul), normalized);
  const std::string bias = partner(nodeAt(g, *shift), nodeAt(g, *mul).output(0));
  REMAT_RETURN_IF_ERROR(appendLayerNorm(g, node, x, weight, bias, *epsilon, nodeAt(g, *shift).output(0)));
  for (std::size_t n : {*subAt, *pow, *variance, *add, *sqrt, *div, *mul, *shift}) {
    g.markFused(n);
    g.countFolded(nodeAt(g, n).op_type());
  }
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
  if (n.op_type() == "ReduceMean") return convertLayerNormPattern(g, node, *x);
  return false;
}

}  // namespace remat::onnx_import
