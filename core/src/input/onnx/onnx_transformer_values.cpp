// Transformers in: the values of the shape plumbing torch writes around every view (Shape, Gather,
// Unsqueeze, Concat, Div, Mul, ...), which ONNX 1.12's shape inference does not propagate through
// Div. Each Reshape, Expand, Range, Slice or Pad whose output ONNX's pass left without a shape gets its
// plumbing's value as a constant in the copy that is inferred, and the pass runs again.
#include <onnx/shape_inference/implementation.h>

#include <limits>

#include "onnx_transformer.hpp"

namespace remat::onnx_import {
namespace {

using Values = std::vector<std::int64_t>;
constexpr std::size_t kMaxValues = 64;

class Plumbing {
 public:
  Plumbing(const onnx::GraphProto& graph, const std::map<std::string, Shape>& shapes) : graph_(graph), shapes_(shapes) {
    for (int i = 0; i < graph.node_size(); ++i)
      for (const auto& out : graph.node(i).output()) producer_[out] = i;
    for (const auto& init : graph.initializer()) initializers_[init.name()] = &init;
  }

  // Whether the tensor is a constant already (an initializer or a Constant node's value).
  bool isConstant(const std::string& tensor) const {
    if (initializers_.count(tensor)) return true;
    auto it = producer_.find(tensor);
    return it != producer_.end() && graph_.node(it->second).op_type() == "Constant";
  }

  std::optional<Values> value(const std::string& tensor, int depth = 0) {
    if (depth > 48 || tensor.empty()) return std::nullopt;
    auto init = initializers_.find(tensor);
    if (init != initializers_.end()) return decoded(*init->second);
    auto it = producer_.find(tensor);
    if (it == producer_.end()) return std::nullopt;
    // Each tensor once: the plumbing is a DAG (Swin's shift masks) whose paths multiply.
    auto known = cache_.find(tensor);
    if (known != cache_.end()) return known->second;
    auto v = evaluate(graph_.node(it->second), depth);
    cache_[tensor] = v;
    return v;
  }

 private:
  static std::optional<Values> decoded(const onnx::TensorProto& tensor) {
    if (tensor.data_type() != onnx::TensorProto::INT64 && tensor.data_type() != onnx::TensorProto::INT32)
      return std::nullopt;
    auto c = decodeTensor(tensor, kMaxValues);
    if (!c) return std::nullopt;
    Values v;
    // INT64_MAX (torch's open slice end) is 2^63 as a double: clamped, not converted out of range.
    for (double x : c->values)
      v.push_back(x >= 9.2e18    ? std::numeric_limits<std::int64_t>::max()
                  : x <= -9.2e18 ? std::numeric_limits<std::int64_t>::min()
                                 : static_cast<std::int64_t>(x));
    return v;
  }

  std::optional<Values> evaluate(const onnx::NodeProto& node, int depth) {
    const std::string& op = node.op_type();
    if (op == "Constant") {
      if (node.attribute_size() != 1) return std::nullopt;
      const auto& a = node.attribute(0);
      if (a.has_t()) return decoded(a.t());
      if (a.name() == "value_int") return Values{a.i()};
      if (a.name() == "value_ints") return Values(a.ints().begin(), a.ints().end());
      return std::nullopt;
    }
    if (op == "Shape") {
      auto s = shapes_.find(node.input(0));
      if (s == shapes_.end()) return std::nullopt;
      const auto rank = static_cast<std::int64_t>(s->second.size());
      std::int64_t start = intAttribute(node, "start", 0), end = intAttribute(node, "end", rank);
      start = std::clamp(start < 0 ? start + rank : start, std::int64_t{0}, rank);
      end = std::clamp(end < 0 ? end + rank : end, std::int64_t{0}, rank);
      return start <= end ? Values(s->second.begin() + start, s->second.begin() + end) : Values{};
    }
    std::vector<Values> in;
    for (const auto& name : node.input()) {
      auto v = value(name, depth + 1);
      if (!v) return std::nullopt;
      in.push_back(std::move(*v));
    }
    if (in.empty()) return std::nullopt;
    if (op == "Cast" || op == "Unsqueeze" || op == "Squeeze" || op == "Identity") return in[0];
    if (op == "Concat") {
      Values out;
      for (const auto& v : in) out.insert(out.end(), v.begin(), v.end());
      return out.size() <= kMaxValues ? std::optional<Values>(out) : std::nullopt;
    }
    if (op == "Gather" && in.size() == 2) {
      Values out;
      for (std::int64_t i : in[1]) {
        const auto n = static_cast<std::int64_t>(in[0].size());
        if (i < -n || i >= n) return std::nullopt;
        out.push_back(in[0][static_cast<std::size_t>(i < 0 ? i + n : i)]);
      }
      return out;
    }
    if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Mod") && in.size() == 2)
      return arithmetic(op, in[0], in[1]);
    return padPlumbing(node, in);
  }

  Shape dimsOf(const std::string& tensor, const Values& v) const {
    auto it = dims_.find(tensor);
    return it != dims_.end() ? it->second : Shape{static_cast<std::int64_t>(v.size())};
  }

