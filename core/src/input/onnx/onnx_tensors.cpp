// The validation of what a file says about tensors (issue 26): initializers and Constant values of
// a number type with exactly the data their dims need, declared shapes of a sane rank and no
// negative dimension, weights of a type the reading operator takes, ONNX's own checker on every
// node of a known opset, and (after the walk) the declared outputs and value_info against the
// importer's inference.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>

#include <cstring>

#include "onnx_graph.hpp"
#include "remat/base/text.hpp"

namespace remat::onnx_import {
namespace {

using T = onnx::TensorProto;

// More dimensions than any tensor of a CNN has; keeps every shape in a message short.
constexpr int kMaxRank = 16;

std::string typeName(std::int32_t type) {
  const std::string name = T::DataType_IsValid(type) ? T::DataType_Name(static_cast<T::DataType>(type)) : "";
  return name.empty() ? "type " + std::to_string(type) : name;
}

// Bytes per element of the number types; 0 for the others (strings, undefined, unknown).
std::size_t elementBytes(std::int32_t type) {
  switch (type) {
    case T::FLOAT:
    case T::INT32:
    case T::UINT32: return 4;
    case T::DOUBLE:
    case T::INT64:
    case T::UINT64: return 8;
    case T::UINT8:
    case T::INT8:
    case T::BOOL: return 1;
    case T::FLOAT16:
    case T::BFLOAT16:
    case T::INT16:
    case T::UINT16: return 2;
    default: return 0;
  }
}

// The typed field a type keeps its values in, when not raw.
int typedValues(const T& t) {
  switch (t.data_type()) {
    case T::FLOAT: return t.float_data_size();
    case T::DOUBLE: return t.double_data_size();
    case T::INT64: return t.int64_data_size();
    case T::UINT32:
    case T::UINT64: return t.uint64_data_size();
    default: return t.int32_data_size();
  }
}

// `what` is "the initializer 'w'" or "the value of the Constant".
Status checkTensor(const T& t, const std::string& what) {
  if (t.dims_size() > kMaxRank)
    return Status::invalid(what + " has " + std::to_string(t.dims_size()) + " dimensions; the importer reads at most " +
                           std::to_string(kMaxRank));
  const std::size_t bytes = elementBytes(t.data_type());
  if (bytes == 0) return Status::invalid(what + " is " + typeName(t.data_type()) + ", not a number type");
  std::uint64_t count = 1;
  for (auto d : t.dims())
    if (d < 0 || d > kMaxIntegerField || __builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count))
      return Status::invalid(what + " has the dims " + shapeToString(tensorDims(t)) + ", not a tensor's");
  if (t.data_location() == T::EXTERNAL) return Status::ok();  // never read (docs/import.md)
  const std::string need = "its dims " + shapeToString(tensorDims(t)) + " need " + std::to_string(count) + " " +
                           typeName(t.data_type()) + " values";
  if (t.has_raw_data()) {
    std::uint64_t expected = 0;
    if (__builtin_mul_overflow(count, bytes, &expected) || t.raw_data().size() != expected)
      return Status::invalid(what + " holds " + std::to_string(t.raw_data().size()) + " bytes of raw data; " + need +
                             " (" + std::to_string(expected) + " bytes)");
    return Status::ok();
  }
  if (static_cast<std::uint64_t>(typedValues(t)) != count)
    return Status::invalid(
        what + (typedValues(t) == 0 ? " has no data" : " holds " + std::to_string(typedValues(t)) + " values") + "; " +
        need);
  return Status::ok();
}

// A declared type (graph input, output, value_info): a known element type, a sane rank, no
// negative dimension.
Status checkDeclared(const onnx::ValueInfoProto& info, const std::string& what) {
  if (!info.type().has_tensor_type()) return Status::ok();
  const auto& tensor = info.type().tensor_type();
  if (tensor.elem_type() != 0 && !T::DataType_IsValid(tensor.elem_type()))
    return Status::invalid(what + " is declared " + typeName(tensor.elem_type()) + ", no ONNX type");
  if (!tensor.has_shape()) return Status::ok();
  if (tensor.shape().dim_size() > kMaxRank)
    return Status::invalid(what + " is declared with " + std::to_string(tensor.shape().dim_size()) +
                           " dimensions; the importer reads at most " + std::to_string(kMaxRank));
  for (const auto& d : tensor.shape().dim())
    if (d.has_dim_value() && (d.dim_value() < 0 || d.dim_value() > kMaxIntegerField))
      return Status::invalid(what + " is declared with the dimension " + std::to_string(d.dim_value()) +
                             (d.dim_value() < 0 ? "" : ", more than " + std::to_string(kMaxIntegerField)));
  return Status::ok();
}

// The element types an operator takes at an input position where a weight or constant can be.
enum class Accepts { Float, Ratio, Index, Int64, Bool, Any };

Accepts acceptsAt(const std::string& op, int position) {
  if (op == "Conv" || op == "Gemm" || op == "MatMul" || op == "BatchNormalization" || op == "Clip" ||
      op == "LayerNormalization" || (op == "Pad" && position != 1 && position != 3))
    return Accepts::Float;
  if (op == "Relu" || op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "Flatten" ||
      op == "ReduceMean" || op == "Dropout")
    return position == 0        ? Accepts::Float
           : op == "ReduceMean" ? Accepts::Int64
           : position == 1      ? Accepts::Ratio
                                : Accepts::Bool;
  if ((op == "Reshape" || op == "Pad") && position == 1) return Accepts::Int64;
  if ((op == "Unsqueeze" || op == "Squeeze") && position == 1) return Accepts::Int64;
  if ((op == "Gather" && position == 1) || (op == "Slice" && position >= 1) || (op == "Pad" && position == 3))
    return Accepts::Index;
  return Accepts::Any;
}

bool accepted(Accepts accepts, std::int32_t type) {
  const bool isFloat = type == T::FLOAT || type == T::FLOAT16 || type == T::BFLOAT16;
  switch (accepts) {
    case Accepts::Float: return isFloat;
    case Accepts::Ratio: return isFloat || type == T::DOUBLE;
    case Accepts::Index: return type == T::INT64 || type == T::INT32;
    case Accepts::Int64: return type == T::INT64;
    case Accepts::Bool: return type == T::BOOL;
    case Accepts::Any: return elementBytes(type) > 0;
  }
  return false;
}

const char* acceptedText(Accepts accepts) {
  switch (accepts) {
    case Accepts::Float: return "FLOAT, FLOAT16 or BFLOAT16";
    case Accepts::Ratio: return "FLOAT, FLOAT16, BFLOAT16 or DOUBLE";
    case Accepts::Index: return "INT64 or INT32";
    case Accepts::Int64: return "INT64";
    case Accepts::Bool: return "BOOL";
    case Accepts::Any: return "a number type";
  }
  return "";
}

// ONNX's messages end in a dump of the node; its first line says what is wrong.
std::string checkerMessage(const char* what) {
  std::string text = what == nullptr ? "" : what;
  text = text.substr(0, text.find('\n'));
  const std::string quoted = quoteText(text, 300);
  return quoted.substr(1, quoted.size() - 2);
}

}  // namespace

