// The ONNX ops that are no primitive layer: the merges Add, Sub, Mul, Div and Concat (which only
// blocks hold, or the bias Add of a MatMul, folded into it), the views Flatten and Reshape (a chain's flatten, or
// nothing), Identity, a zero Pad (nothing, or padding for the Conv / AveragePool after it) and
// ReduceMean over the spatial axes (global average pooling).
#include <algorithm>

#include "onnx_graph.hpp"
#include "remat/base/text.hpp"

namespace remat::onnx_import {
namespace {

std::optional<std::size_t> dataInput(const Graph& g, std::size_t index) {
  return g.activation(nodeInput(g.proto().node(static_cast<int>(index)), 0));
}

Status requireDataInput(const Graph& g, std::size_t index, std::optional<std::size_t>& a) {
  a = dataInput(g, index);
  if (!a) return g.fail(index, "its input 0 is not computed from the model's input");
  return Status::ok();
}

void dropAsAlias(Graph& g, std::size_t index, std::size_t activation) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  g.alias(node.output(0), activation);
  g.countDropped(node.op_type());
}

// x W + b, with W a MatMul's weight: the bias of that linear layer.
Status foldMatMulBias(Graph& g, std::size_t index, std::size_t a, const std::string& biasName) {
  const Activation& act = g.activations()[a];
  const Weight* bias = g.weight(biasName);
  const bool fromMatMul = act.producer != kNone && g.ops()[act.producer].opType == "MatMul" &&
                          !g.ops()[act.producer].layer.bias && g.readers(act.tensor) == 1;
  // ConvNeXt's MatMul over the channels is an NCHW 1x1 conv (onnx_layers.cpp): its bias is [C].
  const bool pointwise = act.shape.size() == 4 && g.isChannelsLast(act.tensor);
  if (!fromMatMul || bias == nullptr || (act.shape.size() != 2 && !pointwise) ||
      (bias->shape != Shape{act.shape[1]} && bias->shape != Shape{1, act.shape[1]}))
    return g.fail(index, "adds a constant to an activation; the importer reads that only as the bias [" +
                             std::to_string(act.shape.size() == 2 ? act.shape[1] : 0) + "] of a MatMul");
  g.ops()[act.producer].layer.bias = true;
  g.alias(g.proto().node(static_cast<int>(index)).output(0), a);
  g.countFolded("Add");
  return Status::ok();
}

// a + b, a - b, a * b or a / b of two activations of one rank (2 to 4 dimensions: [N, F], [N, S, F],
// NCHW) with NumPy broadcasting: a block's inner op (issue 22). The verb names the node's op in
// messages; Sub names its operands "b from a".
struct BinaryNames {
  const char* verb;
  OpRole role;
};
BinaryNames binaryNames(const std::string& opType) {
  if (opType == "Add") return {"adds", OpRole::Add};
  if (opType == "Sub") return {"subtracts", OpRole::Sub};
  if (opType == "Mul") return {"multiplies", OpRole::Mul};
  return {"divides", OpRole::Div};
}

Status convertBroadcast(Graph& g, std::size_t index, std::size_t a, std::size_t b) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const BinaryNames names = binaryNames(node.op_type());
  const Shape& sa = g.activations()[a].shape;
  const Shape& sb = g.activations()[b].shape;
  const std::string operands = node.op_type() == "Sub" ? shapeToString(sb) + " from " + shapeToString(sa)
                                                       : shapeToString(sa) + " and " + shapeToString(sb);
  // NCHW (SE's scale), an MLP's [N, F] or a sequence's [N, S, F] (x * Sigmoid(y)), both of one rank.
  if (sa.size() != sb.size() || sa.size() < 2 || sa.size() > 4)
    return g.fail(index, std::string(names.verb) + " " + operands +
                             "; the importer takes two activations of one rank, 2 to 4 dimensions ([N, F], "
                             "[N, S, F], NCHW)");
  Shape shape(sa.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    if (sa[i] != sb[i] && sa[i] != 1 && sb[i] != 1)
      return g.fail(index, std::string(names.verb) + " " + operands + ": the shapes do not broadcast (axis " +
                               std::to_string(i) + ")");
    shape[i] = std::max(sa[i], sb[i]);
  }
  // Broadcasting can make a tensor larger than either operand: [1, 1, 1, W] * [1, 1, H, 1].
  std::uint64_t bytes = dtypeBytes(g.dtype());
  for (std::int64_t d : shape)
    if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes))
      return g.fail(index, std::string(names.verb) + " " + operands + " into more than 2^64 bytes");
  DataOp op = makeOp(g, index, LayerKind::Abstract, {a, b});
  op.role = names.role;
  appendOp(g, std::move(op), shape);
  return Status::ok();
}

