// Transformers in: the patterns torch writes for one op, checked where the transformer kinds take
// them as that op (onnx_transformer.hpp): LayerNorm's decomposition below opset 17 (ReduceMean, Sub,
// Pow 2, ReduceMean, Add epsilon, Sqrt, Div) and exact GELU's (Div by sqrt 2, Erf, Add 1, Mul by the
// input, Mul by 0.5). A pattern half-matched or with other constants computes something else, which
// no kind models: an error at the node.
#include <cmath>

#include "onnx_transformer.hpp"

namespace remat::onnx_import {
namespace {

std::optional<double> floatScalar(const TransformerGraph& t, const std::string& tensor) {
  return constantScalar(t, tensor, true);
}

// The data nodes that read a tensor.
std::vector<std::size_t> readersOf(const TransformerGraph& t, const std::string& tensor) {
  std::vector<std::size_t> readers;
  for (std::size_t i : t.dataNodes)
    for (const auto& in : nodeAt(t, i).input())
      if (in == tensor) {
        readers.push_back(i);
        break;
      }
  return readers;
}

// The one reader of node `i`'s output, of type `op`; kNone when it has another or more.
std::size_t soleReader(const TransformerGraph& t, std::size_t i, const char* op) {
  const std::vector<std::size_t> readers = readersOf(t, nodeAt(t, i).output(0));
  return readers.size() == 1 && nodeAt(t, readers.front()).op_type() == op ? readers.front() : kNone;
}

// The constant operand of a binary node whose other operand is `data`.
std::optional<double> operand(const TransformerGraph& t, std::size_t i, const std::string& data) {
  const onnx::NodeProto& node = nodeAt(t, i);
  if (node.input_size() != 2) return std::nullopt;
  return floatScalar(t, node.input(0) == data ? node.input(1) : node.input(0));
}

// The axes attribute, or from opset 18 the constant input 1 (reduceAxes).
bool lastAxisKept(const TransformerGraph& t, std::size_t reduce) {
  const auto axes = reduceAxes(*t.graph, reduce, 0);
  return intAttribute(nodeAt(t, reduce), "keepdims", 1) == 1 && axes && *axes && (*axes)->size() == 1 &&
         (**axes)[0] == -1;
}

Status checkLayerNorm(const TransformerGraph& t, std::size_t mean, std::size_t sub) {
  const std::string fail =
      "is not LayerNorm's decomposition as torch writes it (ReduceMean over the last axis, "
      "Sub, Pow 2, ReduceMean, Add epsilon in [0, 1), Sqrt, Div)";
  // The centred input is read twice: by the Pow and by the Div.
  std::size_t pow = kNone;
  for (std::size_t r : readersOf(t, nodeAt(t, sub).output(0)))
    if (nodeAt(t, r).op_type() == "Pow") pow = r;
  std::size_t variance = kNone, add = kNone, sqrt = kNone;
  if (pow != kNone) variance = soleReader(t, pow, "ReduceMean");
  if (variance != kNone) add = soleReader(t, variance, "Add");
  if (add != kNone) sqrt = soleReader(t, add, "Sqrt");
  const auto exponent = pow == kNone ? std::nullopt : operand(t, pow, nodeAt(t, sub).output(0));
  // value_or: NaN fails both comparisons, and GCC 12 does not see an optional's flag guard its value.
  const double epsilon =
      (add == kNone ? std::nullopt : operand(t, add, nodeAt(t, variance).output(0))).value_or(std::nan(""));
  const bool ok = sqrt != kNone && lastAxisKept(t, mean) && lastAxisKept(t, variance) && exponent && *exponent == 2.0 &&
                  epsilon >= 0.0 && epsilon < 1.0 && !readersOf(t, nodeAt(t, sqrt).output(0)).empty() &&
                  nodeAt(t, readersOf(t, nodeAt(t, sqrt).output(0)).front()).op_type() == "Div";
  return ok ? Status::ok() : t.graph->fail(mean, fail);
}

Status checkGelu(const TransformerGraph& t, std::size_t erf) {
  const std::string fail =
      "is not exact GELU as torch writes it (Div by sqrt 2, Erf, Add 1, Mul by the input, Mul "
      "by 0.5, each result read once)";
  auto div = t.producer.find(nodeAt(t, erf).input(0));
  if (div == t.producer.end() || nodeAt(t, div->second).op_type() != "Div") return t.graph->fail(erf, fail);
  const std::string x = nodeAt(t, div->second).input(0);
  const auto root2 = floatScalar(t, nodeAt(t, div->second).input(1));
  const std::size_t add = soleReader(t, erf, "Add");
  const std::size_t mul = add == kNone ? kNone : soleReader(t, add, "Mul");
  const std::size_t half = mul == kNone ? kNone : soleReader(t, mul, "Mul");
  const auto one = add == kNone ? std::nullopt : operand(t, add, nodeAt(t, erf).output(0));
  const auto halfValue = half == kNone ? std::nullopt : operand(t, half, nodeAt(t, mul).output(0));
  const bool readsX = mul != kNone && (nodeAt(t, mul).input(0) == x || nodeAt(t, mul).input(1) == x);
  const bool ok = root2 && std::abs(*root2 - std::sqrt(2.0)) < 1e-6 && one && std::abs(*one - 1.0) < 1e-6 &&
                  halfValue && std::abs(*halfValue - 0.5) < 1e-6 && readsX &&
                  readersOf(t, nodeAt(t, div->second).output(0)).size() == 1;
  return ok ? Status::ok() : t.graph->fail(erf, fail);
}

// The kinds' LayerNorm normalises the last axis (nn.LayerNorm(d) on [N, S, d]); ONNX 1.12's inference
// takes another axis whose Scale then does not fit, so the axis is checked here.
Status checkLayerNormAxis(const TransformerGraph& t, std::size_t i) {
  const onnx::NodeProto& node = nodeAt(t, i);
  const Shape* shape = t.shapeOf(node.input(0));
  if (shape == nullptr) return Status::ok();  // Swin's checks name an op without a shape
  const auto rank = static_cast<std::int64_t>(shape->size());
  const std::int64_t axis = intAttribute(node, "axis", -1);
  if (axis == -1 || axis == rank - 1) return Status::ok();
  return t.graph->fail(i, "its axis is " + std::to_string(axis) + " of " + std::to_string(rank) +
                              " (the input's rank); a transformer's LayerNorm normalises the last axis only (-1)");
}

}  // namespace

Status checkTransformerPatterns(const TransformerGraph& t) {
  for (std::size_t i : t.dataNodes) {
    const onnx::NodeProto& node = nodeAt(t, i);
    if (node.op_type() == "Erf") REMAT_RETURN_IF_ERROR(checkGelu(t, i));
    if (node.op_type() == "LayerNormalization") REMAT_RETURN_IF_ERROR(checkLayerNormAxis(t, i));
    if (node.op_type() != "ReduceMean") continue;
    // The mean of a decomposed LayerNorm is read by the Sub of its input; the variance's ReduceMean
    // is checked as part of the first.
    const std::vector<std::size_t> readers = readersOf(t, node.output(0));
    for (std::size_t r : readers)
      if (nodeAt(t, r).op_type() == "Sub" && nodeAt(t, r).input(1) == node.output(0))
        REMAT_RETURN_IF_ERROR(checkLayerNorm(t, i, r));
  }
  return Status::ok();
}

}  // namespace remat::onnx_import