Status validateTensors(const Graph& g) {
  const onnx::GraphProto& graph = g.proto();
  for (const auto& t : graph.initializer())
    REMAT_RETURN_IF_ERROR(checkTensor(t, g.source() + ": the initializer " + quoteText(t.name())));
  for (const auto& i : graph.input())
    REMAT_RETURN_IF_ERROR(checkDeclared(i, g.source() + ": the graph input " + quoteText(i.name())));
  for (const auto& o : graph.output())
    REMAT_RETURN_IF_ERROR(checkDeclared(o, g.source() + ": the graph output " + quoteText(o.name())));
  for (const auto& v : graph.value_info())
    REMAT_RETURN_IF_ERROR(checkDeclared(v, g.source() + ": the value_info " + quoteText(v.name())));
  for (std::size_t i = 0; i < static_cast<std::size_t>(graph.node_size()); ++i) {
    const onnx::NodeProto& node = graph.node(static_cast<int>(i));
    if (node.op_type() != "Constant") continue;
    for (const auto& a : node.attribute())
      if (a.type() == onnx::AttributeProto::TENSOR)
        REMAT_RETURN_IF_ERROR(checkTensor(a.t(), g.where(i) + ": its value"));
  }
  return Status::ok();
}

Status checkWeightTypes(const Graph& g, const std::map<std::string, std::int32_t>& types) {
  for (std::size_t i = 0; i < static_cast<std::size_t>(g.proto().node_size()); ++i) {
    const onnx::NodeProto& node = g.proto().node(static_cast<int>(i));
    for (int p = 0; p < node.input_size(); ++p) {
      const auto type = types.find(node.input(p));
      if (type == types.end() || node.input(p).empty()) continue;
      const Accepts accepts = acceptsAt(node.op_type(), p);
      if (!accepted(accepts, type->second))
        return g.fail(i, "its input " + std::to_string(p) + " (" + quoteText(node.input(p)) + ") is " +
                             typeName(type->second) + "; " + opTypeText(node.op_type()) + " takes " +
                             acceptedText(accepts) + " there");
    }
  }
  return Status::ok();
}