Status convertAdd(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const auto a = g.activation(nodeInput(node, 0));
  const auto b = g.activation(nodeInput(node, 1));
  if (!a && !b) return g.fail(index, "adds nothing computed from the model's input");
  if (!a || !b) return foldMatMulBias(g, index, a ? *a : *b, a ? nodeInput(node, 1) : nodeInput(node, 0));
  return convertBroadcast(g, index, *a, *b);
}

// a - b and a / b: of two activations only. A constant operand is a pattern's (LayerNorm's Sub of
// the mean and Div by the deviation, GELU's Div by sqrt 2: onnx_patterns.cpp, before this) or
// something the chain has no layer for.
Status convertSubOrDiv(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const auto a = g.activation(nodeInput(node, 0));
  const auto b = g.activation(nodeInput(node, 1));
  if (!a || !b)
    return g.fail(index, std::string(node.op_type() == "Sub" ? "subtracts" : "divides") +
                             " with a constant or weight operand; the importer reads " + node.op_type() +
                             " only of two activations (inside a multi-branch piece) or in LayerNorm's and GELU's "
                             "patterns");
  return convertBroadcast(g, index, *a, *b);
}

// a * b of two activations with NumPy broadcasting (Squeeze-and-Excitation's scale * x); torch's
// x * sigmoid(x) and x * hardsigmoid(x) are SiLU and HardSwish (onnx_patterns.cpp) before this.
// ConvNeXt's layer_scale * x: a [C, 1, 1] parameter times an NCHW activation of C channels, the
// parameter used directly as an operand (counted in p, its gradient static as every parameter's).
Status convertLayerScale(Graph& g, std::size_t index, std::size_t a, const Weight& w) {
  const Shape& shape = g.activations()[a].shape;
  if (shape.size() != 4 || (w.shape != Shape{shape[1], 1, 1} && w.shape != Shape{1, shape[1], 1, 1}))
    return g.fail(index, "multiplies " + shapeToString(shape) + " by the weight " + shapeToString(w.shape) +
                             "; the importer reads a weight times an activation only as ConvNeXt's layer_scale, "
                             "[C, 1, 1] times an NCHW activation of C channels");
  g.noteWeight(w);
  DataOp op = makeOp(g, index, LayerKind::Abstract, {a});
  op.role = OpRole::LayerScale;
  const Shape out = shape;
  appendOp(g, std::move(op), out);
  return Status::ok();
}

Status convertMul(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  if (node.input_size() != 2) return g.fail(index, "multiplies " + std::to_string(node.input_size()) + " inputs");
  const auto a = g.activation(nodeInput(node, 0));
  const auto b = g.activation(nodeInput(node, 1));
  if ((a && !b) || (b && !a)) {
    const Weight* w = g.weight(nodeInput(node, a ? 1 : 0));
    if (w != nullptr) return convertLayerScale(g, index, a ? *a : *b, *w);
  }
  if (!a || !b)
    return g.fail(index,
                  "multiplies an activation by a constant or a weight; the importer reads Mul only as the "
                  "product of two activations (Squeeze-and-Excitation's scale) or in x * Sigmoid(x) (SiLU), "
                  "x * HardSigmoid(x) (HardSwish) and GELU's Erf pattern");
  return convertBroadcast(g, index, *a, *b);
}

