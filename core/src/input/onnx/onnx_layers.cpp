// The ONNX ops that become chain layers of a primitive kind: Conv, MaxPool, AveragePool,
// GlobalAveragePool, BatchNormalization, Gemm, MatMul, Relu, Clip (ReLU6), Dropout, LayerNormalization
// (and the layernorm that torch's decomposed form becomes, onnx_patterns.cpp) and the pointwise
// ops the operator table maps (Sigmoid, Tanh, HardSwish, HardSigmoid, Gelu). Each reads
// its attributes in every opset form (attributes, or constant inputs in newer opsets), checks that
// its weights and shapes chain, and computes its output shape by ONNX's rules; onnx_cut.cpp checks
// that the chain's own shape inference agrees.
#include <array>
#include <cmath>
#include <limits>

#include "onnx_graph.hpp"
#include "remat/base/text.hpp"
#include "remat/model/operators.hpp"

namespace remat::onnx_import {
namespace {

// Kernel sizes, strides, dilations, pads and groups past this are no model's; keeping them below it
// keeps the shape arithmetic far from overflow (the chain's own fields have the same limit).
constexpr std::int64_t kMaxAttribute = 2147483647;

// An attribute's values for a message: at most eight of them (a hostile file can list millions).
std::string list(const std::vector<std::int64_t>& values) {
  constexpr std::size_t kShown = 8;
  std::string text = "[";
  for (std::size_t i = 0; i < values.size() && i < kShown; ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  if (values.size() > kShown) text += ", ... (" + std::to_string(values.size()) + " values)";
  return text + "]";
}

// A per-axis attribute of a 2-D op (kernel_shape, strides, dilations) with both axes alike.
Result<std::int64_t> squareAttribute(const Graph& g, std::size_t index, const char* name, std::int64_t fallback) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const auto values = intsAttribute(node, name);
  if (!values) return fallback;
  if (values->size() != 2) return g.fail(index, std::string(name) + " " + list(*values) + " is not 2-D");
  if ((*values)[0] != (*values)[1])
    return g.fail(index, std::string(name) + " " + list(*values) +
                             " differs between height and width; chain layers take one value for both");
  if ((*values)[0] < 1 || (*values)[0] > kMaxAttribute)
    return g.fail(index,
                  std::string(name) + " " + list(*values) + " is not between 1 and " + std::to_string(kMaxAttribute));
  return (*values)[0];
}

// Input 0 as an NCHW activation; null (with `status` set) otherwise.
const Activation* nchwInput(const Graph& g, std::size_t index, Status& status) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const auto a = g.activation(nodeInput(node, 0));
  if (!a) {
    status = g.fail(index, "its input 0 is not computed from the model's input");
    return nullptr;
  }
  const Activation& act = g.activations()[*a];
  if (act.shape.size() != 4) {
    status = g.fail(index, "takes a " + shapeToString(act.shape) + " input; it needs NCHW (4 dimensions)");
    return nullptr;
  }
  return &act;
}

// ONNX's output size: floor (or ceil) of (in + padding - effective kernel) / stride, plus one.
std::int64_t outputSize(std::int64_t in, std::int64_t padding, std::int64_t kernel, std::int64_t stride, bool ceil) {
  const std::int64_t span = in + 2 * padding - kernel;
  if (span < 0) return 0;
  return (ceil ? (span + stride - 1) / stride : span / stride) + 1;
}

Status checkUnusedOutputs(const Graph& g, std::size_t index, const char* what) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  for (int i = 1; i < node.output_size(); ++i)
    if (!node.output(i).empty() && g.isUsed(node.output(i)))
      return g.fail(index, "its output " + std::to_string(i) + " (" + quoteText(node.output(i)) + ", " + what +
                               ") is used; the importer follows output 0 only");
  return Status::ok();
}

std::size_t activationId(const Graph& g, const Activation& a) { return *g.activation(a.tensor); }

