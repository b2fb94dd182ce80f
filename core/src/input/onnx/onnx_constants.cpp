// Values of the constant plumbing that exporters emit around reshapes, clips, pads and dropouts:
// Constant, Shape, Gather, Unsqueeze, Squeeze, Concat, Cast, Slice, Identity and elementwise
// arithmetic, evaluated on small 1-D (or scalar) tensors. Weights are never decoded beyond their
// shapes; only small initializers that such a node reads are.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "onnx_graph.hpp"
#include "remat/base/text.hpp"

namespace remat::onnx_import {
namespace {

// Plumbing tensors are shapes and scalars; anything bigger is a weight or not plumbing at all.
constexpr std::size_t kMaxConstantElements = 1 << 16;

template <typename T>
Status decodeRaw(const std::string& raw, std::size_t count, std::vector<double>& out) {
  if (raw.size() != count * sizeof(T)) return Status::invalid("its raw data has the wrong size");
  for (std::size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, raw.data() + i * sizeof(T), sizeof(T));
    out.push_back(static_cast<double>(value));
  }
  return Status::ok();
}

template <typename Field>
Status decodeField(const Field& field, std::size_t count, std::vector<double>& out) {
  if (static_cast<std::size_t>(field.size()) != count) return Status::invalid("it has the wrong number of values");
  for (const auto& v : field) out.push_back(static_cast<double>(v));
  return Status::ok();
}

Status decodeValues(const onnx::TensorProto& t, std::size_t count, std::vector<double>& out) {
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      return raw ? decodeRaw<float>(t.raw_data(), count, out) : decodeField(t.float_data(), count, out);
    case onnx::TensorProto::DOUBLE:
      return raw ? decodeRaw<double>(t.raw_data(), count, out) : decodeField(t.double_data(), count, out);
    case onnx::TensorProto::INT64:
      return raw ? decodeRaw<std::int64_t>(t.raw_data(), count, out) : decodeField(t.int64_data(), count, out);
    case onnx::TensorProto::INT32:
      return raw ? decodeRaw<std::int32_t>(t.raw_data(), count, out) : decodeField(t.int32_data(), count, out);
    case onnx::TensorProto::INT8:
      return raw ? decodeRaw<std::int8_t>(t.raw_data(), count, out) : decodeField(t.int32_data(), count, out);
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      return raw ? decodeRaw<std::uint8_t>(t.raw_data(), count, out) : decodeField(t.int32_data(), count, out);
    default:
      return Status::invalid("its element type " + std::to_string(t.data_type()) +
                             " holds no numbers the importer reads");
  }
}

Constant scalar(double value) { return Constant{{}, {value}}; }

Constant vector1d(std::vector<double> values) {
  Constant c;
  c.dims = {static_cast<std::int64_t>(values.size())};
  c.values = std::move(values);
  return c;
}

// An axis in [-rank, rank) as an index in [0, rank), or -1.
std::int64_t normalizeAxis(std::int64_t axis, std::int64_t rank) {
  if (axis < -rank || axis >= rank) return -1;
  return axis < 0 ? axis + rank : axis;
}

}  // namespace

Result<Constant> decodeTensor(const onnx::TensorProto& tensor, std::size_t maxElements) {
  const std::string what = "tensor " + quoteText(tensor.name());
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return Status::invalid(what + " is stored outside the model file, which the importer does not read");
  Constant c;
  c.dims = tensorDims(tensor);
  std::uint64_t count = 1;
  for (auto d : c.dims) {
    if (d < 0) return Status::invalid(what + " has a negative dimension");
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count) || count > maxElements)
      return Status::invalid(what + " is too big for a constant of the shape plumbing");
  }
  REMAT_RETURN_IF_ERROR(decodeValues(tensor, count, c.values).withContext(what));
  return c;
}

