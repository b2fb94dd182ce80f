// The model's interface: its opset, which graph input is the data (the others, and the
// initializers, are weights), its one output, the batch; and the helpers every stage uses.
#include "onnx_graph.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "remat/base/text.hpp"

namespace remat::onnx_import {
namespace {

// Ops whose every input carries data onward; the others carry it only through input 0, and Shape
// turns it into a constant.
bool allInputsAreData(const std::string& opType) {
  return opType == "Add" || opType == "Concat" || opType == "Sum" || opType == "Mul" || opType == "Sub" ||
         opType == "Div";
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::optional<DType> dtypeOf(std::int32_t elemType) {
  switch (elemType) {
    case onnx::TensorProto::FLOAT: return DType::Float32;
    case onnx::TensorProto::FLOAT16: return DType::Float16;
    case onnx::TensorProto::BFLOAT16: return DType::BFloat16;
    default: return std::nullopt;
  }
}

}  // namespace

std::string quotedList(const std::vector<std::string>& names, std::size_t shown) {
  std::string text;
  for (std::size_t i = 0; i < names.size() && i < shown; ++i) text += (i ? ", " : "") + quoteText(names[i], 40);
  if (names.size() > shown) text += " and " + std::to_string(names.size() - shown) + " more";
  return text;
}

const onnx::AttributeProto* findAttribute(const onnx::NodeProto& node, const char* name) {
  for (const auto& attribute : node.attribute())
    if (attribute.name() == name) return &attribute;
  return nullptr;
}

std::int64_t intAttribute(const onnx::NodeProto& node, const char* name, std::int64_t fallback) {
  const onnx::AttributeProto* a = findAttribute(node, name);
  return a != nullptr ? a->i() : fallback;
}

double floatAttribute(const onnx::NodeProto& node, const char* name, double fallback) {
  const onnx::AttributeProto* a = findAttribute(node, name);
  return a != nullptr ? static_cast<double>(a->f()) : fallback;
}

std::string stringAttribute(const onnx::NodeProto& node, const char* name, const std::string& fallback) {
  const onnx::AttributeProto* a = findAttribute(node, name);
  return a != nullptr ? a->s() : fallback;
}

std::optional<std::vector<std::int64_t>> intsAttribute(const onnx::NodeProto& node, const char* name) {
  const onnx::AttributeProto* a = findAttribute(node, name);
  if (a == nullptr) return std::nullopt;
  return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
}

const std::string& nodeInput(const onnx::NodeProto& node, int i) {
  static const std::string kNoInput;
  return i < node.input_size() ? node.input(i) : kNoInput;
}

Shape tensorDims(const onnx::TensorProto& tensor) { return Shape(tensor.dims().begin(), tensor.dims().end()); }

// Torch scopes: "/features/features.1/conv/conv.0/conv.0.0/Conv". Each segment names a submodule
// of the one before, either as a suffix ("conv") or as the parent's own name plus one ("conv.0"
// under "conv"); the last segment is the op.
namespace {

std::string scopedNameOf(const onnx::NodeProto& node, std::size_t index) {
  const std::string& name = node.name();
  if (name.empty()) return lower(node.op_type()) + "_" + std::to_string(index);
  if (name.front() != '/') return name;
  std::vector<std::string> segments;
  std::size_t start = 1;
  while (start <= name.size()) {
    const std::size_t slash = std::min(name.find('/', start), name.size());
    segments.push_back(name.substr(start, slash - start));
    start = slash + 1;
  }
  const std::string op = lower(segments.back());
  segments.pop_back();
  std::string path, previous;
  for (const std::string& segment : segments) {
    if (!previous.empty() && segment.rfind(previous + ".", 0) == 0)
      path += segment.substr(previous.size());
    else
      path += (path.empty() ? "" : ".") + segment;
    previous = segment;
  }
  if (path.empty()) return op;
  // A merge is no module of its own: name it after the module whose forward() calls it.
  const bool merge =
      node.op_type() == "Add" || node.op_type() == "Concat" || node.op_type() == "Sum" || node.op_type() == "Slice";
  return merge ? path + "." + op : path;
}

}  // namespace

// A name a hostile file gives lands in tables, timelines and every later message: printable and
// at most kMaxLayerNameChars characters, like quoteText's quote without its quotes.
std::string layerNameOf(const onnx::NodeProto& node, std::size_t index) {
  const std::string quoted = quoteText(scopedNameOf(node, index), kMaxLayerNameChars);
  return quoted.substr(1, quoted.size() - 2);
}

std::string opTypeText(const std::string& opType) {
  const bool plain =
      !opType.empty() && opType.size() <= 40 &&
      std::all_of(opType.begin(), opType.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
  return plain ? opType : quoteText(opType, 40);
}

std::string Graph::where(std::size_t node) const {
  const onnx::NodeProto& n = graph_.node(static_cast<int>(node));
  return source_ + ": node " + std::to_string(node) + " (" + quoteText(n.name()) + ", " + opTypeText(n.op_type()) + ")";
}

Status Graph::fail(std::size_t node, const std::string& message) const {
  return Status::invalid(where(node) + ": " + message);
}

std::optional<std::size_t> Graph::activation(const std::string& tensor) const {
  if (tensor.empty()) return std::nullopt;
  auto it = activations_.find(tensor);
  if (it == activations_.end()) return std::nullopt;
  return it->second;
}

const Weight* Graph::weight(const std::string& tensor) const {
  if (tensor.empty()) return nullptr;
  auto it = weights_.find(tensor);
  if (it != weights_.end()) return &it->second;
  // A weight an exporter wrote as a Constant node (or computed in plumbing) has the value's shape.
  auto c = constants_.find(tensor);
  if (c == constants_.end()) return nullptr;
  return &(weights_[tensor] = Weight{c->second.dims, nullptr});
}

std::size_t Graph::addActivation(const std::string& tensor, Shape shape, std::size_t producer) {
  Activation a;
  a.tensor = tensor;
  a.shape = std::move(shape);
  a.producer = producer;
  activationList_.push_back(std::move(a));
  activations_[tensor] = activationList_.size() - 1;
  return activationList_.size() - 1;
}

DataOp makeOp(const Graph& graph, std::size_t node, LayerKind kind, std::vector<std::size_t> inputs) {
  const onnx::NodeProto& n = graph.proto().node(static_cast<int>(node));
  DataOp op;
  op.node = node;
  op.nodeName = n.name();
  op.opType = n.op_type();
  op.name = layerNameOf(n, node);
  op.layer.kind = kind;
  op.inputs = std::move(inputs);
  return op;
}

std::size_t appendOp(Graph& graph, DataOp op, Shape shape, const std::string& tensor) {
  const std::string& name = tensor.empty() ? graph.proto().node(static_cast<int>(op.node)).output(0) : tensor;
  op.layer.name = op.name;
  op.output = graph.addActivation(name, std::move(shape), graph.ops().size());
  graph.ops().push_back(std::move(op));
  return graph.ops().back().output;
}

Status Graph::readOpset() {
  bool found = false;
  for (const auto& entry : model_.opset_import()) {
    if (entry.domain().empty() || entry.domain() == "ai.onnx") {
      opset_ = entry.version();
      found = true;
    }
  }
  if (!found) return Status::invalid(source_ + ": the model imports no ai.onnx opset");
  if (opset_ < 9)
    return Status::invalid(source_ + ": opset " + std::to_string(opset_) +
                           " is older than 9, the oldest the importer reads; export with opset_version >= 9");
  return Status::ok();
}

// Non-initializer graph inputs of rank >= 2 that reach a graph output through data positions. A
// weight fed through Identity reaches a Conv's weight input, not an output; a bias vector has rank 1.
// ConvNeXt's layer_scale without its values (export_params=False): a [C, 1, 1] graph input that only
// Mul nodes read is a parameter used directly as an operand, never the data (NCHW or [N, F]).
namespace {
bool isLayerScaleInput(const onnx::GraphProto& graph, const onnx::ValueInfoProto& input) {
  const auto& type = input.type();
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return false;
  const auto& dims = type.tensor_type().shape().dim();
  if (dims.size() != 3 || dims[1].dim_value() != 1 || dims[2].dim_value() != 1) return false;
  bool read = false;
  for (const auto& node : graph.node())
    for (const auto& name : node.input())
      if (name == input.name()) {
        if (node.op_type() != "Mul") return false;
        read = true;
      }
  return read;
}
}  // namespace

std::vector<std::string> Graph::dataInputCandidates() const {
  std::set<std::string> initializers;
  for (const auto& t : graph_.initializer()) initializers.insert(t.name());
  std::set<std::string> outputs;
  for (const auto& o : graph_.output()) outputs.insert(o.name());
  std::vector<std::string> candidates;
  for (const auto& input : graph_.input()) {
    if (initializers.count(input.name())) continue;
    const auto& type = input.type();
    if (type.has_tensor_type() && type.tensor_type().has_shape() && type.tensor_type().shape().dim_size() < 2) continue;
    if (isLayerScaleInput(graph_, input)) continue;
    std::set<std::string> reached = {input.name()};
    for (const auto& node : graph_.node()) {
      if (node.op_type() == "Shape" || node.op_type() == "Size") continue;
      const int positions = allInputsAreData(node.op_type()) ? node.input_size() : std::min(node.input_size(), 1);
      bool hit = false;
      for (int i = 0; i < positions && !hit; ++i) hit = reached.count(node.input(i)) > 0;
      if (hit)
        for (const auto& out : node.output()) reached.insert(out);
    }
    bool reachesOutput = false;
    for (const auto& name : outputs) reachesOutput = reachesOutput || reached.count(name) > 0;
    if (reachesOutput) candidates.push_back(input.name());
  }
  return candidates;
}

Status Graph::readBatch(const onnx::ValueInfoProto& input, Shape& shape, OnnxImportSummary& summary) const {
  const std::string what = source_ + ": input " + quoteText(input.name());
  const auto& dims = input.type().tensor_type().shape().dim();
  for (int i = 0; i < dims.size(); ++i) {
    const auto& d = dims[i];
    const bool fixed = d.has_dim_value() && d.dim_value() > 0;
    const std::string param = d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : "(unnamed)";
    // The chain's own limit on a dimension, which keeps the shape arithmetic from overflowing.
    const std::int64_t size = i == 0 && options_.batch > 0 ? options_.batch : d.dim_value();
    if ((fixed || i == 0) && size > kMaxIntegerField)
      return Status::invalid(what + ": dimension " + std::to_string(i) + " is " + std::to_string(size) +
                             ", more than " + std::to_string(kMaxIntegerField));
    if (i == 0) {
      if (!fixed && options_.batch <= 0)
        return Status::invalid(what + ": the batch dimension is symbolic (" + quoteText(param, 40) +
                               "): give the batch size (--batch N)");
      shape.push_back(options_.batch > 0 ? options_.batch : d.dim_value());
      summary.batch =
          std::to_string(shape[0]) + (options_.batch <= 0 ? " (fixed in the model)"
                                      : fixed ? " (--batch; the model fixes " + std::to_string(d.dim_value()) + ")"
                                              : " (--batch, for the symbolic dimension " + quoteText(param, 40) + ")");
      continue;
    }
    if (!fixed)
      return Status::invalid(what + ": dimension " + std::to_string(i) + " (" + quoteText(param, 40) +
                             ") is symbolic; only the batch dimension may be (export with a fixed input size)");
    shape.push_back(d.dim_value());
  }
  return Status::ok();
}

Status Graph::readDataInput(const std::vector<std::string>& candidates, OnnxImportSummary& summary) {
  if (candidates.empty())
    return Status::invalid(source_ + ": no data input: no graph input of rank 2 or more reaches the output");
  if (candidates.size() > 1)
    return Status::invalid(source_ + ": more than one data input (" + quotedList(candidates) +
                           "); a chain follows one input to one output (name the data input with --input NAME)");
  const onnx::ValueInfoProto* input = nullptr;
  for (const auto& i : graph_.input())
    if (i.name() == candidates.front()) input = &i;
  const std::string what = source_ + ": input " + quoteText(input->name());
  if (!input->type().has_tensor_type() || !input->type().tensor_type().has_shape())
    return Status::invalid(what + " has no tensor shape");
  const auto dtype = dtypeOf(input->type().tensor_type().elem_type());
  if (!dtype) return Status::invalid(what + " is not float32, float16 or bfloat16");
  dtype_ = *dtype;
  Shape shape;
  REMAT_RETURN_IF_ERROR(readBatch(*input, shape, summary));
  const auto& dims = input->type().tensor_type().shape().dim();
  exportBatch_ = !dims.empty() && dims[0].has_dim_value() && dims[0].dim_value() > 0 ? dims[0].dim_value() : 0;
  addActivation(input->name(), std::move(shape), kNone);
  for (const auto& i : graph_.input())
    if (i.name() != input->name() && i.type().has_tensor_type()) {
      Weight w;
      for (const auto& d : i.type().tensor_type().shape().dim()) w.shape.push_back(d.dim_value());
      weights_[i.name()] = w;
    }
  return Status::ok();
}

// --input NAME: a graph input that is not a weight with values, and one that reaches the output
// through data positions (a weight input named by mistake does not).
Status Graph::checkNamedInput() const {
  const std::string what = source_ + ": --input " + quoteText(options_.input, 80);
  std::set<std::string> initializers;
  for (const auto& t : graph_.initializer()) initializers.insert(t.name());
  std::vector<std::string> inputs;
  bool found = false;
  for (const auto& i : graph_.input()) {
    if (initializers.count(i.name())) continue;
    inputs.push_back(i.name());
    found = found || i.name() == options_.input;
  }
  if (!found)
    return Status::invalid(what + ": the graph has no input of that name (its inputs: " + quotedList(inputs) + ")");
  const std::vector<std::string> candidates = dataInputCandidates();
  if (std::find(candidates.begin(), candidates.end(), options_.input) == candidates.end())
    return Status::invalid(
        what + ": that input does not reach the output through the data of an op (a weight?); " +
        (candidates.empty() ? std::string("no input does") : "the data inputs: " + quotedList(candidates)));
  return Status::ok();
}

Status Graph::readOutput() {
  std::vector<std::string> names;
  for (const auto& o : graph_.output()) names.push_back(o.name());
  if (names.empty()) return Status::invalid(source_ + ": the graph has no output");
  if (names.size() > 1)
    return Status::invalid(source_ + ": more than one output (" + quotedList(names) +
                           "); a chain follows one input to one output (torchvision's GoogLeNet and Inception-v3 "
                           "return their auxiliary classifiers' outputs in training mode: build them with "
                           "aux_logits=False)");
  output_ = names.front();
  return Status::ok();
}

Status Graph::readInterface(OnnxImportSummary& summary) {
  REMAT_RETURN_IF_ERROR(readHeader(summary));
  if (options_.input.empty()) return readDataInput(dataInputCandidates(), summary);
  REMAT_RETURN_IF_ERROR(checkNamedInput());
  return readDataInput({options_.input}, summary);
}

Status Graph::readHeader(OnnxImportSummary& summary) {
  REMAT_RETURN_IF_ERROR(readOpset());
  summary.opset = opset_;
  REMAT_RETURN_IF_ERROR(validateStructure());
  REMAT_RETURN_IF_ERROR(runOnnxChecker(*this, model_));
  summary.nodes = static_cast<std::size_t>(graph_.node_size());
  // The producer is the file's text like any name: quoted, bounded, printable.
  if (!model_.producer_name().empty() || !model_.producer_version().empty())
    summary.producer = quoteText(
        model_.producer_name() + (model_.producer_version().empty() ? "" : " ") + model_.producer_version(), 80);
  for (const auto& t : graph_.initializer()) weights_[t.name()] = Weight{tensorDims(t), &t};
  for (const auto& node : graph_.node())
    for (const auto& input : node.input()) ++readers_[input];
  for (const auto& output : graph_.output()) ++readers_[output.name()];
  return readOutput();
}

}  // namespace remat::onnx_import