// A per-axis attribute of a 2-D op (height, width), each value in [1, kMaxAttribute].
Result<std::array<std::int64_t, 2>> axisAttribute(const Graph& g, std::size_t index, const char* name,
                                                  std::array<std::int64_t, 2> fallback) {
  const auto values = intsAttribute(g.proto().node(static_cast<int>(index)), name);
  if (!values) return fallback;
  if (values->size() != 2) return g.fail(index, std::string(name) + " " + list(*values) + " is not 2-D");
  for (const std::int64_t v : *values)
    if (v < 1 || v > kMaxAttribute)
      return g.fail(index,
                    std::string(name) + " " + list(*values) + " is not between 1 and " + std::to_string(kMaxAttribute));
  return std::array<std::int64_t, 2>{(*values)[0], (*values)[1]};
}

// A Conv's window per axis (height, width): kernel, stride, padding. A conv2d takes each axis its own
// (1x7 and 7x1 kernels: Inception-v3), padded alike at both ends of an axis, and no dilation.
struct ConvWindow {
  std::array<std::int64_t, 2> kernel{}, stride{}, padding{};
};

Result<ConvWindow> convWindow(Graph& g, std::size_t index, const Shape& input, const Shape& weights) {
  ConvWindow c;
  auto kernel = axisAttribute(g, index, "kernel_shape", {weights[2], weights[3]});
  auto stride = axisAttribute(g, index, "strides", {1, 1});
  auto dilation = axisAttribute(g, index, "dilations", {1, 1});
  if (!kernel || !stride || !dilation) return !kernel ? kernel.status() : !stride ? stride.status() : dilation.status();
  if ((*kernel)[0] != weights[2] || (*kernel)[1] != weights[3])
    return g.fail(index, "kernel_shape disagrees with the weights " + shapeToString(weights));
  if ((*dilation)[0] != 1 || (*dilation)[1] != 1)
    return g.fail(index, "dilation " + list({(*dilation)[0], (*dilation)[1]}) +
                             ": conv2d layers are not dilated (dilation 1 only)");
  auto padding = axisPadding(g, index, input, {(*kernel)[0], (*kernel)[1]}, {(*stride)[0], (*stride)[1]});
  if (!padding) return padding.status();
  c.kernel = *kernel;
  c.stride = *stride;
  c.padding = *padding;
  return c;
}

Status convertConv(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  Status status;
  const Activation* x = nchwInput(g, index, status);
  if (x == nullptr) return status;
  const Weight* w = g.weight(nodeInput(node, 1));
  if (w == nullptr) return g.fail(index, "its weights (input 1) are not weights of the model");
  g.noteWeight(*w);
  const std::int64_t group = intAttribute(node, "group", 1);
  std::int64_t channels = 0;
  if (w->shape.size() != 4 || group <= 0 || group > x->shape[1] ||
      __builtin_mul_overflow(w->shape[1], group, &channels) || channels != x->shape[1])
    return g.fail(index, "weights " + shapeToString(w->shape) + " in " + std::to_string(group) +
                             " groups do not take the input " + shapeToString(x->shape) + " (the shapes do not chain)");
  auto window = convWindow(g, index, x->shape, w->shape);
  if (!window) return window.status();
  const Weight* bias = g.weight(nodeInput(node, 2));
  if (!nodeInput(node, 2).empty() && (bias == nullptr || bias->shape != Shape{w->shape[0]}))
    return g.fail(index, "its bias (input 2) is not a weight of shape [" + std::to_string(w->shape[0]) + "]");
  const auto& [kernel, stride, padding] = *window;
  const std::int64_t oh = outputSize(x->shape[2], padding[0], kernel[0], stride[0], false);
  const std::int64_t ow = outputSize(x->shape[3], padding[1], kernel[1], stride[1], false);
  if (oh <= 0 || ow <= 0)
    return g.fail(index, "kernel " + shapeToString({kernel[0], kernel[1]}) + " is larger than the padded input " +
                             shapeToString({x->shape[2] + 2 * padding[0], x->shape[3] + 2 * padding[1]}));
  DataOp op = makeOp(g, index, LayerKind::Conv2d, {activationId(g, *x)});
  op.layer.outChannels = w->shape[0];
  op.layer.kernel = kernel[0];
  op.layer.stride = stride[0];
  op.layer.padding = padding[0];
  op.layer.setWidthAxis(kernel[1], stride[1], padding[1]);
  op.layer.groups = group;
  op.layer.bias = bias != nullptr;
  appendOp(g, std::move(op), {x->shape[0], w->shape[0], oh, ow});
  return Status::ok();
}