std::string numberText(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

Result<std::vector<std::int64_t>> integersOf(const Constant& constant, const std::string& what) {
  constexpr double kLimit = 9007199254740992.0;  // 2^53: every integer below it is a double
  std::vector<std::int64_t> out;
  for (double v : constant.values) {
    if (!(std::fabs(v) <= kLimit) || std::trunc(v) != v)
      return Status::invalid(what + " holds " + numberText(v) + ", not an integer");
    out.push_back(static_cast<std::int64_t>(v));
  }
  return out;
}

const Constant* Graph::constant(const std::string& tensor) const {
  if (tensor.empty()) return nullptr;
  auto it = constants_.find(tensor);
  if (it != constants_.end()) return &it->second;
  const Weight* w = weight(tensor);
  if (w == nullptr || w->initializer == nullptr) return nullptr;
  auto decoded = decodeTensor(*w->initializer, kMaxConstantElements);
  if (!decoded) return nullptr;
  return &(constants_[tensor] = std::move(decoded).value());
}

namespace {

// The node's inputs as constants; null when one is not.
std::vector<const Constant*> constantInputs(const Graph& graph, const onnx::NodeProto& node) {
  std::vector<const Constant*> inputs;
  for (const auto& name : node.input()) inputs.push_back(name.empty() ? nullptr : graph.constant(name));
  return inputs;
}

Result<Constant> constantNode(const onnx::NodeProto& node) {
  for (const auto& a : node.attribute()) {
    if (a.name() == "value") return decodeTensor(a.t(), kMaxConstantElements);
    if (a.name() == "value_float") return scalar(a.f());
    if (a.name() == "value_int") return scalar(static_cast<double>(a.i()));
    if (a.name() == "value_floats") return vector1d(std::vector<double>(a.floats().begin(), a.floats().end()));
    if (a.name() == "value_ints") return vector1d(std::vector<double>(a.ints().begin(), a.ints().end()));
  }
  return Status::invalid("a Constant without a numeric value attribute");
}

Result<Constant> shapeNode(const Graph& graph, const onnx::NodeProto& node) {
  Shape shape;
  if (auto a = graph.activation(nodeInput(node, 0))) {
    shape = graph.activations()[*a].shape;
  } else if (const Weight* w = graph.weight(nodeInput(node, 0))) {
    shape = w->shape;
  } else if (const Constant* c = graph.constant(nodeInput(node, 0))) {
    shape = c->dims;
  } else {
    return Status::invalid("the shape of " + quoteText(nodeInput(node, 0)) + " is not known");
  }
  const auto rank = static_cast<std::int64_t>(shape.size());
  std::int64_t start = intAttribute(node, "start", 0), end = intAttribute(node, "end", rank);
  start = std::clamp<std::int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<std::int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<double> values;
  for (std::int64_t i = start; i < end; ++i) values.push_back(static_cast<double>(shape[static_cast<std::size_t>(i)]));
  return vector1d(std::move(values));
}

Result<Constant> gatherNode(const onnx::NodeProto& node, const Constant& data, const Constant& indices) {
  if (data.dims.size() != 1 || intAttribute(node, "axis", 0) != 0)
    return Status::invalid("Gather of constants is read along axis 0 of a 1-D tensor only");
  auto positions = integersOf(indices, "its indices");
  if (!positions) return positions.status();
  Constant out;
  out.dims = indices.dims;
  const auto size = static_cast<std::int64_t>(data.values.size());
  for (std::int64_t v : *positions) {
    const std::int64_t i = normalizeAxis(v, size);
    if (i < 0) return Status::invalid("Gather index " + std::to_string(v) + " is out of range");
    out.values.push_back(data.values[static_cast<std::size_t>(i)]);
  }
  return out;
}

// Unsqueeze and Squeeze change the dims only: the values stay as they are.
Result<Constant> reshapeConstant(const Graph& graph, const onnx::NodeProto& node, const Constant& data) {
  std::optional<std::vector<std::int64_t>> axes = intsAttribute(node, "axes");
  if (!axes && !nodeInput(node, 1).empty()) {
    const Constant* a = graph.constant(nodeInput(node, 1));
    if (a == nullptr) return Status::invalid("its axes are not constant");
    auto values = integersOf(*a, "its axes");
    if (!values) return values.status();
    axes = std::move(values).value();
  }
  const bool squeeze = node.op_type() == "Squeeze";
  if (!squeeze && !axes) return Status::invalid("Unsqueeze without axes");
  const auto rank = static_cast<std::int64_t>(data.dims.size() + (squeeze ? 0 : axes->size()));
  std::vector<bool> listed(static_cast<std::size_t>(rank), false);
  for (std::int64_t axis : axes.value_or(std::vector<std::int64_t>{})) {
    const std::int64_t n = normalizeAxis(axis, rank);
    if (n < 0) return Status::invalid("axis " + std::to_string(axis) + " is out of range");
    listed[static_cast<std::size_t>(n)] = true;
  }
  Constant out = data;
  out.dims.clear();
  std::size_t next = 0;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    if (squeeze) {
      const bool drop = axes && !axes->empty() ? listed[i] : data.dims[i] == 1;
      if (!drop) out.dims.push_back(data.dims[i]);
    } else {
      out.dims.push_back(listed[i] ? 1 : data.dims[next++]);
    }
  }
  return out;
}

Result<Constant> concatNode(const std::vector<const Constant*>& inputs) {
  std::vector<double> values;
  for (const Constant* c : inputs) {
    if (c->dims.size() > 1) return Status::invalid("Concat of constants is read for 1-D tensors only");
    values.insert(values.end(), c->values.begin(), c->values.end());
  }
  return vector1d(std::move(values));
}

Result<Constant> sliceNode(const Graph& graph, const onnx::NodeProto& node, const Constant& data) {
  if (data.dims.size() != 1) return Status::invalid("Slice of constants is read for 1-D tensors only");
  const auto size = static_cast<std::int64_t>(data.values.size());
  // The first value of an attribute (opset < 10) or a constant input; INT64_MAX ("to the end")
  // and other huge bounds clamp to the size.
  auto bound = [&](int input, const char* attribute, std::int64_t fallback) -> std::int64_t {
    if (auto a = intsAttribute(node, attribute)) return a->empty() ? fallback : std::clamp(a->front(), -size - 1, size);
    const Constant* c = graph.constant(nodeInput(node, input));
    if (c == nullptr || c->values.empty() || !(c->values.front() == c->values.front())) return fallback;
    return static_cast<std::int64_t>(std::clamp(c->values.front(), -double(size) - 1, double(size)));
  };
  const std::int64_t start = bound(1, "starts", 0), end = bound(2, "ends", size), step = bound(4, "steps", 1);
  if (step != 1) return Status::invalid("Slice of constants is read with step 1 only");
  const std::int64_t from = std::clamp<std::int64_t>(start < 0 ? start + size : start, 0, size);
  const std::int64_t to = std::clamp<std::int64_t>(end < 0 ? end + size : end, from, size);
  return vector1d(std::vector<double>(data.values.begin() + from, data.values.begin() + to));
}

Result<Constant> arithmeticNode(const std::string& op, const Constant& a, const Constant& b) {
  const std::size_t n = std::max(a.values.size(), b.values.size());
  if ((a.values.size() != n && a.values.size() != 1) || (b.values.size() != n && b.values.size() != 1))
    return Status::invalid(op + " of constants of different sizes");
  Constant out = a.values.size() == n ? a : b;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = a.values[a.values.size() == 1 ? 0 : i], y = b.values[b.values.size() == 1 ? 0 : i];
    if (op == "Div" && y == 0) return Status::invalid("Div of constants by zero");
    out.values[i] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : std::trunc(x / y);
  }
  return out;
}