Status convertConcat(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  std::vector<std::size_t> inputs;
  for (const auto& name : node.input()) {
    const auto a = g.activation(name);
    if (!a) return g.fail(index, "concatenates " + quoteText(name) + ", which is not computed from the model's input");
    inputs.push_back(*a);
  }
  Shape shape = g.activations()[inputs.front()].shape;
  const auto rank = static_cast<std::int64_t>(shape.size());
  const std::int64_t axis = intAttribute(node, "axis", 1);
  if (rank != 4 || (axis != 1 && axis != 1 - rank))
    return g.fail(index, "concatenates along axis " + std::to_string(axis) + " of " + shapeToString(shape) +
                             "; only the channels (axis 1) of NCHW tensors are supported");
  shape[1] = 0;
  for (std::size_t in : inputs) {
    const Shape& s = g.activations()[in].shape;
    if (s.size() != 4 || s[0] != shape[0] || s[2] != shape[2] || s[3] != shape[3])
      return g.fail(index, "concatenates " + shapeToString(g.activations()[inputs.front()].shape) + " and " +
                               shapeToString(s) + ": only the channels may differ (the shapes do not chain)");
    if (__builtin_add_overflow(shape[1], s[1], &shape[1]))
      return g.fail(index, "concatenates more channels than 64 bits count");
  }
  DataOp op = makeOp(g, index, LayerKind::Abstract, std::move(inputs));
  op.role = OpRole::Concat;
  appendOp(g, std::move(op), shape);
  return Status::ok();
}

// A chain `flatten` view of activation a to [N, features], written to `tensor`.
void appendFlatten(Graph& g, std::size_t index, std::size_t a, const std::string& name, const std::string& tensor) {
  const Shape in = g.activations()[a].shape;
  DataOp op = makeOp(g, index, LayerKind::Flatten, {a});
  op.name = name;
  const auto features = static_cast<std::int64_t>(elementCount(in) / static_cast<std::uint64_t>(in[0]));
  appendOp(g, std::move(op), {in[0], features}, tensor);
}

Status convertFlatten(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  std::optional<std::size_t> a;
  REMAT_RETURN_IF_ERROR(requireDataInput(g, index, a));
  const Shape& in = g.activations()[*a].shape;
  const auto rank = static_cast<std::int64_t>(in.size());
  std::int64_t axis = intAttribute(node, "axis", 1);
  if (axis < 0) axis += rank;
  if (axis != 1) return g.fail(index, "flattens from axis " + std::to_string(axis) + "; a chain flattens from axis 1");
  if (rank == 2) {
    dropAsAlias(g, index, *a);
    return Status::ok();
  }
  appendFlatten(g, index, *a, layerNameOf(node, index), node.output(0));
  g.countFolded(node.op_type());
  return Status::ok();
}

Status convertReshape(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  std::optional<std::size_t> a;
  REMAT_RETURN_IF_ERROR(requireDataInput(g, index, a));
  const Constant* target = g.constant(nodeInput(node, 1));
  if (target == nullptr) return g.fail(index, "its shape (input 1) is not a constant the importer can evaluate");
  const Shape in = g.activations()[*a].shape;
  auto out = reshapeTarget(g, index, in, *target);
  if (!out) return out.status();
  if (*out == in) {
    dropAsAlias(g, index, *a);
    return Status::ok();
  }
  if (out->size() == 5) return convertChannelShuffle(g, index, *a, *out);
  if (out->size() != 2 || (*out)[0] != in[0])
    return g.fail(index, "reshapes " + shapeToString(in) + " to " + shapeToString(*out) +
                             "; the only reshapes that chain are a flatten to [N, features] and ShuffleNetV2's "
                             "channel shuffle");
  appendFlatten(g, index, *a, layerNameOf(node, index), node.output(0));
  g.countFolded(node.op_type());
  return Status::ok();
}