Status convertPool(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const bool isMax = node.op_type() == "MaxPool";
  Status status;
  const Activation* x = nchwInput(g, index, status);
  if (x == nullptr) return status;
  REMAT_RETURN_IF_ERROR(checkUnusedOutputs(g, index, "the max indices"));
  if (!findAttribute(node, "kernel_shape")) return g.fail(index, "has no kernel_shape");
  auto kernel = squareAttribute(g, index, "kernel_shape", 1);
  auto stride = squareAttribute(g, index, "strides", 1);
  auto dilation = squareAttribute(g, index, "dilations", 1);
  if (!kernel || !stride || !dilation) return !kernel ? kernel.status() : !stride ? stride.status() : dilation.status();
  if (*dilation != 1) return g.fail(index, "dilation " + std::to_string(*dilation) + ": pools are not dilated");
  for (const char* flag : {"ceil_mode", "count_include_pad"}) {
    const std::int64_t value = intAttribute(node, flag, 0);
    if (value != 0 && value != 1)
      return g.fail(index, std::string(flag) + " " + std::to_string(value) + " is not 0 or 1");
  }
  const bool ceil = intAttribute(node, "ceil_mode", 0) != 0;
  const std::int64_t folded = g.pendingPad(nodeInput(node, 0));  // a Pad's zeros are averaged, i.e. counted
  if (isMax && folded > 0) return g.fail(index, "a zero Pad before a MaxPool is not max pooling's padding");
  auto padding = symmetricPadding(g, index, x->shape, {*kernel, *kernel}, {*stride, *stride});
  if (!padding) return padding.status();
  if (*padding > *kernel / 2)  // PyTorch's rule, which the chain's pools follow (checked here, at the node)
    return g.fail(index, "padding " + std::to_string(*padding) + " is more than half of kernel " +
                             std::to_string(*kernel) + " (PyTorch's rule for pools)");
  if (!isMax && *padding > folded && intAttribute(node, "count_include_pad", 0) == 0)
    return g.fail(index,
                  "averages without its padding (count_include_pad = 0); avgpool layers count it, "
                  "as PyTorch's AvgPool2d does by default");
  const std::int64_t oh = outputSize(x->shape[2], *padding, *kernel, *stride, ceil);
  const std::int64_t ow = outputSize(x->shape[3], *padding, *kernel, *stride, ceil);
  if (oh <= 0 || ow <= 0)
    return g.fail(index, "kernel " + std::to_string(*kernel) + " is larger than the padded input");
  DataOp op = makeOp(g, index, isMax ? LayerKind::MaxPool : LayerKind::AvgPool, {activationId(g, *x)});
  op.layer.kernel = *kernel;
  op.layer.stride = *stride;
  op.layer.padding = *padding;
  op.layer.ceilMode = ceil;
  appendOp(g, std::move(op), {x->shape[0], x->shape[1], oh, ow});
  return Status::ok();
}

Status convertGlobalAveragePool(Graph& g, std::size_t index) {
  Status status;
  const Activation* x = nchwInput(g, index, status);
  if (x == nullptr) return status;
  DataOp op = makeOp(g, index, LayerKind::AdaptiveAvgPool, {activationId(g, *x)});
  appendOp(g, std::move(op), {x->shape[0], x->shape[1], 1, 1});
  return Status::ok();
}

