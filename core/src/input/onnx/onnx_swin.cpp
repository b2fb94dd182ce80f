// Swin Transformer in (issue 23): torchvision's SwinTransformer exported by torch.onnx.export, read as
// the chain's Swin kinds (docs/memory-model.md section 12.6, docs/import.md "Swin Transformer"). The
// residual stream [N, H, W, C] between the patch embedding, each SwinTransformerBlock, each
// PatchMerging and the head is cut as every transformer's is (onnx_transformer.cpp); the groups of
// pieces are: the pieces before the first attention (the embedding), an attention piece and the MLP
// pieces after it (a block), the pieces between two blocks (a merging) and the pieces after the last
// block (the head). Every field is read from the ops, and the layer's parameters must be the kind's.
#include <algorithm>
#include <string>

#include "onnx_transformer.hpp"
#include "remat/base/text.hpp"

namespace remat::onnx_import {
namespace {

enum class SwinPart { Embedding, Block, Merging, Head };

// The largest window side read (swin_t's is 7): M^4 and the map's padding stay far inside 64 bits.
constexpr std::int64_t kMaxWindow = 1 << 15;

struct SwinGroup {
  SwinPart part = SwinPart::Embedding;
  std::size_t begin = 0, attnEnd = 0, end = 0;  // pieces; a block's attention is [begin, attnEnd)
};

// The ops a V1 block's attention is made of (torchvision 0.14's shifted_window_attention); anything
// else, Swin V2's cosine attention (ReduceL2 or Div of q and k, the logit scale's Exp and Clip) or
// its continuous position bias (Sigmoid), is refused at its node.
const std::set<std::string>& blockOps() {
  static const std::set<std::string> ops = {"LayerNormalization",
                                            "ReduceMean",
                                            "Sub",
                                            "Pow",
                                            "Sqrt",
                                            "Div",
                                            "Add",
                                            "Mul",
                                            "Pad",
                                            "Slice",
                                            "Concat",
                                            "Reshape",
                                            "Transpose",
                                            "MatMul",
                                            "Gather",
                                            "Softmax",
                                            "Dropout",
                                            "Identity",
                                            "Erf",
                                            "Tanh",
                                            "Gelu"};
  return ops;
}

bool pieceHas(const TransformerGraph& t, const Piece& piece, const char* op) {
  return std::any_of(piece.nodes.begin(), piece.nodes.end(),
                     [&](std::size_t i) { return nodeAt(t, i).op_type() == op; });
}

std::vector<std::size_t> nodesOf(const TransformerGraph& t, const Contents& c, const char* op) {
  std::vector<std::size_t> out;
  for (std::size_t i : c.nodes)
    if (nodeAt(t, i).op_type() == op) out.push_back(i);
  return out;
}

// Every parameter the group's ops read, and the table lookups on the way (readPieces leaves out the
// operands of an Add before a Softmax, a mask elsewhere; in Swin it adds the position bias).
std::set<std::string> groupWeights(const TransformerGraph& t, const Contents& c, std::vector<std::size_t>& gathers) {
  std::set<std::string> weights;
  for (std::size_t i : c.nodes)
    for (const auto& in : nodeAt(t, i).input())
      if (!isData(t, in)) traceWeights(t, in, weights, &gathers);
  return weights;
}

std::string shapeOrUnknown(const Shape* shape) { return shape ? shapeToString(*shape) : "of unknown shape"; }

std::int64_t roundUp(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

Result<std::vector<SwinGroup>> swinGroups(const TransformerGraph& t, const std::vector<Piece>& pieces) {
  std::vector<SwinGroup> groups;
  std::size_t p = 0;
  while (p < pieces.size() && !pieceHas(t, pieces[p], "Softmax")) ++p;
  if (p == 0 || p == pieces.size())
    return t.graph->fail(pieces.front().nodes.front(),
                         "a Swin Transformer is a patch embedding, then shifted-window attention blocks");
  groups.push_back({SwinPart::Embedding, 0, p, p});
  while (p < pieces.size()) {
    std::size_t q = p + 1;
    if (pieceHas(t, pieces[p], "Softmax")) {
      while (q < pieces.size() && !pieceHas(t, pieces[q], "Softmax") &&
             readPieces(t, pieces, p + 1, q + 1).linears.size() < 2)
        ++q;
      if (q >= pieces.size() || pieceHas(t, pieces[q], "Softmax"))
        return t.graph->fail(pieces[p].nodes.front(), "this window attention has no MLP (two linears) after it");
      groups.push_back({SwinPart::Block, p, p + 1, q + 1});
      p = q + 1;
      continue;
    }
    while (q < pieces.size() && !pieceHas(t, pieces[q], "Softmax")) ++q;
    groups.push_back({q < pieces.size() ? SwinPart::Merging : SwinPart::Head, p, p, q});
    p = q;
  }
  if (groups.back().part != SwinPart::Head)
    return t.graph->fail(pieces.back().nodes.back(), "the graph ends with a Swin block; expected the head after it");
  return groups;
}

// Swin's kinds model no dropout (torchvision's swin_t trains with dropout 0 and attention dropout 0).
Status requireNoDropout(const TransformerGraph& t, const Contents& c, const std::string& what) {
  auto p = oneDropout(t, c, what);
  if (!p) return p.status();
  if (*p != 0.0)
    return t.graph->fail(c.nodes.front(), what + " has dropout p " + numberText(*p) +
                                              "; the Swin kinds model none (torchvision's swin_t trains with 0)");
  return Status::ok();
}

void readEpsilon(const Contents& c, LayerSpec& spec) {
  if (!c.epsilons.empty()) spec.epsilon = float32Value(c.epsilons.front());
}

// torchvision's features[0]: Conv2d(3, C, k, stride k), Permute([0, 2, 3, 1]), LayerNorm(C).
Result<LayerSpec> swinEmbedding(const TransformerGraph& t, const Contents& c) {
  LayerSpec spec;
  spec.kind = LayerKind::SwinEmbedding;
  spec.name = groupName(t, c, true);
  if (c.convs.size() != 1 || !c.linears.empty() || c.norms != 1 || nodesOf(t, c, "Transpose").size() != 1)
    return t.graph->fail(c.nodes.front(),
                         "a Swin patch embedding is one Conv (kernel = stride), a Transpose to channels last and one "
                         "LayerNorm; this part of the graph has " +
                             std::to_string(c.convs.size()) + " Conv, " + std::to_string(c.linears.size()) +
                             " linears and " + std::to_string(c.norms) + " LayerNorms");
  const onnx::NodeProto& conv = nodeAt(t, c.convs.front());
  const auto kernel = intsAttribute(conv, "kernel_shape");
  const auto strides = intsAttribute(conv, "strides");
  const auto pads = intsAttribute(conv, "pads");
  const Shape* weight = t.shapeOf(conv.input(1));
  const bool unpadded = !pads || std::all_of(pads->begin(), pads->end(), [](std::int64_t v) { return v == 0; });
  if (!kernel || kernel->size() != 2 || (*kernel)[0] != (*kernel)[1] || !strides || *strides != *kernel || !unpadded ||
      intAttribute(conv, "group", 1) != 1 || weight == nullptr || weight->size() != 4)
    return t.graph->fail(c.convs.front(),
                         "a Swin patch embedding's Conv has a square kernel equal to its stride, no padding and one "
                         "group");
  spec.kernel = (*kernel)[0];
  spec.width = (*weight)[0];
  REMAT_RETURN_IF_ERROR(requireNoDropout(t, c, "the patch embedding"));
  readEpsilon(c, spec);
  return spec;
}

// The window partition: x.view(N, Hp / M, M, Wp / M, M, C), the first rank-6 Reshape of the block.
Result<std::int64_t> readWindow(const TransformerGraph& t, const Contents& attn, const Shape& stream) {
  for (std::size_t i : nodesOf(t, attn, "Reshape")) {
    const Shape* s = t.shapeOf(nodeAt(t, i).output(0));
    if (s == nullptr || s->size() != 6) continue;
    const std::int64_t m = (*s)[2];
    // M^4 (the relative position index's entries) must fit 64 bits.
    if (m > kMaxWindow)
      return t.graph->fail(i, "this Swin block's window partition has windows of " + std::to_string(m) +
                                  ", more than " + std::to_string(kMaxWindow));
    if (m <= 0 || (*s)[4] != m || (*s)[0] != stream[0] || (*s)[5] != stream[3] ||
        (*s)[1] != roundUp(stream[1], m) / m || (*s)[3] != roundUp(stream[2], m) / m)
      return t.graph->fail(i, "a Swin block's window partition is [N, Hp / M, M, Wp / M, M, C] (the map " +
                                  shapeToString(stream) + " padded to whole M x M windows); this Reshape writes " +
                                  shapeToString(*s));
    return m;
  }
  return t.graph->fail(attn.nodes.front(),
                       "this Swin block's attention has no window partition (a Reshape to [N, H / M, M, W / M, M, "
                       "C])");
}

// The scores [N * windows, heads, M^2, M^2]; the heads.
Result<std::int64_t> readHeads(const TransformerGraph& t, const Contents& attn, const Shape& stream, std::int64_t m) {
  const std::size_t softmax = attn.softmax.front();
  const Shape* s = t.shapeOf(nodeAt(t, softmax).input(0));
  const std::int64_t windows = stream[0] * (roundUp(stream[1], m) / m) * (roundUp(stream[2], m) / m);
  if (s == nullptr || s->size() != 4 || (*s)[0] != windows || (*s)[2] != m * m || (*s)[3] != m * m || (*s)[1] <= 0)
    return t.graph->fail(softmax, "the window attention's scores are " + shapeOrUnknown(s) + "; " + std::to_string(m) +
                                      " x " + std::to_string(m) + " windows of the map " + shapeToString(stream) +
                                      " give [" + std::to_string(windows) + ", heads, " + std::to_string(m * m) + ", " +
                                      std::to_string(m * m) + "]");
  return (*s)[1];
}

// The relative position bias: table[index], one Gather of a [(2M - 1)^2, heads] parameter by an
// index of M^4 entries (a buffer: with export_params=False a graph input, else an initializer whose
// every entry must be a row of the table).
Status checkPositionBias(const TransformerGraph& t, const Contents& attn, std::int64_t m, std::int64_t heads) {
  std::vector<std::size_t> gathers;
  groupWeights(t, attn, gathers);
  if (gathers.size() != 1)
    return t.graph->fail(attn.nodes.front(),
                         "a Swin block's attention adds one relative position bias (a Gather of "
                         "its table); this one has " +
                             std::to_string(gathers.size()));
  const std::size_t gather = gathers.front();
  const onnx::NodeProto& node = nodeAt(t, gather);
  const Shape* table = t.shapeOf(node.input(0));
  const Shape* index = t.shapeOf(node.input(1));
  const std::int64_t rows = (2 * m - 1) * (2 * m - 1);
  if (table == nullptr || *table != Shape{rows, heads})
    return t.graph->fail(gather, "the relative position bias table " + quoteText(node.input(0), 60) + " is " +
                                     shapeOrUnknown(table) + "; a window of " + std::to_string(m) + " with " +
                                     std::to_string(heads) + " heads has [" + std::to_string(rows) + ", " +
                                     std::to_string(heads) + "]");
  if (index == nullptr || index->size() != 1 || (*index)[0] != m * m * m * m)
    return t.graph->fail(gather, "the relative position index " + quoteText(node.input(1), 60) + " is " +
                                     shapeOrUnknown(index) + "; a window of " + std::to_string(m) + " has [" +
                                     std::to_string(m * m * m * m) + "] (every pair of its positions)");
  if (const Constant* values = t.graph->constant(node.input(1)))
    for (std::size_t k = 0; k < values->values.size(); ++k)
      if (!(values->values[k] >= 0 && values->values[k] < static_cast<double>(rows)))
        return t.graph->fail(gather, "the relative position index " + quoteText(node.input(1), 60) + " has " +
                                         numberText(values->values[k]) + " at entry " + std::to_string(k) +
                                         ", outside the table's rows [0, " + std::to_string(rows) + ")");
  return Status::ok();
}

// One roll's shift: torch.roll(x, -s) is Concat(x[s:], x[:s]) (before the attention), the way back
// Concat(x[-s:], x[:-s]) (after it); the shift is the part rolled around.
Result<std::int64_t> rollShift(const TransformerGraph& t, std::size_t concat, bool forward) {
  const onnx::NodeProto& node = nodeAt(t, concat);
  const Shape* part = node.input_size() == 2 ? t.shapeOf(node.input(forward ? 1 : 0)) : nullptr;
  std::int64_t axis = intAttribute(node, "axis", 0);
  if (part != nullptr && axis < 0) axis += static_cast<std::int64_t>(part->size());
  if (part == nullptr || part->size() != 4 || (axis != 1 && axis != 2))
    return t.graph->fail(concat,
                         "a Swin block's roll is a Concat of two slices of the [N, H, W, C] map along H "
                         "or W");
  return (*part)[static_cast<std::size_t>(axis)];
}

// The shift (0: no roll) and the shift mask: a shifted block rolls along H and W before the
// attention and back after it, and adds one mask [1, windows, 1, M^2, M^2] to the scores (torchvision
// makes it from shapes only: no data, static to the step, not an activation).
Result<std::int64_t> readShift(const TransformerGraph& t, const Contents& attn, std::int64_t m, std::int64_t windows) {
  const std::size_t softmax = attn.softmax.front();
  std::vector<std::size_t> rolls = nodesOf(t, attn, "Concat"), masks;
  // The mask is what is added to the scores viewed per image, [N, windows, heads, L, L]; a constant
  // added elsewhere (LayerNorm's epsilon below opset 17) is not one.
  for (std::size_t i : nodesOf(t, attn, "Add")) {
    const onnx::NodeProto& node = nodeAt(t, i);
    const Shape* out = t.shapeOf(node.output(0));
    if (i > softmax || out == nullptr || out->size() != 5) continue;
    for (const auto& in : node.input())
      if (!isData(t, in)) masks.push_back(i);
  }
  const auto before = std::count_if(rolls.begin(), rolls.end(), [&](std::size_t i) { return i < softmax; });
  if (rolls.empty() != masks.empty() || (!rolls.empty() && (rolls.size() != 4 || before != 2 || masks.size() != 1)))
    return t.graph->fail(rolls.empty() ? masks.front() : rolls.front(),
                         "a shifted Swin block rolls the map along H and W before the attention and back after it "
                         "(two Concats each) and adds one shift mask to the scores; this block has " +
                             std::to_string(rolls.size()) + " Concats and " + std::to_string(masks.size()) + " masks");
  if (rolls.empty()) return 0;
  std::int64_t shift = 0;
  for (std::size_t i : rolls) {
    auto s = rollShift(t, i, i < softmax);
    if (!s) return s.status();
    if ((shift != 0 && *s != shift) || *s <= 0 || *s >= m)
      return t.graph->fail(i, "this roll shifts by " + std::to_string(*s) +
                                  "; a Swin block rolls by one shift, "
                                  "below the window " +
                                  std::to_string(m) + ", along H and W, forward and back");
    shift = *s;
  }
  const onnx::NodeProto& add = nodeAt(t, masks.front());
  const std::string& maskName = isData(t, add.input(0)) ? add.input(1) : add.input(0);
  const Shape* mask = t.shapeOf(maskName);
  const Shape expected = {1, windows, 1, m * m, m * m};
  if (mask == nullptr || *mask != expected)
    return t.graph->fail(masks.front(), "the shift mask " + quoteText(maskName, 60) + " is " + shapeOrUnknown(mask) +
                                            "; the windows of this block take " + shapeToString(expected) +
                                            " ([1, windows, 1, M^2, M^2])");
  return shift;
}

// The ops and the structure of torchvision's SwinTransformerBlock (V1: pre-norm, dot-product attention
// with a learned bias table).
Status checkBlockStructure(const TransformerGraph& t, const Contents& attn, const Contents& mlp, const Contents& all) {
  for (std::size_t i : all.nodes)
    if (!blockOps().count(nodeAt(t, i).op_type()))
      return t.graph->fail(i,
                           "a swin_block is torchvision's SwinTransformerBlock (V1: LayerNorm, window attention "
                           "with a relative position bias table, GELU MLP); this op is not one of it (Swin V2's "
                           "cosine attention and position bias MLP are not supported)");
  if (!attn.startsWithNorm)
    return t.graph->fail(attn.nodes.front(),
                         "this Swin block does not start with its LayerNorm (pre-norm); "
                         "post-norm blocks (Swin V2's) are not supported");
  if (attn.softmax.size() != 1 || attn.linears.size() != 2 || mlp.linears.size() != 2 || all.norms != 2)
    return t.graph->fail(attn.nodes.front(),
                         "a Swin block is a LayerNorm, a window attention (one Softmax, qkv and proj linears), a "
                         "LayerNorm and an MLP of two linears; this one has " +
                             std::to_string(attn.softmax.size()) + " Softmax, " +
                             std::to_string(attn.linears.size() + mlp.linears.size()) + " linears and " +
                             std::to_string(all.norms) + " LayerNorms");
  if (!mlp.erf && !mlp.tanh)
    return t.graph->fail(mlp.linears.front(), "the Swin block's MLP activation is not GELU (Erf or Tanh form)");
  return Status::ok();
}

Result<LayerSpec> swinBlock(const TransformerGraph& t, const Contents& attn, const Contents& mlp, const Contents& all,
                            const Shape& stream) {
  LayerSpec spec;
  spec.kind = LayerKind::SwinBlock;
  spec.name = groupName(t, all, true);
  if (stream.size() != 4)
    return t.graph->fail(attn.nodes.front(), "a Swin block reads the channels-last map [N, H, W, C]; its input is " +
                                                 shapeToString(stream));
  REMAT_RETURN_IF_ERROR(checkBlockStructure(t, attn, mlp, all));
  auto m = readWindow(t, attn, stream);
  if (!m) return m.status();
  auto heads = readHeads(t, attn, stream, *m);
  if (!heads) return heads.status();
  REMAT_RETURN_IF_ERROR(checkPositionBias(t, attn, *m, *heads));
  const std::int64_t windows = (roundUp(stream[1], *m) / *m) * (roundUp(stream[2], *m) / *m);
  auto shift = readShift(t, attn, *m, windows);
  if (!shift) return shift.status();
  spec.window = *m;
  spec.heads = *heads;
  spec.shift = *shift;
  spec.hidden = linearOut(t, mlp.linears.front());
  REMAT_RETURN_IF_ERROR(requireNoDropout(t, all, "the Swin block"));
  readEpsilon(all, spec);
  return spec;
}

// torchvision's PatchMerging: pad, x[..., 0::2, 0::2, :] and its three neighbours concatenated,
// LayerNorm(4C), Linear(4C, 2C) without bias.
Result<LayerSpec> patchMerging(const TransformerGraph& t, const Contents& c) {
  LayerSpec spec;
  spec.kind = LayerKind::PatchMerging;
  spec.name = groupName(t, c, true);
  const std::vector<std::size_t> concats = nodesOf(t, c, "Concat");
  if (concats.size() != 1 || nodeAt(t, concats.front()).input_size() != 4 || c.norms != 1 || c.linears.size() != 1 ||
      !c.softmax.empty() || !c.convs.empty())
    return t.graph->fail(c.nodes.front(),
                         "between two Swin stages a patch merging is four strided slices of the map, their Concat, a "
                         "LayerNorm and a linear; this part of the graph has " +
                             std::to_string(concats.size()) + " Concats, " + std::to_string(c.norms) +
                             " LayerNorms and " + std::to_string(c.linears.size()) + " linears");
  if (hasBias(t, c.linears.front()))
    return t.graph->fail(c.linears.front(), "a patch merging's reduction is a linear without bias");
  REMAT_RETURN_IF_ERROR(requireNoDropout(t, c, "the patch merging"));
  readEpsilon(c, spec);
  return spec;
}

// norm, permute to NCHW, AdaptiveAvgPool2d(1), flatten, head: named after the modules that compute
// (the norm, the pool, the linear), as the zoo's "norm+avgpool+head".
Result<LayerSpec> swinHead(const TransformerGraph& t, const Contents& c) {
  LayerSpec spec;
  spec.kind = LayerKind::SwinHead;
  Contents named;
  for (std::size_t i : c.nodes) {
    const std::string& op = nodeAt(t, i).op_type();
    if (op != "Transpose" && op != "Flatten" && op != "Reshape" && op != "Squeeze") named.nodes.push_back(i);
  }
  const bool pooled = !nodesOf(t, c, "GlobalAveragePool").empty() || !nodesOf(t, c, "ReduceMean").empty();
  if (c.norms != 1 || c.linears.size() != 1 || !pooled || named.nodes.empty())
    return t.graph->fail(c.nodes.front(),
                         "after the last Swin block the head is a LayerNorm, an average pool over the map and one "
                         "linear; this part of the graph has " +
                             std::to_string(c.norms) + " LayerNorms and " + std::to_string(c.linears.size()) +
                             " linears");
  if (!hasBias(t, c.linears.front()))
    return t.graph->fail(c.linears.front(), "the Swin head's linear has a bias (swin_head models one)");
  spec.name = groupName(t, named, false);
  spec.outFeatures = linearOut(t, c.linears.front());
  REMAT_RETURN_IF_ERROR(requireNoDropout(t, c, "the head"));
  readEpsilon(c, spec);
  return spec;
}

// A Transpose's perm is a permutation of its tensor's axes, and its output is its input permuted (the
// declared value_info of a tensor ONNX's pass could not infer is not checked against the perm).
Status checkPerm(const TransformerGraph& t, std::size_t i, const Shape& out) {
  const onnx::NodeProto& node = nodeAt(t, i);
  const auto perm = intsAttribute(node, "perm");
  const Shape* in = t.shapeOf(node.input(0));
  std::vector<bool> seen(out.size(), false);
  bool ok = perm && in != nullptr && perm->size() == out.size() && in->size() == out.size();
  for (std::size_t k = 0; ok && k < perm->size(); ++k) {
    const std::int64_t axis = (*perm)[k];
    ok = axis >= 0 && axis < static_cast<std::int64_t>(out.size()) && !seen[static_cast<std::size_t>(axis)] &&
         (*in)[static_cast<std::size_t>(axis)] == out[k];
    if (ok) seen[static_cast<std::size_t>(axis)] = true;
  }
  if (!ok)
    return t.graph->fail(i, "this Transpose's perm is not a permutation of its input " + shapeOrUnknown(in) +
                                " to its output " + shapeToString(out));
  return Status::ok();
}

// Every data op's output has a shape after ONNX's inference (an op whose input shape ONNX could not
// infer, a Transpose whose perm does not fit its input, is not checked by the strict pass), and a
// LayerNorm normalises the last axis (the channels of the channels-last map).
Status checkSwinNodes(const TransformerGraph& t, const Contents& c) {
  for (std::size_t i : c.nodes) {
    const onnx::NodeProto& node = nodeAt(t, i);
    const Shape* out = node.output_size() > 0 ? t.shapeOf(node.output(0)) : nullptr;
    if (out == nullptr)
      return t.graph->fail(i, "ONNX's shape inference leaves this op's output without a shape at input " +
                                  shapeToString(t.inputShape) + " (its inputs do not chain?)");
    const auto rank = static_cast<std::int64_t>(out->size());
    const std::int64_t axis = intAttribute(node, "axis", -1);
    if (node.op_type() == "LayerNormalization" && axis != -1 && axis != rank - 1)
      return t.graph->fail(i, "a Swin LayerNorm normalises the last axis (the channels); this one's axis is " +
                                  std::to_string(axis) + " of " + std::to_string(rank));
    if (node.op_type() == "Transpose") REMAT_RETURN_IF_ERROR(checkPerm(t, i, *out));
  }
  return Status::ok();
}

Result<LayerSpec> swinLayer(const TransformerGraph& t, const std::vector<Piece>& pieces, const SwinGroup& g,
                            const Contents& all, const Shape& stream) {
  switch (g.part) {
    case SwinPart::Embedding: return swinEmbedding(t, all);
    case SwinPart::Merging: return patchMerging(t, all);
    case SwinPart::Head: return swinHead(t, all);
    case SwinPart::Block: break;
  }
  return swinBlock(t, readPieces(t, pieces, g.begin, g.attnEnd), readPieces(t, pieces, g.attnEnd, g.end), all, stream);
}

}  // namespace

bool isSwinGraph(const TransformerGraph& t) {
  for (std::size_t i : t.dataNodes) {
    const onnx::NodeProto& conv = nodeAt(t, i);
    if (conv.op_type() != "Conv" || conv.input(0) != t.input) continue;
    for (std::size_t j : t.dataNodes) {
      const onnx::NodeProto& next = nodeAt(t, j);
      const auto perm = intsAttribute(next, "perm");
      if (next.op_type() == "Transpose" && next.input(0) == conv.output(0) && perm &&
          *perm == std::vector<std::int64_t>{0, 2, 3, 1})
        return true;
    }
  }
  return false;
}

Result<std::vector<LayerSpec>> swinLayers(const TransformerGraph& t, const std::vector<Piece>& pieces,
                                          std::vector<std::size_t>& firstNodes) {
  auto groups = swinGroups(t, pieces);
  if (!groups) return groups.status();
  std::vector<LayerSpec> layers;
  std::set<std::string> counted;
  Shape stream = t.inputShape;
  for (const SwinGroup& g : *groups) {
    const Contents all = readPieces(t, pieces, g.begin, g.end);
    REMAT_RETURN_IF_ERROR(checkSwinNodes(t, all));
    Result<LayerSpec> spec = swinLayer(t, pieces, g, all, stream);
    if (!spec) return spec.status();
    // A block whose padded map is one window cannot shift (torchvision sets its shift to 0, so the
    // graph has no roll): it keeps the stage's alternation, as torchvision's module and the zoo do.
    const LayerSpec* prev = layers.empty() ? nullptr : &layers.back();
    if (spec->kind == LayerKind::SwinBlock && spec->shift == 0 && roundUp(stream[1], spec->window) <= spec->window &&
        roundUp(stream[2], spec->window) <= spec->window && prev != nullptr && prev->kind == LayerKind::SwinBlock &&
        prev->shift == 0)
      spec->shift = spec->window / 2;
    std::vector<std::size_t> gathers;
    std::set<std::string> own;
    for (const auto& w : groupWeights(t, all, gathers))
      if (!counted.count(w)) own.insert(w);
    Shape output;
    REMAT_RETURN_IF_ERROR(checkParameters(t, *spec, stream, all.nodes.front(), weightElements(t, own), output));
    counted.insert(own.begin(), own.end());
    stream = output;
    layers.push_back(*std::move(spec));
    firstNodes.push_back(all.nodes.front());
  }
  return layers;
}

}  // namespace remat::onnx_import
