// The structural validation of a graph before any stage reads it (issue 26: hostile models that are
// well-formed protobuf). Every node, dead or alive, of every opset: its inputs name a graph input,
// an initializer or an earlier node's output; each name has one producer; each operator has the
// number of inputs and outputs it allows, its attributes once each and of their type, no subgraph;
// weights of a type the operator takes. Tensor data and declared shapes: onnx_tensors.cpp.
#include <climits>
#include <set>

#include "onnx_graph.hpp"
#include "remat/base/text.hpp"

namespace remat::onnx_import {
namespace {

// How many inputs and outputs an operator takes, and which of them may be empty (omitted).
struct Arity {
  int minInputs = 1, maxInputs = 1, minOutputs = 1, maxOutputs = 1;
  unsigned optionalInputs = 0, optionalOutputs = 0;  // bit i: position i may be ""
};

constexpr unsigned bit(int i) { return 1u << i; }

// The union of the forms of opsets 9 to 20 where they agree, the opset's own where they differ
// (attributes that became inputs, outputs that were dropped).
std::optional<Arity> arityOf(const std::string& op, std::int64_t opset) {
  if (op == "Conv" || op == "Gemm") return Arity{2, 3, 1, 1, bit(2), 0};
  if (op == "MaxPool") return Arity{1, 1, 1, 2, 0, bit(1)};
  if (op == "AveragePool" || op == "GlobalAveragePool" || op == "Relu" || op == "Flatten" || op == "Identity" ||
      op == "Shape" || op == "Cast" || op == "Sigmoid" || op == "Tanh" || op == "HardSigmoid" || op == "HardSwish" ||
      op == "Gelu" || op == "Erf" || op == "Transpose" || op == "Sqrt")
    return Arity{};
  // X, Scale, B (optional); Y, Mean and InvStdDev (both optional).
  if (op == "LayerNormalization") return Arity{2, 3, 1, 3, bit(2), bit(1) | bit(2)};
  if (op == "Pow") return Arity{2, 2, 1, 1, 0, 0};
  if (op == "BatchNormalization") return Arity{5, 5, 1, opset < 14 ? 5 : 3, 0, bit(1) | bit(2) | bit(3) | bit(4)};
  if (op == "MatMul" || op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Gather" || op == "Reshape")
    return Arity{2, 2, 1, 1, 0, 0};
  if (op == "Clip") return opset < 11 ? Arity{} : Arity{1, 3, 1, 1, bit(1) | bit(2), 0};
  if (op == "Dropout") return opset < 12 ? Arity{1, 1, 1, 2, 0, bit(1)} : Arity{1, 3, 1, 2, bit(1) | bit(2), bit(1)};
  if (op == "Concat") return Arity{1, INT_MAX, 1, 1, 0, 0};
  if (op == "Pad")
    return opset < 11 ? Arity{} : opset < 18 ? Arity{2, 3, 1, 1, bit(2), 0} : Arity{2, 4, 1, 1, bit(2) | bit(3), 0};
  if (op == "ReduceMean") return opset < 18 ? Arity{} : Arity{1, 2, 1, 1, bit(1), 0};
  if (op == "Constant") return Arity{0, 0, 1, 1, 0, 0};
  if (op == "Unsqueeze") return opset < 13 ? Arity{} : Arity{2, 2, 1, 1, 0, 0};
  if (op == "Squeeze") return opset < 13 ? Arity{} : Arity{1, 2, 1, 1, bit(1), 0};
  if (op == "Slice") return opset < 10 ? Arity{} : Arity{3, 5, 1, 1, bit(3) | bit(4), 0};
  return std::nullopt;
}

using AttrType = onnx::AttributeProto::AttributeType;

// Every attribute each operator has in opsets 9 to 20, with its type.
const std::map<std::string, std::map<std::string, AttrType>>& attributeTable() {
  using A = onnx::AttributeProto;
  static const auto* table = [] {
    const std::map<std::string, AttrType> conv = {{"auto_pad", A::STRING}, {"dilations", A::INTS},
                                                  {"group", A::INT},       {"kernel_shape", A::INTS},
                                                  {"pads", A::INTS},       {"strides", A::INTS}};
    const std::map<std::string, AttrType> pool = {
        {"auto_pad", A::STRING},   {"ceil_mode", A::INT}, {"count_include_pad", A::INT}, {"dilations", A::INTS},
        {"kernel_shape", A::INTS}, {"pads", A::INTS},     {"storage_order", A::INT},     {"strides", A::INTS}};
    const std::map<std::string, AttrType> none, axis = {{"axis", A::INT}}, axes = {{"axes", A::INTS}};
    return new std::map<std::string, std::map<std::string, AttrType>>{
        {"Conv", conv},
        {"MaxPool", pool},
        {"AveragePool", pool},
        {"BatchNormalization",
         {{"epsilon", A::FLOAT}, {"momentum", A::FLOAT}, {"training_mode", A::INT}, {"spatial", A::INT}}},
        {"Gemm", {{"alpha", A::FLOAT}, {"beta", A::FLOAT}, {"transA", A::INT}, {"transB", A::INT}}},
        {"Clip", {{"min", A::FLOAT}, {"max", A::FLOAT}}},
        {"Dropout", {{"ratio", A::FLOAT}, {"seed", A::INT}}},
        {"Concat", axis},
        {"Flatten", axis},
        {"Gather", axis},
        {"Reshape", {{"allowzero", A::INT}}},
        {"Pad", {{"mode", A::STRING}, {"pads", A::INTS}, {"value", A::FLOAT}}},
        {"ReduceMean", {{"axes", A::INTS}, {"keepdims", A::INT}, {"noop_with_empty_axes", A::INT}}},
        {"Constant",
         {{"value", A::TENSOR},
          {"value_float", A::FLOAT},
          {"value_int", A::INT},
          {"value_floats", A::FLOATS},
          {"value_ints", A::INTS},
          {"value_string", A::STRING},
          {"value_strings", A::STRINGS},
          {"sparse_value", A::SPARSE_TENSOR}}},
        {"Shape", {{"start", A::INT}, {"end", A::INT}}},
        {"Unsqueeze", axes},
        {"Squeeze", axes},
        {"Slice", {{"starts", A::INTS}, {"ends", A::INTS}, {"axes", A::INTS}}},
        {"Transpose", {{"perm", A::INTS}}},
        {"Cast", {{"to", A::INT}, {"saturate", A::INT}}},
        {"Relu", none},
        {"Sigmoid", none},
        {"Tanh", none},
        {"HardSwish", none},
        {"HardSigmoid", {{"alpha", A::FLOAT}, {"beta", A::FLOAT}}},
        {"Gelu", {{"approximate", A::STRING}}},
        {"Erf", none},
        {"LayerNormalization", {{"axis", A::INT}, {"epsilon", A::FLOAT}, {"stash_type", A::INT}}},
        {"Pow", none},
        {"Sqrt", none},
        {"GlobalAveragePool", none},
        {"MatMul", none},
        {"Add", none},
        {"Sub", none},
        {"Mul", none},
        {"Div", none},
        {"Identity", none}};
  }();
  return *table;
}

const char* attributeTypeName(int type) {
  switch (type) {
    case onnx::AttributeProto::FLOAT: return "FLOAT";
    case onnx::AttributeProto::INT: return "INT";
    case onnx::AttributeProto::STRING: return "STRING";
    case onnx::AttributeProto::TENSOR: return "TENSOR";
    case onnx::AttributeProto::GRAPH: return "GRAPH";
    case onnx::AttributeProto::FLOATS: return "FLOATS";
    case onnx::AttributeProto::INTS: return "INTS";
    case onnx::AttributeProto::STRINGS: return "STRINGS";
    case onnx::AttributeProto::TENSORS: return "TENSORS";
    case onnx::AttributeProto::GRAPHS: return "GRAPHS";
    case onnx::AttributeProto::SPARSE_TENSOR: return "SPARSE_TENSOR";
    default: return "UNDEFINED";
  }
}

// Each attribute once, known to the operator, of its type; no subgraph anywhere (none of the
// operators the importer reads has one, and a graph attribute is where nesting hides).
Status checkAttributes(const Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  std::set<std::string> seen;
  const auto table = attributeTable().find(node.op_type());
  const bool known = readsOperator(node);
  for (const auto& a : node.attribute()) {
    const std::string name = quoteText(a.name(), 40);
    if (!seen.insert(a.name()).second) return g.fail(index, "has the attribute " + name + " twice");
    if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS || a.has_g() ||
        a.graphs_size() > 0)
      return g.fail(index, "has a graph attribute (" + name + "); " + opTypeText(node.op_type()) + " takes none");
    if (!known) continue;
    const auto expected = table->second.find(a.name());
    if (expected == table->second.end())
      return g.fail(index, "has the attribute " + name + ", which " + opTypeText(node.op_type()) + " does not take");
    if (a.type() != expected->second)
      return g.fail(index, "its attribute " + name + " is of type " + attributeTypeName(a.type()) + ", not " +
                               attributeTypeName(expected->second));
  }
  if (node.op_type() == "Constant" && known && node.attribute_size() != 1)
    return g.fail(index,
                  "a Constant has exactly one value attribute, this one has " + std::to_string(node.attribute_size()));
  return Status::ok();
}

Status checkArity(const Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  if (!readsOperator(node)) return Status::ok();
  const Arity arity = *arityOf(node.op_type(), g.opset());
  const std::string op = opTypeText(node.op_type());
  auto range = [](int low, int high) {
    return low == high       ? std::to_string(low)
           : high == INT_MAX ? std::to_string(low) + " or more"
                             : std::to_string(low) + " to " + std::to_string(high);
  };
  if (node.input_size() < arity.minInputs || node.input_size() > arity.maxInputs)
    return g.fail(index, "has " + std::to_string(node.input_size()) + " inputs; " + op + " (opset " +
                             std::to_string(g.opset()) + ") takes " + range(arity.minInputs, arity.maxInputs));
  if (node.output_size() < arity.minOutputs || node.output_size() > arity.maxOutputs)
    return g.fail(index, "has " + std::to_string(node.output_size()) + " outputs; " + op + " (opset " +
                             std::to_string(g.opset()) + ") has " + range(arity.minOutputs, arity.maxOutputs));
  for (int i = 0; i < node.input_size(); ++i)
    if (node.input(i).empty() && (i >= 32 || !(arity.optionalInputs & bit(i))))
      return g.fail(index, "its input " + std::to_string(i) + " is empty; " + op + " needs it");
  for (int i = 0; i < node.output_size(); ++i)
    if (node.output(i).empty() && (i >= 32 || !(arity.optionalOutputs & bit(i))))
      return g.fail(index, "its output " + std::to_string(i) + " has no name");
  return Status::ok();
}

// What defines a name: "graph input", "initializer", "node 7 ('/a/Conv', Conv)".
class Names {
 public:
  explicit Names(const Graph& g) : g_(g) {}