Status convertBatchNorm(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const auto a = g.activation(nodeInput(node, 0));
  if (!a) return g.fail(index, "its input 0 is not computed from the model's input");
  const Shape shape = g.activations()[*a].shape;
  if (shape.size() != 2 && shape.size() != 4)
    return g.fail(index, "normalizes a " + shapeToString(shape) + " input; batchnorm takes [N, C] or [N, C, H, W]");
  for (int i = 1; i <= 4; ++i) {
    const Weight* w = g.weight(nodeInput(node, i));
    if (w == nullptr || w->shape != Shape{shape[1]})
      return g.fail(index, "its input " + std::to_string(i) + " (" + quoteText(nodeInput(node, i)) +
                               ") is not a weight of shape [" + std::to_string(shape[1]) + "]");
  }
  REMAT_RETURN_IF_ERROR(checkUnusedOutputs(g, index, "running or saved statistics"));
  appendOp(g, makeOp(g, index, LayerKind::BatchNorm, {*a}), shape);
  return Status::ok();
}

// ConvNeXt's Linear over the channels of a channels-last tensor, MatMul(x, W [C, K]): on the NCHW
// activation that is a 1x1 convolution to K channels, the same parameters and the same saved input
// (docs/memory-model.md section 6); its bias Add folds in as a MatMul's does (onnx_views.cpp).
Status convertChannelsLastLinear(Graph& g, std::size_t index, std::size_t a, const Weight& w) {
  const Shape in = g.activations()[a].shape;
  if (w.shape.size() != 2 || w.shape[0] != in[1])
    return g.fail(index, "weights " + shapeToString(w.shape) + " do not take the " + std::to_string(in[1]) +
                             " channels of the channels-last input (the shapes do not chain)");
  DataOp op = makeOp(g, index, LayerKind::Conv2d, {a});
  op.layer.outChannels = w.shape[1];
  op.layer.kernel = 1;
  op.layer.stride = 1;
  op.layer.padding = 0;
  op.layer.bias = false;
  appendOp(g, std::move(op), {in[0], w.shape[1], in[2], in[3]});
  return Status::ok();
}

// Gemm (y = A B' + C with transB = 1, as torch exports nn.Linear) and MatMul (y = A B, whose bias
// Add onnx_views.cpp folds in).
Status convertLinear(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const bool gemm = node.op_type() == "Gemm";
  const auto a = g.activation(nodeInput(node, 0));
  const Weight* b = g.weight(nodeInput(node, 1));
  if (!a || b == nullptr) return g.fail(index, "needs the activation as input 0 and a weight as input 1");
  g.noteWeight(*b);
  const Shape in = g.activations()[*a].shape;
  if (!gemm && in.size() == 4 && g.isChannelsLast(nodeInput(node, 0)))
    return convertChannelsLastLinear(g, index, *a, *b);
  if (gemm && (intAttribute(node, "transA", 0) != 0 || floatAttribute(node, "alpha", 1) != 1.0 ||
               floatAttribute(node, "beta", 1) != 1.0))
    return g.fail(index, "a linear layer is Gemm with transA = 0, alpha = 1 and beta = 1");
  const bool transB = gemm && intAttribute(node, "transB", 0) != 0;
  if (in.size() != 2 || b->shape.size() != 2 || b->shape[transB ? 1 : 0] != in[1])
    return g.fail(index, "weights " + shapeToString(b->shape) + (transB ? " (transposed)" : "") +
                             " do not take the input " + shapeToString(in) + " (the shapes do not chain)");
  const std::int64_t outFeatures = b->shape[transB ? 0 : 1];
  const Weight* c = gemm ? g.weight(nodeInput(node, 2)) : nullptr;
  if (gemm && !nodeInput(node, 2).empty() &&
      (c == nullptr || (c->shape != Shape{outFeatures} && c->shape != Shape{1, outFeatures})))
    return g.fail(index, "its bias (input 2) is not a weight of shape [" + std::to_string(outFeatures) + "]");
  DataOp op = makeOp(g, index, LayerKind::Linear, {*a});
  op.layer.outFeatures = outFeatures;
  op.layer.bias = c != nullptr;
  appendOp(g, std::move(op), {in[0], outFeatures});
  return Status::ok();
}

