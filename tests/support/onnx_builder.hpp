#pragma once
// Builds ONNX models in the tests with ONNX's own protobuf classes: a data input, weights (as
// initializers, or as graph inputs the way export_params=False writes them), constants and nodes
// with attributes, serialized to the bytes importOnnxModel reads. Node names follow torch's scopes
// when the test gives a module path ("features.0" -> "/features/features.0/Conv").
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace remat::testing {

// One attribute: {"group", std::int64_t{2}}, {"alpha", 1.0}, {"auto_pad", std::string("VALID")},
// {"pads", Ints{1, 1, 1, 1}}.
struct OnnxAttr {
  enum class Type { Int, Float, String, Ints };
  OnnxAttr(std::string n, std::int64_t v) : name(std::move(n)), type(Type::Int), i(v) {}
  OnnxAttr(std::string n, double v) : name(std::move(n)), type(Type::Float), f(v) {}
  OnnxAttr(std::string n, std::string v) : name(std::move(n)), type(Type::String), s(std::move(v)) {}
  OnnxAttr(std::string n, std::vector<std::int64_t> v) : name(std::move(n)), type(Type::Ints), ints(std::move(v)) {}
  std::string name;
  Type type;
  std::int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<std::int64_t> ints;
};

class OnnxBuilder {
 public:
  explicit OnnxBuilder(std::int64_t opset = 13, bool weightsInFile = false) : weightsInFile_(weightsInFile) {
    model_.set_ir_version(7);
    model_.set_producer_name("remat-tests");
    auto* entry = model_.add_opset_import();
    entry->set_domain("");
    entry->set_version(opset);
    graph()->set_name("test");
  }

  onnx::GraphProto* graph() { return model_.mutable_graph(); }
  onnx::ModelProto& model() { return model_; }

  // A float graph input; a dimension of -1 is symbolic, named `symbol`.
  std::string input(const std::string& name, const std::vector<std::int64_t>& shape,
                    const std::string& symbol = "batch", int elemType = onnx::TensorProto::FLOAT) {
    auto* info = graph()->add_input();
    info->set_name(name);
    auto* type = info->mutable_type()->mutable_tensor_type();
    type->set_elem_type(elemType);
    for (std::int64_t d : shape) {
      auto* dim = type->mutable_shape()->add_dim();
      if (d < 0)
        dim->set_dim_param(symbol);
      else
        dim->set_dim_value(d);
    }
    return name;
  }

  // A float weight: an initializer (zeros) when the model has its weights, else a graph input.
  std::string weight(const std::string& name, const std::vector<std::int64_t>& shape) {
    if (!weightsInFile_) return input(name, shape);
    auto* t = graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    std::int64_t count = 1;
    for (std::int64_t d : shape) {
      t->add_dims(d);
      count *= d;
    }
    t->set_raw_data(std::string(static_cast<std::size_t>(count) * 4, '\0'));
    return name;
  }

  // A Constant node of int64 values (dims: {values.size()}, or a scalar when `scalar`).
  std::string constantInts(const std::vector<std::int64_t>& values, bool scalar = false) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t.add_dims(static_cast<std::int64_t>(values.size()));
    for (std::int64_t v : values) t.add_int64_data(v);
    return constantTensor(t);
  }
  std::string constantFloat(float value) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_float_data(value);
    return constantTensor(t);
  }
  std::string constantBool(bool value) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::BOOL);
    t.add_int32_data(value ? 1 : 0);
    return constantTensor(t);
  }

  // A node; `module` gives it torch's scoped name ("" for a top-level op: "/Flatten"). Returns its
  // first output, "<module>/<op>_out<k>", unless `outputs` names them.
  std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& module,
                   std::initializer_list<OnnxAttr> attributes = {}, std::vector<std::string> outputs = {}) {
    auto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(scopedName(module, op));
    for (const auto& in : inputs) n->add_input(in);
    if (outputs.empty()) outputs.push_back(n->name() + "_out" + std::to_string(graph()->node_size()));
    for (const auto& out : outputs) n->add_output(out);
    for (const OnnxAttr& a : attributes) addAttribute(*n, a);
    return outputs.front();
  }

  void output(const std::string& tensor) { graph()->add_output()->set_name(tensor); }

  std::string bytes() const {
    std::string out;
    model_.SerializeToString(&out);
    return out;
  }

  // torch's scope of a module path: a numbered child extends its parent's segment ("features.0"
  // -> "/features/features.0"), a named one starts its own ("layer1.0.conv1" ->
  // "/layer1/layer1.0/conv1"); the op comes last.
  static std::string scopedName(const std::string& module, const std::string& op) {
    std::string name, previous;
    std::size_t start = 0;
    while (!module.empty() && start <= module.size()) {
      const std::size_t dot = std::min(module.find('.', start), module.size());
      const std::string part = module.substr(start, dot - start);
      const bool number = !part.empty() && std::isdigit(static_cast<unsigned char>(part[0])) != 0;
      previous = number && !previous.empty() ? previous + "." + part : part;
      name += "/" + previous;
      start = dot + 1;
    }
    return name + "/" + op;
  }

 private:
  std::string constantTensor(const onnx::TensorProto& t) {
    auto* n = graph()->add_node();
    n->set_op_type("Constant");
    n->set_name("/Constant_" + std::to_string(graph()->node_size()));
    n->add_output(n->name() + "_output_0");
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = t;
    return n->output(0);
  }

  static void addAttribute(onnx::NodeProto& n, const OnnxAttr& attr) {
    auto* a = n.add_attribute();
    a->set_name(attr.name);
    switch (attr.type) {
      case OnnxAttr::Type::Int: a->set_type(onnx::AttributeProto::INT), a->set_i(attr.i); break;
      case OnnxAttr::Type::Float: a->set_type(onnx::AttributeProto::FLOAT), a->set_f(static_cast<float>(attr.f)); break;
      case OnnxAttr::Type::String: a->set_type(onnx::AttributeProto::STRING), a->set_s(attr.s); break;
      case OnnxAttr::Type::Ints:
        a->set_type(onnx::AttributeProto::INTS);
        for (std::int64_t v : attr.ints) a->add_ints(v);
        break;
    }
  }

  onnx::ModelProto model_;
  bool weightsInFile_;
};

// x -> Conv(3 -> 4) -> [middle] -> Flatten -> Gemm: a small model whose middle node(s) a test
// chooses (the op under test, or the error it must refuse).
inline std::string withMiddle(const std::function<std::string(OnnxBuilder&, const std::string&)>& middle,
                              std::int64_t opset = 13) {
  OnnxBuilder b(opset);
  std::string t = b.input("x", {2, 3, 4, 4});
  t = b.node("Conv", {t, b.weight("features.0.weight", {4, 3, 1, 1})}, "features.0");
  t = middle(b, t);
  t = b.node("Flatten", {t}, "");
  b.output(b.node("Gemm", {t, b.weight("fc.weight", {2, 64})}, "fc", {{"transB", std::int64_t{1}}}));
  return b.bytes();
}

}  // namespace remat::testing