  Status addInterface() {
    const auto& graph = g_.proto();
    std::set<std::string> initializers;
    for (const auto& t : graph.initializer()) {
      if (t.name().empty()) return Status::invalid(g_.source() + ": an initializer has no name");
      if (!initializers.insert(t.name()).second)
        return Status::invalid(g_.source() + ": the initializer " + quoteText(t.name()) + " is listed twice");
      defined_[t.name()] = "the initializer " + quoteText(t.name());
    }
    std::set<std::string> inputs;
    for (const auto& i : graph.input()) {
      if (i.name().empty()) return Status::invalid(g_.source() + ": a graph input has no name");
      if (!inputs.insert(i.name()).second)
        return Status::invalid(g_.source() + ": the graph input " + quoteText(i.name()) + " is listed twice");
      // An input with an initializer of its name (IR < 4 lists weights as inputs) is that weight.
      if (!initializers.count(i.name())) defined_[i.name()] = "the graph input " + quoteText(i.name());
    }
    return Status::ok();
  }

  Status addNode(std::size_t index, std::map<std::string, std::size_t>& producers) {
    const onnx::NodeProto& node = g_.proto().node(static_cast<int>(index));
    for (const auto& input : node.input()) {
      if (input.empty() || defined_.count(input)) continue;
      std::string later;
      for (int j = static_cast<int>(index) + 1; j < g_.proto().node_size() && later.empty(); ++j)
        for (const auto& out : g_.proto().node(j).output())
          if (out == input) later = " (node " + std::to_string(j) + " writes it later: the nodes are not in order)";
      return g_.fail(
          index, "reads " + quoteText(input) + ", which no graph input, initializer or earlier node writes" + later);
    }
    std::set<std::string> own;
    for (const auto& output : node.output()) {
      if (output.empty()) continue;
      if (!own.insert(output).second) return g_.fail(index, "names two of its outputs " + quoteText(output));
      auto it = defined_.find(output);
      if (it != defined_.end())
        return g_.fail(index, "writes " + quoteText(output) + ", which is already " + it->second);
      defined_[output] = "an output of " + g_.where(index).substr(g_.source().size() + 2);
      producers[output] = index;
    }
    return Status::ok();
  }