// The Pad's amounts per axis (begin, end), from the attribute (opset < 11) or the inputs.
Result<std::vector<std::int64_t>> padAmounts(const Graph& g, std::size_t index, std::size_t rank) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  if (stringAttribute(node, "mode", "constant") != "constant")
    return g.fail(
        index, "pads in mode " + quoteText(stringAttribute(node, "mode", ""), 40) + "; only zero padding is supported");
  std::vector<std::int64_t> pads;
  double value = floatAttribute(node, "value", 0.0);
  if (g.opset() < 11) {
    pads = intsAttribute(node, "pads").value_or(std::vector<std::int64_t>{});
  } else {
    const Constant* p = g.constant(nodeInput(node, 1));
    const Constant* v = g.constant(nodeInput(node, 2));
    if (p == nullptr || (!nodeInput(node, 2).empty() && v == nullptr))
      return g.fail(index, "its pads and value are not constants the importer can evaluate");
    auto amounts = integersOf(*p, "its pads (input 1)");
    if (!amounts) return g.fail(index, amounts.status().message());
    pads = std::move(amounts).value();
    value = v != nullptr && !v->values.empty() ? v->values.front() : 0.0;
  }
  if (value != 0.0) return g.fail(index, "pads with " + numberText(value) + "; only zero padding is supported");
  const Constant* axesInput = g.constant(nodeInput(node, 3));  // opset 18: the axes the pads are for
  std::optional<std::vector<std::int64_t>> axes;
  if (axesInput != nullptr) {
    auto values = integersOf(*axesInput, "its axes (input 3)");
    if (!values) return g.fail(index, values.status().message());
    axes = std::move(values).value();
  }
  std::vector<std::int64_t> full(2 * rank, 0);
  const std::size_t listed = axes ? axes->size() : rank;
  if (pads.size() != 2 * listed)
    return g.fail(index, "has " + std::to_string(pads.size()) + " pads for " + std::to_string(listed) + " axes");
  for (std::size_t i = 0; i < listed; ++i) {
    std::int64_t axis = axes ? (*axes)[i] : static_cast<std::int64_t>(i);
    if (axis < 0) axis += static_cast<std::int64_t>(rank);
    if (axis < 0 || axis >= static_cast<std::int64_t>(rank)) return g.fail(index, "pads an axis out of range");
    full[static_cast<std::size_t>(axis)] = pads[i];
    full[static_cast<std::size_t>(axis) + rank] = pads[i + listed];
  }
  return full;
}

Status convertPad(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  std::optional<std::size_t> a;
  REMAT_RETURN_IF_ERROR(requireDataInput(g, index, a));
  const Shape& in = g.activations()[*a].shape;
  auto pads = padAmounts(g, index, in.size());
  if (!pads) return pads.status();
  if (std::all_of(pads->begin(), pads->end(), [](std::int64_t p) { return p == 0; })) {
    dropAsAlias(g, index, *a);
    return Status::ok();
  }
  const std::vector<std::int64_t>& p = *pads;
  if (in.size() != 4 || p[0] || p[1] || p[4] || p[5] || p[2] != p[3] || p[2] != p[6] || p[2] != p[7] || p[2] < 0)
    return g.fail(index, "pads other than the same amount on every spatial side are not supported");
  g.alias(node.output(0), *a);
  g.setPendingPad(node.output(0), p[2] + g.pendingPad(nodeInput(node, 0)));
  return Status::ok();
}

// The mean over H and W: global average pooling, then (keepdims = 0) a flatten.
Status convertReduceMean(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  std::optional<std::size_t> a;
  REMAT_RETURN_IF_ERROR(requireDataInput(g, index, a));
  const Shape in = g.activations()[*a].shape;
  auto listed = reduceAxes(g, index, in.size());
  if (!listed) return listed.status();
  std::vector<std::int64_t> axes = listed->value_or(std::vector<std::int64_t>{});
  for (auto& axis : axes)
    if (axis < 0) axis += static_cast<std::int64_t>(in.size());
  std::sort(axes.begin(), axes.end());
  if (in.size() != 4 || axes != std::vector<std::int64_t>{2, 3})
    return g.fail(index, "averages over axes other than the spatial ones (2, 3) of an NCHW tensor");
  const bool keep = intAttribute(node, "keepdims", 1) != 0;
  const std::string name = layerNameOf(node, index);
  DataOp pool = makeOp(g, index, LayerKind::AdaptiveAvgPool, {*a});
  const std::size_t pooled = appendOp(g, std::move(pool), {in[0], in[1], 1, 1}, keep ? "" : node.output(0) + "#pooled");
  if (!keep) appendFlatten(g, index, pooled, name + ".flatten", node.output(0));
  return Status::ok();
}

}  // namespace