// A bound of Clip: the attribute (opset < 11) or the constant input (11 on); absent is unbounded.
Result<double> clipBound(const Graph& g, std::size_t index, const char* attribute, int input, double unbounded) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  if (g.opset() < 11) return floatAttribute(node, attribute, unbounded);
  const std::string& name = nodeInput(node, input);
  if (name.empty()) return unbounded;
  const Constant* c = g.constant(name);
  if (c == nullptr || c->values.size() != 1) return g.fail(index, std::string(attribute) + " is not a constant scalar");
  return c->values.front();
}

// PyTorch's forms only: HardSigmoid with alpha 1/6 and beta 1/2 (relu6(x + 3) / 6; ONNX's default
// alpha is 0.2, which torch's export overrides), Gelu with approximate "none" (the erf form).
Status checkPointwiseAttributes(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  if (node.op_type() == "HardSigmoid") {
    const double alpha = floatAttribute(node, "alpha", 0.2), beta = floatAttribute(node, "beta", 0.5);
    // float32 attributes: 1/6 is 0.16666667163...
    if (!(std::fabs(alpha - 1.0 / 6.0) < 1e-6 && beta == 0.5))
      return g.fail(index, "has alpha " + numberText(alpha) + " and beta " + numberText(beta) +
                               "; HardSigmoid is read as PyTorch's (alpha 1/6, beta 0.5) only");
  }
  if (node.op_type() == "Gelu") {
    const std::string approximate = stringAttribute(node, "approximate", "none");
    if (approximate != "none")
      return g.fail(index, "has approximate " + quoteText(approximate, 40) +
                               "; Gelu is read in its exact (erf) form, approximate 'none', only");
  }
  return Status::ok();
}

Status convertActivation(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const auto a = g.activation(nodeInput(node, 0));
  if (!a) return g.fail(index, "its input 0 is not computed from the model's input");
  const OperatorInfo* info = findOnnxOperator(node.op_type());
  LayerKind kind = info != nullptr ? info->kind : LayerKind::Relu;
  REMAT_RETURN_IF_ERROR(checkPointwiseAttributes(g, index));
  if (node.op_type() == "Clip") {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    auto low = clipBound(g, index, "min", 1, -kInf);
    auto high = clipBound(g, index, "max", 2, kInf);
    if (!low || !high) return !low ? low.status() : high.status();
    const bool relu = *low == 0 && *high >= static_cast<double>(std::numeric_limits<float>::max());
    if (!(*low == 0 && *high == 6) && !relu)
      return g.fail(index, "clips to [" + numberText(*low) + ", " + numberText(*high) +
                               "]; Clip is read as ReLU6 [0, 6] or ReLU [0, inf) only");
    kind = relu ? LayerKind::Relu : LayerKind::Relu6;
  }
  const Shape shape = g.activations()[*a].shape;
  appendOp(g, makeOp(g, index, kind, {*a}), shape);
  return Status::ok();
}

// Dropout: the ratio is an attribute before opset 12, a constant input from 12 on, where a Dropout
// without a true training_mode is the identity (eval-mode exports leave no Dropout at all).
Status convertDropout(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const auto a = g.activation(nodeInput(node, 0));
  if (!a) return g.fail(index, "its input 0 is not computed from the model's input");
  REMAT_RETURN_IF_ERROR(checkUnusedOutputs(g, index, "the mask"));
  double ratio = floatAttribute(node, "ratio", 0.5);
  if (g.opset() >= 12) {
    const Constant* r = g.constant(nodeInput(node, 1));
    const Constant* training = g.constant(nodeInput(node, 2));
    if ((!nodeInput(node, 1).empty() && (r == nullptr || r->values.size() != 1)) ||
        (!nodeInput(node, 2).empty() && (training == nullptr || training->values.size() != 1)))
      return g.fail(index, "its ratio and training_mode are not constant scalars");
    ratio = r != nullptr ? r->values.front() : 0.5;
    if (training == nullptr || training->values.front() == 0) {
      g.alias(node.output(0), *a);
      g.countDropped(node.op_type());
      return Status::ok();
    }
  }
  if (!(ratio >= 0 && ratio < 1)) return g.fail(index, "ratio " + numberText(ratio) + " is not in [0, 1)");
  DataOp op = makeOp(g, index, LayerKind::Dropout, {*a});
  op.layer.dropoutP = ratio;
  const Shape shape = g.activations()[*a].shape;
  appendOp(g, std::move(op), shape);
  return Status::ok();
}