  bool has(const std::string& name) const { return defined_.count(name) > 0; }

 private:
  const Graph& g_;
  std::map<std::string, std::string> defined_;  // name -> what defines it, for messages
};

Status checkGraphOutputs(const Graph& g, const Names& names) {
  std::set<std::string> seen;
  for (const auto& o : g.proto().output()) {
    if (!names.has(o.name()))
      return Status::invalid(g.source() + ": the graph output " + quoteText(o.name()) +
                             " is no graph input, initializer or node output");
    if (!seen.insert(o.name()).second)
      return Status::invalid(g.source() + ": the graph output " + quoteText(o.name()) + " is listed twice");
  }
  return Status::ok();
}

}  // namespace

bool readsOperator(const onnx::NodeProto& node) {
  return (node.domain().empty() || node.domain() == "ai.onnx") && attributeTable().count(node.op_type()) > 0;
}

// The element types of the named tensors whose type the file says: initializers, graph inputs,
// Constant nodes' values.
std::map<std::string, std::int32_t> declaredElementTypes(const onnx::GraphProto& graph) {
  std::map<std::string, std::int32_t> types;
  for (const auto& i : graph.input())
    if (i.type().has_tensor_type()) types[i.name()] = i.type().tensor_type().elem_type();
  for (const auto& t : graph.initializer()) types[t.name()] = t.data_type();
  for (const auto& node : graph.node()) {
    if (node.op_type() != "Constant" || node.output_size() != 1 || node.attribute_size() != 1) continue;
    const auto& a = node.attribute(0);
    types[node.output(0)] = a.name() == "value"                                       ? a.t().data_type()
                            : a.name() == "value_float" || a.name() == "value_floats" ? onnx::TensorProto::FLOAT
                            : a.name() == "value_int" || a.name() == "value_ints"     ? onnx::TensorProto::INT64
                                                                                      : onnx::TensorProto::STRING;
  }
  return types;
}

Status Graph::validateStructure() {
  Names names(*this);
  REMAT_RETURN_IF_ERROR(names.addInterface());
  for (std::size_t i = 0; i < static_cast<std::size_t>(graph_.node_size()); ++i) {
    REMAT_RETURN_IF_ERROR(checkAttributes(*this, i));
    REMAT_RETURN_IF_ERROR(checkArity(*this, i));
    REMAT_RETURN_IF_ERROR(names.addNode(i, producers_));
  }
  REMAT_RETURN_IF_ERROR(checkGraphOutputs(*this, names));
  REMAT_RETURN_IF_ERROR(validateTensors(*this));
  return checkWeightTypes(*this, declaredElementTypes(graph_));
}

}  // namespace remat::onnx_import