// ONNX's Reshape rule: 0 copies the input's dimension (unless allowzero), one -1 takes the rest.
// A fixed-batch export writes its batch into the constants of x.view(N, ...): where --batch changed
// the batch, a leading dimension equal to the export batch is that batch and takes the new one.
Result<Shape> reshapeTarget(const Graph& g, std::size_t index, const Shape& in, const Constant& target) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const bool allowZero = intAttribute(node, "allowzero", 0) != 0;
  auto dims = integersOf(target, "its shape (input 1)");
  if (!dims) return g.fail(index, dims.status().message());
  const bool batchChanged = g.exportBatch() > 0 && !in.empty() && in[0] != g.exportBatch();
  if (batchChanged && !dims->empty() && (*dims)[0] == g.exportBatch()) (*dims)[0] = in[0];
  Shape out;
  std::int64_t known = 1, inferred = -1;
  for (std::size_t i = 0; i < dims->size(); ++i) {
    std::int64_t d = (*dims)[i];
    if (d == 0 && !allowZero) {
      if (i >= in.size()) return g.fail(index, "copies dimension " + std::to_string(i) + ", which the input lacks");
      d = in[i];
    }
    if (d == -1) {
      if (inferred >= 0) return g.fail(index, "has more than one -1 in its shape");
      inferred = static_cast<std::int64_t>(i);
    } else if (d <= 0) {
      return g.fail(index, "has dimension " + std::to_string(d) + " in its shape");
    } else if (__builtin_mul_overflow(known, d, &known)) {
      return g.fail(index, "has a shape of more than 2^63 values");
    }
    out.push_back(d);
  }
  const auto total = static_cast<std::int64_t>(elementCount(in));
  if (inferred >= 0 && total % known == 0) out[static_cast<std::size_t>(inferred)] = total / known;
  if (static_cast<std::int64_t>(elementCount(out)) != total || (inferred >= 0 && total % known != 0))
    return g.fail(index, "reshapes " + shapeToString(in) + " (" + std::to_string(total) +
                             " values) to a shape of another size (the shapes do not chain)" +
                             (batchChanged ? "; its shape constant does not carry the model's fixed batch " +
                                                 std::to_string(g.exportBatch()) +
                                                 " as its leading dimension, so --batch cannot rewrite it: export "
                                                 "with a symbolic batch (torch.onnx.export(..., dynamic_axes={'input': "
                                                 "{0: 'batch'}}))"
                                           : std::string()));
  return out;
}

bool isViewOp(const std::string& opType) {
  return opType == "Add" || opType == "Sub" || opType == "Mul" || opType == "Div" || opType == "Concat" ||
         opType == "Flatten" || opType == "Reshape" || opType == "Identity" || opType == "Pad" ||
         opType == "ReduceMean" || opType == "Slice" || opType == "Transpose";
}

Status convertViewNode(Graph& graph, std::size_t node) {
  const std::string& op = graph.proto().node(static_cast<int>(node)).op_type();
  if (op == "Add") return convertAdd(graph, node);
  if (op == "Mul") return convertMul(graph, node);
  if (op == "Sub" || op == "Div") return convertSubOrDiv(graph, node);
  if (op == "Concat") return convertConcat(graph, node);
  if (op == "Flatten") return convertFlatten(graph, node);
  if (op == "Reshape") return convertReshape(graph, node);
  if (op == "Pad") return convertPad(graph, node);
  if (op == "ReduceMean") return convertReduceMean(graph, node);
  if (op == "Slice") return convertSlice(graph, node);
  if (op == "Transpose") return convertTranspose(graph, node);
  std::optional<std::size_t> a;
  REMAT_RETURN_IF_ERROR(requireDataInput(graph, node, a));
  dropAsAlias(graph, node, *a);  // Identity
  return Status::ok();
}

}  // namespace remat::onnx_import