// LayerNormalization (opset 17): over the last axis of [N, F] (axis -1 or 1), Scale and B weights of
// shape [F], its Mean and InvStdDev outputs unused (PyTorch keeps its own, the model counts them).
Status convertLayerNormalization(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const auto a = g.activation(nodeInput(node, 0));
  if (!a) return g.fail(index, "its input 0 is not computed from the model's input");
  const Shape shape = g.activations()[*a].shape;
  const std::int64_t axis = intAttribute(node, "axis", -1);
  // A channels-last [N, H, W, C] tensor (ConvNeXt) is the NCHW activation: its last axis is C.
  const bool channelsLast = g.isChannelsLast(nodeInput(node, 0)) && shape.size() == 4;
  const bool lastAxis = axis == -1 || axis == (channelsLast ? 3 : 1);
  if ((shape.size() != 2 && !channelsLast) || !lastAxis)
    return g.fail(index, "normalizes axis " + std::to_string(axis) + " of a " + shapeToString(shape) +
                             " input; layernorm takes the last axis of [N, F] or of ConvNeXt's channels-last "
                             "[N, H, W, C]");
  if (nodeInput(node, 2).empty())
    return g.fail(index, "has no bias (input 2); layernorm layers have a weight and a bias (nn.LayerNorm's affine)");
  REMAT_RETURN_IF_ERROR(checkUnusedOutputs(g, index, "the saved mean or inverse standard deviation"));
  return appendLayerNorm(g, index, *a, nodeInput(node, 1), nodeInput(node, 2), floatAttribute(node, "epsilon", 1e-5));
}

}  // namespace

Status appendLayerNorm(Graph& g, std::size_t first, std::size_t x, const std::string& scale, const std::string& bias,
                       double epsilon, const std::string& output) {
  const Shape shape = g.activations()[x].shape;  // [N, F], or NCHW normalized over C (channels-last)
  if (shape.size() != 2 && shape.size() != 4)
    return g.fail(first, "normalizes a " + shapeToString(shape) + " input; layernorm takes [N, F]");
  const char* roles[] = {"weight", "bias"};
  const std::string* names[] = {&scale, &bias};
  for (int i = 0; i < 2; ++i) {
    const Weight* w = g.weight(*names[i]);
    if (w == nullptr || w->shape != Shape{shape[1]})
      return g.fail(first, std::string("its ") + roles[i] + " " + quoteText(*names[i]) + " is not a weight of shape [" +
                               std::to_string(shape[1]) + "]");
    g.noteWeight(*w);
  }
  if (!(epsilon >= 0.0 && epsilon < 1.0)) return g.fail(first, "epsilon " + numberText(epsilon) + " is not in [0, 1)");
  DataOp op = makeOp(g, first, LayerKind::LayerNorm, {x});
  op.layer.epsilon = epsilon;
  appendOp(g, std::move(op), shape, output);
  return Status::ok();
}

Result<std::int64_t> symmetricPadding(Graph& graph, std::size_t node, const Shape& input,
                                      const std::vector<std::int64_t>& kernel,
                                      const std::vector<std::int64_t>& stride) {
  auto pads = axisPadding(graph, node, input, kernel, stride);
  if (!pads) return pads.status();
  if ((*pads)[0] != (*pads)[1]) {
    const std::int64_t folded = graph.pendingPad(nodeInput(graph.proto().node(static_cast<int>(node)), 0));
    return graph.fail(node, "pads " + list({(*pads)[0], (*pads)[1], (*pads)[0], (*pads)[1]}) +
                                (folded > 0 ? " (with the Pad before it)" : "") +
                                " are not the same on every side; chain layers pad all sides alike");
  }
  return (*pads)[0];
}