  // torch's dynamic F.pad (Swin's padding to whole windows): ConstantOfShape(zeros), Reshape to
  // [-1, 2], Slice reversing the rows, Transpose, Reshape back to 1-D.
  std::optional<Values> padPlumbing(const onnx::NodeProto& node, const std::vector<Values>& in) {
    const std::string& op = node.op_type();
    if (op == "ConstantOfShape" && in[0].size() == 1 && in[0][0] >= 0 && in[0][0] <= std::int64_t{kMaxValues}) {
      if (node.attribute_size() > 0 && node.attribute(0).has_t()) {
        auto fill = decoded(node.attribute(0).t());
        if (!fill || fill->size() != 1) return std::nullopt;
        return Values(static_cast<std::size_t>(in[0][0]), fill->front());
      }
      return Values(static_cast<std::size_t>(in[0][0]), 0);
    }
    if (op == "Reshape" && in.size() == 2 && in[1].size() == 2 && in[1][1] > 0 &&
        in[0].size() % static_cast<std::size_t>(in[1][1]) == 0) {
      dims_[node.output(0)] = {static_cast<std::int64_t>(in[0].size()) / in[1][1], in[1][1]};
      return in[0];
    }
    if (op == "Reshape" && in.size() == 2 && in[1] == Values{-1}) return in[0];
    const Shape dims = dimsOf(node.input(0), in[0]);
    if (op == "Transpose" && dims.size() == 2 && intsAttribute(node, "perm") == std::vector<std::int64_t>{1, 0}) {
      Values out;
      for (std::int64_t c = 0; c < dims[1]; ++c)
        for (std::int64_t r = 0; r < dims[0]; ++r) out.push_back(in[0][static_cast<std::size_t>(r * dims[1] + c)]);
      dims_[node.output(0)] = {dims[1], dims[0]};
      return out;
    }
    // Slice(x, [-1], [-big], axes [0], steps [-1]): the rows reversed.
    if (op == "Slice" && in.size() == 5 && in[1] == Values{-1} && in[2].size() == 1 && in[2][0] <= -dims[0] - 1 &&
        in[3] == Values{0} && in[4] == Values{-1}) {
      const std::int64_t width = dims.size() == 2 ? dims[1] : 1;
      Values out;
      for (std::int64_t r = dims[0] - 1; r >= 0; --r)
        for (std::int64_t c = 0; c < width; ++c) out.push_back(in[0][static_cast<std::size_t>(r * width + c)]);
      dims_[node.output(0)] = dims;
      return out;
    }
    return std::nullopt;
  }

  static std::optional<Values> arithmetic(const std::string& op, const Values& a, const Values& b) {
    if (a.empty() || b.empty() || (a.size() != b.size() && a.size() != 1 && b.size() != 1)) return std::nullopt;
    Values out(std::max(a.size(), b.size()));
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::int64_t x = a[a.size() == 1 ? 0 : i], y = b[b.size() == 1 ? 0 : i];
      std::int64_t r = 0;
      if (op == "Div" || op == "Mod") {
        if (y == 0 || (x == std::numeric_limits<std::int64_t>::min() && y == -1)) return std::nullopt;
        // ONNX's integer Mod (fmod 0) takes the divisor's sign, as Python's %.
        r = op == "Div" ? x / y : x % y;
        if (op == "Mod" && r != 0 && (r < 0) != (y < 0)) r += y;
      } else if (op == "Add"   ? __builtin_add_overflow(x, y, &r)
                 : op == "Sub" ? __builtin_sub_overflow(x, y, &r)
                               : __builtin_mul_overflow(x, y, &r)) {
        return std::nullopt;
      }
      out[i] = r;
    }
    return out;
  }

  const onnx::GraphProto& graph_;
  const std::map<std::string, Shape>& shapes_;
  std::map<std::string, int> producer_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::map<std::string, std::optional<Values>> cache_;
  std::map<std::string, Shape> dims_;  // the 2-D values of the pad plumbing
};

bool knownOutput(const std::map<std::string, Shape>& shapes, const onnx::NodeProto& node) {
  return node.output_size() > 0 && shapes.count(node.output(0)) > 0;
}

}  // namespace

bool foldShapePlumbing(onnx::GraphProto& graph, const std::map<std::string, Shape>& shapes) {
  static const std::set<std::string> ops = {"Reshape", "Expand", "Range", "Slice", "ConstantOfShape", "Tile", "Pad"};
  Plumbing plumbing(graph, shapes);
  std::vector<std::pair<int, int>> targets;
  std::vector<Values> values;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!ops.count(node.op_type()) || knownOutput(shapes, node)) continue;
    for (int k = node.op_type() == "ConstantOfShape" || node.op_type() == "Range" ? 0 : 1; k < node.input_size(); ++k) {
      if (node.input(k).empty() || plumbing.isConstant(node.input(k))) continue;
      auto v = plumbing.value(node.input(k));
      if (!v) continue;
      targets.emplace_back(i, k);
      values.push_back(std::move(*v));
    }
  }
  for (std::size_t j = 0; j < targets.size(); ++j) {
    onnx::NodeProto& node = *graph.mutable_node(targets[j].first);
    const std::string name = node.input(targets[j].second) + "/remat_value";
    onnx::TensorProto* init = graph.add_initializer();
    init->set_name(name);
    init->set_data_type(onnx::TensorProto::INT64);
    // Range takes scalars; the others 1-D tensors.
    if (node.op_type() != "Range") init->add_dims(static_cast<std::int64_t>(values[j].size()));
    for (std::int64_t x : values[j]) init->add_int64_data(x);
    node.set_input(targets[j].second, name);
  }
  return !targets.empty();
}

}  // namespace remat::onnx_import
