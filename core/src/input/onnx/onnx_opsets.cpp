// What changed at opsets 18, 19 and 20 for the operators the importer reads (ONNX's Changelog.md),
// in one place:
//   18  Reduce* but ReduceSum: `axes` is the optional int64 input 1, no longer an attribute (with
//       `noop_with_empty_axes`); Split: `num_outputs`, or the `split` input, exactly one; Pad: an
//       optional `axes` input (onnx_views.cpp reads it); Resize: attributes the importer never reads.
//   19  AveragePool `dilations` (onnx_layers.cpp's per-axis attribute, 1 only); Cast, Constant,
//       Identity, Reshape, Shape, Size, Equal, Pad: new types or modes, the same forms.
//   20  Gelu is a standard op (`approximate` "none" or "tanh"); ConstantOfShape, ReduceMax/Min: types.
// Debian's libonnx 1.12 knows opsets up to 17: its checker is skipped above that (onnx_tensors.cpp),
// and the transformer path's shape inference (ONNX's) runs on a copy lowered here to the opset-17
// forms of the same ops, which have the same shapes.
#include <onnx/defs/schema.h>

#include <algorithm>
#include <set>

#include "onnx_graph.hpp"
#include "remat/base/text.hpp"

namespace remat::onnx_import {

namespace {

constexpr int kFirstAxesInputOpset = 18;

bool isAxesInputReduce(const std::string& op) {
  static const std::set<std::string> ops = {"ReduceMean",   "ReduceMax",       "ReduceMin",
                                            "ReduceProd",   "ReduceL1",        "ReduceL2",
                                            "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  return ops.count(op) > 0;
}

// The newest ai.onnx opset this build's ONNX knows (17 for Debian's 1.12).
int knownOpset() {
  const auto& versions = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto known = versions.find(onnx::ONNX_DOMAIN);
  return known == versions.end() ? 0 : known->second.second;
}

Status checkSplit(const Graph& g, std::size_t index) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  const bool sizes = !nodeInput(node, 1).empty();
  const bool counted = std::any_of(node.attribute().begin(), node.attribute().end(),
                                   [](const onnx::AttributeProto& a) { return a.name() == "num_outputs"; });
  if (g.opset() < kFirstAxesInputOpset) return Status::ok();
  if (sizes == counted)
    return g.fail(index, sizes ? "has both the split input and num_outputs (opset 18 takes exactly one)"
                               : "has neither the split input nor num_outputs (opset 18 takes exactly one)");
  const std::int64_t count = intAttribute(node, "num_outputs", 0);
  if (counted && count != node.output_size())
    return g.fail(index, "num_outputs is " + std::to_string(count) + " but the node has " +
                             std::to_string(node.output_size()) + " outputs");
  return Status::ok();
}

Status checkGeluApproximate(const Graph& g, std::size_t index) {
  const std::string approximate = stringAttribute(g.proto().node(static_cast<int>(index)), "approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return g.fail(index, "Gelu's approximate is " + quoteText(approximate, 40) + "; ONNX defines 'none' and 'tanh'");
  return Status::ok();
}

}  // namespace

Result<std::optional<std::vector<std::int64_t>>> reduceAxes(const Graph& g, std::size_t index, std::size_t rank) {
  const onnx::NodeProto& node = g.proto().node(static_cast<int>(index));
  std::optional<std::vector<std::int64_t>> axes = intsAttribute(node, "axes");
  if (g.opset() >= kFirstAxesInputOpset && isAxesInputReduce(node.op_type())) {
    if (axes)
      return g.fail(index, "has an axes attribute; from opset 18 on " + node.op_type() +
                               "'s axes are its input 1 (an int64 initializer or Constant)");
    const std::string& input = nodeInput(node, 1);
    if (!input.empty()) {
      const Constant* c = g.constant(input);
      if (c == nullptr)
        return g.fail(index, "its axes (input 1, " + quoteText(input, 80) +
                                 ") are not constant; the importer reads them from an initializer or a Constant");
      auto values = integersOf(*c, "its axes (input 1)");
      if (!values) return g.fail(index, values.status().message());
      axes = std::move(values).value();
    } else if (intAttribute(node, "noop_with_empty_axes", 0) != 0) {
      return g.fail(index, "has no axes and noop_with_empty_axes = 1 (the identity); the importer reads a reduction");
    }
  }
  if (axes && rank > 0)
    for (std::int64_t axis : *axes)
      if (axis < -static_cast<std::int64_t>(rank) || axis >= static_cast<std::int64_t>(rank))
        return g.fail(index, "reduces axis " + std::to_string(axis) + ", out of range for its rank-" +
                                 std::to_string(rank) + " input");
  return axes;
}

Status checkNewOpsetNodes(const Graph& g) {
  for (std::size_t i = 0; i < static_cast<std::size_t>(g.proto().node_size()); ++i) {
    const onnx::NodeProto& node = g.proto().node(static_cast<int>(i));
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;
    if (node.op_type() == "Split") REMAT_RETURN_IF_ERROR(checkSplit(g, i));
    if (node.op_type() == "Gelu") REMAT_RETURN_IF_ERROR(checkGeluApproximate(g, i));
    if (isAxesInputReduce(node.op_type())) {
      auto axes = reduceAxes(g, i, 0);
      if (!axes) return axes.status();
    }
  }
  return Status::ok();
}

// Each node of `model` (a copy of g's model, node for node) in the form of the newest opset ONNX
// knows: Reduce*'s axes back into the attribute, Split without num_outputs (ONNX 1.12's Split
// splits evenly by its outputs), Gelu as Erf (the same shape and type). checkNewOpsetNodes first.
Status lowerForOnnxInference(const Graph& g, onnx::ModelProto& model) {
  const int known = knownOpset();
  if (g.opset() <= known) return Status::ok();
  REMAT_RETURN_IF_ERROR(checkNewOpsetNodes(g));
  onnx::GraphProto& graph = *model.mutable_graph();
  for (int i = 0; i < graph.node_size(); ++i) {
    onnx::NodeProto& node = *graph.mutable_node(i);
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;
    auto drop = [&node](const char* name) {
      auto* attributes = node.mutable_attribute();
      attributes->erase(std::remove_if(attributes->begin(), attributes->end(),
                                       [name](const onnx::AttributeProto& a) { return a.name() == name; }),
                        attributes->end());
    };
    if (isAxesInputReduce(node.op_type())) {
      auto axes = reduceAxes(g, static_cast<std::size_t>(i), 0);
      if (!axes) return axes.status();
      drop("noop_with_empty_axes");
      if (node.input_size() > 1) node.mutable_input()->DeleteSubrange(1, node.input_size() - 1);
      if (*axes) {
        onnx::AttributeProto* a = node.add_attribute();
        a->set_name("axes");
        a->set_type(onnx::AttributeProto::INTS);
        for (std::int64_t axis : **axes) a->add_ints(axis);
      }
    } else if (node.op_type() == "Split") {
      drop("num_outputs");
    } else if (node.op_type() == "Gelu") {
      drop("approximate");
      node.set_op_type("Erf");
    }
  }
  for (auto& entry : *model.mutable_opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx") entry.set_version(known);
  return Status::ok();
}

}  // namespace remat::onnx_import