// ONNX's checker knows every operator's schema up to the opset of Debian's ONNX (17 for 1.12):
// the attributes each opset allows, required ones, the input and output counts. Newer opsets, and
// operators the importer does not read anyway (their own message is clearer), are left to ours.
Status runOnnxChecker(const Graph& g, const onnx::ModelProto& model, bool everyNode) {
  const auto& versions = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto known = versions.find(onnx::ONNX_DOMAIN);
  if (known == versions.end() || g.opset() > known->second.second) return Status::ok();
  onnx::checker::CheckerContext context;
  context.set_ir_version(static_cast<int>(model.ir_version()));
  std::unordered_map<std::string, int> opsets;
  for (const auto& entry : model.opset_import())
    opsets[entry.domain() == "ai.onnx" ? "" : entry.domain()] = static_cast<int>(entry.version());
  context.set_opset_imports(opsets);
  const onnx::checker::LexicalScopeContext scope;
  for (std::size_t i = 0; i < static_cast<std::size_t>(g.proto().node_size()); ++i) {
    const onnx::NodeProto& node = g.proto().node(static_cast<int>(i));
    if (!(node.domain().empty() || node.domain() == "ai.onnx") || !(everyNode || readsOperator(node))) continue;
    try {
      onnx::checker::check_node(node, context, scope);
    } catch (const std::exception& error) {
      return g.fail(i, "ONNX's checker: " + checkerMessage(error.what()));
    }
  }
  return Status::ok();
}

namespace {

std::string declaredText(const onnx::TypeProto::Tensor& tensor) {
  std::string text;
  if (tensor.has_shape()) {
    text = "[";
    for (int i = 0; i < tensor.shape().dim_size(); ++i) {
      const auto& d = tensor.shape().dim(i);
      text += (i ? ", " : "") + (d.has_dim_value()       ? std::to_string(d.dim_value())
                                 : d.dim_param().empty() ? std::string("?")
                                                         : quoteText(d.dim_param(), 20));
    }
    text += "] ";
  }
  return text + typeName(tensor.elem_type());
}

}  // namespace

// Declared shapes and types against the importer's: a dimension the file fixes must be the one the
// importer computed (the batch excepted when --batch overrides it), the type the input's.
Status Graph::checkDeclaredShapes() const {
  const std::int32_t ours = dtype_ == DType::Float16 ? T::FLOAT16 : dtype_ == DType::BFloat16 ? T::BFLOAT16 : T::FLOAT;
  auto check = [&](const onnx::ValueInfoProto& info, const char* kind) -> Status {
    const auto a = activation(info.name());
    if (!a || !info.type().has_tensor_type()) return Status::ok();
    const auto& tensor = info.type().tensor_type();
    Shape shape = activationList_[*a].shape;
    if (const std::int64_t pad = pendingPad(info.name()); pad > 0 && shape.size() == 4) {
      shape[2] += 2 * pad;
      shape[3] += 2 * pad;
    }
    bool same = tensor.elem_type() == 0 || tensor.elem_type() == ours;
    if (tensor.has_shape()) {
      const auto& dims = tensor.shape().dim();
      same = same && static_cast<std::size_t>(dims.size()) == shape.size();
      for (int i = 0; same && i < dims.size(); ++i)
        same = !dims[i].has_dim_value() || (i == 0 && options_.batch > 0) ||
               dims[i].dim_value() == shape[static_cast<std::size_t>(i)];
    }
    if (same) return Status::ok();
    const std::string message = std::string(kind) + " " + quoteText(info.name()) + " is declared " +
                                declaredText(tensor) + ", but the importer infers " + shapeToString(shape) + " " +
                                typeName(ours) +
                                (options_.batch > 0 ? " (at --batch " + std::to_string(options_.batch) + ")" : "");
    auto producer = producers_.find(info.name());
    return producer == producers_.end() ? Status::invalid(source_ + ": " + message) : fail(producer->second, message);
  };
  for (const auto& v : graph_.value_info()) REMAT_RETURN_IF_ERROR(check(v, "the value_info"));
  for (const auto& o : graph_.output()) REMAT_RETURN_IF_ERROR(check(o, "the graph output"));
  return Status::ok();
}

}  // namespace remat::onnx_import