Result<std::array<std::int64_t, 2>> axisPadding(Graph& graph, std::size_t node, const Shape& input,
                                                const std::vector<std::int64_t>& kernel,
                                                const std::vector<std::int64_t>& stride) {
  const onnx::NodeProto& n = graph.proto().node(static_cast<int>(node));
  const std::int64_t folded = graph.pendingPad(nodeInput(n, 0));
  const std::string autoPad = stringAttribute(n, "auto_pad", "NOTSET");
  std::vector<std::int64_t> pads = intsAttribute(n, "pads").value_or(std::vector<std::int64_t>(4, 0));
  if (pads.size() != 4) return graph.fail(node, "pads " + list(pads) + " is not 2-D");
  if (autoPad == "VALID") {
    pads.assign(4, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int axis = 0; axis < 2; ++axis) {
      // ONNX's SAME: the output is ceil(in / stride), padded evenly, the odd one at the end (UPPER).
      const std::int64_t in = input[2 + axis], s = stride[axis];
      const std::int64_t total = std::max<std::int64_t>((in + s - 1) / s * s - s + kernel[axis] - in, 0);
      const std::int64_t small = total / 2;
      pads[axis] = autoPad == "SAME_UPPER" ? small : total - small;
      pads[axis + 2] = total - pads[axis];
    }
  } else if (autoPad != "NOTSET") {
    return graph.fail(node, "auto_pad " + quoteText(autoPad, 40) + " is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  }
  for (auto& p : pads) {
    if (p < 0 || p > kMaxAttribute) return graph.fail(node, "pads " + list(pads) + " are out of range");
    p += folded;
  }
  // ONNX's pads are [height begin, width begin, height end, width end].
  if (pads[0] != pads[2] || pads[1] != pads[3])
    return graph.fail(node, "pads " + list(pads) + (folded > 0 ? " (with the Pad before it)" : "") +
                                " differ between the start and the end of an axis; chain layers pad both ends of an "
                                "axis alike");
  if (folded > 0) graph.countFolded("Pad");
  return std::array<std::int64_t, 2>{pads[0], pads[1]};
}

// An ONNX op that a pointwise kind's description maps onto one to one (Sigmoid, Tanh, HardSwish,
// HardSigmoid, Gelu; Relu as before).
bool isPointwiseOnnxOp(const std::string& opType) {
  const OperatorInfo* info = findOnnxOperator(opType);
  return info != nullptr && info->family == OperatorFamily::Pointwise;
}

bool isLayerOp(const std::string& opType) {
  return opType == "Conv" || opType == "MaxPool" || opType == "AveragePool" || opType == "GlobalAveragePool" ||
         opType == "BatchNormalization" || opType == "Gemm" || opType == "MatMul" || opType == "Relu" ||
         opType == "Clip" || opType == "Dropout" || opType == "LayerNormalization" || isPointwiseOnnxOp(opType);
}

Status convertLayerNode(Graph& graph, std::size_t node) {
  const std::string& op = graph.proto().node(static_cast<int>(node)).op_type();
  if (op == "Conv") return convertConv(graph, node);
  if (op == "MaxPool" || op == "AveragePool") return convertPool(graph, node);
  if (op == "GlobalAveragePool") return convertGlobalAveragePool(graph, node);
  if (op == "BatchNormalization") return convertBatchNorm(graph, node);
  if (op == "Gemm" || op == "MatMul") return convertLinear(graph, node);
  if (op == "Clip" || isPointwiseOnnxOp(op)) return convertActivation(graph, node);
  if (op == "Dropout") return convertDropout(graph, node);
  if (op == "LayerNormalization") return convertLayerNormalization(graph, node);
  return graph.fail(node, "is not a layer op");
}

}  // namespace remat::onnx_import
