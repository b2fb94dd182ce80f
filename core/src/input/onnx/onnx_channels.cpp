// ShuffleNetV2's channel ops (torchvision/models/shufflenetv2.py): the channel split
// `x.chunk(2, dim=1)`, exported as a Slice of the channels per half, and channel_shuffle, exported
// as Reshape [N, g, C/g, H, W] -> Transpose perm [0, 2, 1, 3, 4] -> Reshape [N, C, H, W]. Both
// become block inner ops (slice, channel_shuffle: docs/memory-model.md section 6); anything else
// a Slice or Transpose of activations does is refused at its node.
#include <algorithm>

#include "onnx_graph.hpp"
#include "remat/base/text.hpp"

namespace remat::onnx_import {
namespace {

constexpr double kBeyondAnyAxis = 9007199254740992.0;  // 2^53

const onnx::NodeProto& nodeAt(const Graph& g, std::size_t node) { return g.proto().node(static_cast<int>(node)); }

// The one node after `from` that reads `tensor` (the tensor has exactly one reader), or none.
std::optional<std::size_t> soleReader(const Graph& g, std::size_t from, const std::string& tensor) {
  if (g.readers(tensor) != 1) return std::nullopt;
  const auto count = static_cast<std::size_t>(g.proto().node_size());
  for (std::size_t n = from + 1; n < count; ++n)
    for (const auto& input : nodeAt(g, n).input())
      if (input == tensor) return n;
  return std::nullopt;
}

// One bound of a Slice on the channel axis: its attribute (opset < 10) or constant input.
Result<std::vector<std::int64_t>> sliceValues(const Graph& g, std::size_t index, const char* attribute, int input) {
  const onnx::NodeProto& node = nodeAt(g, index);
  if (g.opset() < 10) return intsAttribute(node, attribute).value_or(std::vector<std::int64_t>{});
  if (nodeInput(node, input).empty()) return std::vector<std::int64_t>{};
  const Constant* c = g.constant(nodeInput(node, input));
  if (c == nullptr)
    return g.fail(index, "its " + std::string(attribute) + " (input " + std::to_string(input) +
                             ") is not a constant the importer can evaluate");
  // torch writes INT64_MAX (INT64_MIN) for a bound past the end (before the start): any bound
  // beyond 2^53 clamps to the axis all the same, so it is read as 2^53.
  Constant clamped = *c;
  for (double& v : clamped.values) v = std::clamp(v, -kBeyondAnyAxis, kBeyondAnyAxis);
  auto values = integersOf(clamped, "its " + std::string(attribute) + " (input " + std::to_string(input) + ")");
  if (!values) return g.fail(index, values.status().message());
  return std::move(values).value();
}

// ONNX's clamping of a Slice bound on an axis of `extent`: negative counts from the end.
std::int64_t clampBound(std::int64_t bound, std::int64_t extent) {
  if (bound < 0) bound = bound < -extent ? 0 : bound + extent;
  return std::min(bound, extent);
}

// Evaluates the constant plumbing between a channel shuffle's first Reshape and its last (torch
// writes the last Reshape's shape there, after the Transpose), so that shape is known now; the
// walk then skips those nodes.
Status evaluatePlumbingBetween(Graph& g, std::size_t from, std::size_t to, std::size_t transpose) {
  for (std::size_t n = from + 1; n < to; ++n) {
    if (n == transpose || g.isFused(n)) continue;
    const onnx::NodeProto& node = nodeAt(g, n);
    bool readsData = false;
    for (const auto& input : node.input()) readsData = readsData || g.isActivation(input);
    if (readsData && node.op_type() != "Shape") continue;
    auto handled = g.evaluateConstantNode(n);
    if (!handled) return handled.status();
    if (*handled) g.markFused(n);
  }
  return Status::ok();
}

}  // namespace

// Channels [begin, end) of an NCHW activation, step 1, on axis 1 only.
Status convertSlice(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = nodeAt(g, index);
  const auto a = g.activation(nodeInput(node, 0));
  if (!a) return g.fail(index, "its input 0 is not computed from the model's input");
  const Shape in = g.activations()[*a].shape;
  auto starts = sliceValues(g, index, "starts", 1);
  if (!starts) return starts.status();
  auto ends = sliceValues(g, index, "ends", 2);
  if (!ends) return ends.status();
  auto axes = sliceValues(g, index, "axes", 3);
  if (!axes) return axes.status();
  auto steps = sliceValues(g, index, "steps", 4);
  if (!steps) return steps.status();
  if (axes->empty())  // ONNX's default: the first len(starts) axes
    for (std::size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<std::int64_t>(i));
  const auto rank = static_cast<std::int64_t>(in.size());
  const bool oneChannelAxis = starts->size() == 1 && ends->size() == 1 && axes->size() == 1 &&
                              ((*axes)[0] == 1 || (*axes)[0] == 1 - rank) &&
                              (steps->empty() || (steps->size() == 1 && (*steps)[0] == 1));
  if (rank != 4 || !oneChannelAxis)
    return g.fail(index, "slices " + shapeToString(in) +
                             " otherwise than along the channels (axis 1, step 1) of an NCHW tensor; the importer "
                             "reads a Slice of activations only as ShuffleNetV2's channel split (x.chunk(2, dim=1))");
  const std::int64_t begin = clampBound((*starts)[0], in[1]), end = clampBound((*ends)[0], in[1]);
  if (begin >= end)
    return g.fail(index, "takes channels [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " +
                             shapeToString(in) + ": none");
  if (begin == 0 && end == in[1]) {
    g.alias(node.output(0), *a);
    g.countDropped(node.op_type());
    return Status::ok();
  }
  DataOp op = makeOp(g, index, LayerKind::Abstract, {*a});
  op.role = OpRole::Slice;
  op.layer.channelBegin = begin;
  op.layer.outChannels = end - begin;
  Shape shape = in;
  shape[1] = end - begin;
  appendOp(g, std::move(op), shape);
  return Status::ok();
}

// Reshape `index` takes activation a ([N, C, H, W]) to `split` ([N, g, C/g, H, W]); its one reader
// must be a Transpose swapping axes 1 and 2, whose one reader is a Reshape back to [N, C, H, W].
Status convertChannelShuffle(Graph& g, std::size_t index, std::size_t a, const Shape& split) {
  const Shape in = g.activations()[a].shape;
  const std::string what = "reshapes " + shapeToString(in) + " to " + shapeToString(split);
  const std::string pattern =
      "; the importer reads a 5-dimensional Reshape only as ShuffleNetV2's channel shuffle: Reshape [N, g, C/g, H, "
      "W], then Transpose perm [0, 2, 1, 3, 4], then Reshape back to [N, C, H, W], each the only reader of the one "
      "before";
  if (in.size() != 4 || split[0] != in[0] || split[3] != in[2] || split[4] != in[3] || split[1] * split[2] != in[1])
    return g.fail(index, what + pattern);
  const auto transpose = soleReader(g, index, nodeAt(g, index).output(0));
  if (!transpose || nodeAt(g, *transpose).op_type() != "Transpose" ||
      intsAttribute(nodeAt(g, *transpose), "perm") != std::vector<std::int64_t>{0, 2, 1, 3, 4})
    return g.fail(index, what + " and no Transpose perm [0, 2, 1, 3, 4] alone reads it" + pattern);
  const auto back = soleReader(g, *transpose, nodeAt(g, *transpose).output(0));
  if (!back || nodeAt(g, *back).op_type() != "Reshape" || nodeAt(g, *back).input(0) != nodeAt(g, *transpose).output(0))
    return g.fail(*transpose, "transposes a channel split, and no Reshape alone reads it" + pattern);
  REMAT_RETURN_IF_ERROR(evaluatePlumbingBetween(g, index, *back, *transpose));
  const Constant* target = g.constant(nodeInput(nodeAt(g, *back), 1));
  if (target == nullptr) return g.fail(*back, "its shape (input 1) is not a constant the importer can evaluate");
  const Shape transposed = {split[0], split[2], split[1], split[3], split[4]};
  auto out = reshapeTarget(g, *back, transposed, *target);
  if (!out) return out.status();
  if (*out != in)
    return g.fail(*back, "reshapes the transposed channel split " + shapeToString(transposed) + " to " +
                             shapeToString(*out) + ", not back to " + shapeToString(in) + pattern);
  DataOp op = makeOp(g, index, LayerKind::Abstract, {a});
  op.role = OpRole::ChannelShuffle;
  op.name = op.name + ".channel_shuffle";
  op.layer.groups = split[1];
  appendOp(g, std::move(op), in, nodeAt(g, *back).output(0));
  g.markFused(*transpose);
  g.markFused(*back);
  g.countFolded("Reshape");
  g.countFolded("Reshape");
  g.countFolded("Transpose");
  return Status::ok();
}

// ConvNeXt's permutes: Transpose perm [0, 2, 3, 1] of an NCHW activation makes a channels-last view
// of it, and perm [0, 3, 1, 2] of a channels-last tensor turns it back; both are views that keep
// nothing, so the output names the same activation (Graph::markChannelsLast).
Status convertTranspose(Graph& g, std::size_t index) {
  const onnx::NodeProto& node = nodeAt(g, index);
  const auto a = g.activation(nodeInput(node, 0));
  const auto perm = intsAttribute(node, "perm");
  const bool channelsLast = a && g.isChannelsLast(node.input(0));
  if (a && perm && g.activations()[*a].shape.size() == 4) {
    if (!channelsLast && *perm == std::vector<std::int64_t>{0, 2, 3, 1}) {
      g.alias(node.output(0), *a);
      g.markChannelsLast(node.output(0));
      g.countFolded("Transpose");
      return Status::ok();
    }
    if (channelsLast && *perm == std::vector<std::int64_t>{0, 3, 1, 2}) {
      g.alias(node.output(0), *a);
      g.countFolded("Transpose");
      return Status::ok();
    }
  }
  return g.fail(index,
                "transposes an activation; the importer reads Transpose only inside ShuffleNetV2's channel shuffle "
                "(Reshape [N, g, C/g, H, W], Transpose perm [0, 2, 1, 3, 4], Reshape back to [N, C, H, W]) and "
                "ConvNeXt's permutes (perm [0, 2, 3, 1] of an NCHW activation, perm [0, 3, 1, 2] back)");
}

}  // namespace remat::onnx_import