Result<Constant> evaluate(const Graph& graph, const onnx::NodeProto& node, const std::vector<const Constant*>& in) {
  const std::string& op = node.op_type();
  if (op == "Constant") return constantNode(node);
  if (node.input_size() == 0 || node.input(0).empty()) return Status::invalid("it has no input");
  if (op == "Shape") return shapeNode(graph, node);
  // Slice, Squeeze and Unsqueeze read their optional inputs themselves.
  const bool optionalInputs = op == "Slice" || op == "Squeeze" || op == "Unsqueeze";
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i] == nullptr && !node.input(static_cast<int>(i)).empty() && (i == 0 || !optionalInputs))
      return Status::invalid("input " + quoteText(node.input(static_cast<int>(i))) + " is not constant");
  if (in.empty()) return Status::invalid("it has no input");
  if (op == "Identity" || op == "Cast") return *in.front();
  if (op == "Gather" && in.size() == 2) return gatherNode(node, *in[0], *in[1]);
  if (op == "Unsqueeze" || op == "Squeeze") return reshapeConstant(graph, node, *in.front());
  if (op == "Concat") return concatNode(in);
  if (op == "Slice") return sliceNode(graph, node, *in.front());
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && in.size() == 2)
    return arithmeticNode(op, *in[0], *in[1]);
  return Status::invalid("not constant plumbing");
}

bool isPlumbing(const std::string& op) {
  return op == "Constant" || op == "Shape" || op == "Identity" || op == "Cast" || op == "Gather" || op == "Unsqueeze" ||
         op == "Squeeze" || op == "Concat" || op == "Slice" || op == "Add" || op == "Sub" || op == "Mul" || op == "Div";
}

}  // namespace

Result<bool> Graph::evaluateConstantNode(std::size_t index) {
  const onnx::NodeProto& node = graph_.node(static_cast<int>(index));
  if (!isPlumbing(node.op_type()) || node.output_size() < 1) return false;
  // Identity of a weight (eval-mode exports share equal weights this way): the same weight, and
  // the same value when it has a small one.
  if (node.op_type() == "Identity")
    if (const Weight* w = weight(nodeInput(node, 0)); w != nullptr) {
      addWeightAlias(node.output(0), *w);
      if (const Constant* c = constant(nodeInput(node, 0))) addConstant(node.output(0), *c);
      countDropped(node.op_type());
      return true;
    }
  auto value = evaluate(*this, node, constantInputs(*this, node));
  if (!value) return fail(index, "cannot evaluate this shape plumbing: " + value.status().message());
  addConstant(node.output(0), std::move(value).value());
  countFolded(node.op_type());
  return true;
}

}  // namespace remat::onnx_import
