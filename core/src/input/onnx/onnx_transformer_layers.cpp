// Transformers in: what each piece of the residual stream holds (attention, MLP, norms, embedding
// lookups, the head), the pieces grouped into the chain's transformer kinds, and each layer's fields
// read from its ops (onnx_transformer.hpp). A layer's parameter count must be what its ops read.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "onnx_transformer.hpp"
#include "remat/base/text.hpp"
#include "remat/model/operators.hpp"

namespace remat::onnx_import {
namespace {

std::optional<double> scalarOf(const TransformerGraph& t, const std::string& tensor) {
  return constantScalar(t, tensor, false);
}

}  // namespace

// The parameters a non-data tensor is computed from (a Transpose of a weight, an Expand of the class
// token, a Gather from the position table).
// `gathers` collects the lookups on the way (the position and token-type tables' Gathers read no data).
// Each tensor is visited once: shape plumbing (Swin's shift masks) is a DAG whose paths multiply.
void traceWeights(const TransformerGraph& t, const std::string& tensor, std::set<std::string>& out,
                  std::vector<std::size_t>* gathers) {
  std::vector<std::string> stack = {tensor};
  std::set<std::string> seen;
  while (!stack.empty()) {
    const std::string name = std::move(stack.back());
    stack.pop_back();
    if (name.empty() || t.data.count(name) || !seen.insert(name).second) continue;
    if (t.weights.count(name)) {
      out.insert(name);
      continue;
    }
    auto it = t.producer.find(name);
    if (it == t.producer.end()) continue;
    const onnx::NodeProto& node = nodeAt(t, it->second);
    if (gathers != nullptr && node.op_type() == "Gather" && node.input_size() == 2 && t.weights.count(node.input(0)) &&
        std::find(gathers->begin(), gathers->end(), it->second) == gathers->end())
      gathers->push_back(it->second);
    for (int k = node.input_size() - 1; k >= 0; --k) stack.push_back(node.input(k));
  }
}

bool isData(const TransformerGraph& t, const std::string& tensor) { return t.data.count(tensor) > 0; }

namespace {

// The Softmax that reads a tensor directly (the scores' mask is added or applied just before it).
bool feedsSoftmax(const TransformerGraph& t, const std::string& tensor) {
  for (std::size_t i : t.dataNodes) {
    const onnx::NodeProto& node = nodeAt(t, i);
    if (node.op_type() == "Softmax" && node.input(0) == tensor) return true;
  }
  return false;
}

// A MatMul or Gemm with one data operand and one computed from parameters: a linear.
bool isLinear(const TransformerGraph& t, const onnx::NodeProto& node) {
  if ((node.op_type() != "MatMul" && node.op_type() != "Gemm") || node.input_size() < 2) return false;
  return isData(t, node.input(0)) != isData(t, node.input(1));
}

void readNode(const TransformerGraph& t, std::size_t i, Contents& c) {
  const onnx::NodeProto& node = nodeAt(t, i);
  const std::string& op = node.op_type();
  c.nodes.push_back(i);
  bool mask = false;
  if (op == "Softmax") c.softmax.push_back(i);
  if (op == "Where" ||
      (op == "Add" && feedsSoftmax(t, node.output(0)) && !(isData(t, node.input(0)) && isData(t, node.input(1)))))
    mask = true, c.masks.push_back(i);
  if (isLinear(t, node)) c.linears.push_back(i);
  if (op == "Conv") c.convs.push_back(i);
  if (op == "Gather" && node.input_size() == 2 && !isData(t, node.input(0))) c.tableGathers.push_back(i);
  if ((op == "Gather" || op == "Slice") && isData(t, node.input(0))) c.tokenPicks.push_back(i);
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss" || op == "LogSoftmax") c.losses.push_back(i);
  if (op == "LayerNormalization") c.epsilons.push_back(floatAttribute(node, "epsilon", 1e-5));
  if (op == "Sqrt") {
    // torch's decomposition: Sqrt(Add(ReduceMean(Pow(x - mean, 2)), epsilon))
    auto add = t.producer.find(node.input(0));
    if (add != t.producer.end() && nodeAt(t, add->second).op_type() == "Add")
      for (const auto& in : nodeAt(t, add->second).input())
        if (auto eps = scalarOf(t, in)) c.epsilons.push_back(*eps);
  }
  if (op == "Relu") c.relu = true;
  if (op == "Erf") c.erf = true;
  if (op == "Tanh") c.tanh = true;
  if (op == "Gelu") (stringAttribute(node, "approximate", "none") == "tanh" ? c.tanh : c.erf) = true;  // opset 20
  if (op == "Dropout") {
    std::optional<double> ratio = node.input_size() > 1 ? scalarOf(t, node.input(1)) : std::nullopt;
    c.dropouts.push_back(ratio ? *ratio : floatAttribute(node, "ratio", 0.5));
  }
  if (mask || op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss") return;  // masks, labels
  for (const auto& in : node.input())
    if (!isData(t, in)) traceWeights(t, in, c.weights, &c.tableGathers);
}

}  // namespace

Contents readPieces(const TransformerGraph& t, const std::vector<Piece>& pieces, std::size_t begin, std::size_t end) {
  Contents c;
  for (std::size_t p = begin; p < end; ++p)
    for (std::size_t i : pieces[p].nodes) readNode(t, i, c);
  c.norms = std::count_if(c.nodes.begin(), c.nodes.end(),
                          [&](std::size_t i) { return nodeAt(t, i).op_type() == "LayerNormalization"; }) +
            std::count_if(c.nodes.begin(), c.nodes.end(), [&](std::size_t i) {
              return nodeAt(t, i).op_type() == "ReduceMean";
            }) / 2;
  if (begin < end && !pieces[begin].nodes.empty()) {
    const std::string& first = nodeAt(t, pieces[begin].nodes.front()).op_type();
    c.startsWithNorm = first == "LayerNormalization" || first == "ReduceMean";
  }
  return c;
}

std::uint64_t weightElements(const TransformerGraph& t, const std::set<std::string>& weights) {
  std::uint64_t total = 0;
  for (const auto& w : weights)
    if (const Shape* shape = t.shapeOf(w)) total += elementCount(*shape);
  return total;
}

// The width a linear writes: MatMul's [.., in] x [in, out]; Gemm's B, transposed or not.
std::int64_t linearOut(const TransformerGraph& t, std::size_t i) {
  const onnx::NodeProto& node = nodeAt(t, i);
  const std::string& operand = isData(t, node.input(0)) ? node.input(1) : node.input(0);
  const Shape* shape = t.shapeOf(operand);
  if (shape == nullptr || shape->size() != 2) return 0;
  if (node.op_type() == "Gemm") return intAttribute(node, "transB", 0) != 0 ? (*shape)[0] : (*shape)[1];
  return shape->back();
}

// A float32 attribute or constant as its shortest decimal (0.1, not 0.10000000149011612).
double float32Value(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.7g", value);  // a float32 has 7 significant digits
  return std::strtod(text, nullptr);
}

// A common dropout probability; a group with two different ones is not one chain layer.
Result<double> oneDropout(const TransformerGraph& t, const Contents& c, const std::string& what) {
  for (double p : c.dropouts)
    if (p != c.dropouts.front())
      return t.graph->fail(c.nodes.front(), what + " has dropouts of p " + numberText(c.dropouts.front()) + " and " +
                                                numberText(p) + "; the chain's layer takes one p");
  return c.dropouts.empty() ? 0.0 : float32Value(c.dropouts.front());
}

namespace {

// The layer's name: the module path its nodes share, or the paths of its modules joined by '+'.
// A merge's name ends in its op ("ln_f.add_1"): the module is the path before it.
std::string modulePath(const onnx::NodeProto& node, std::size_t index) {
  std::string path = layerNameOf(node, index);
  const std::size_t dot = path.rfind('.');
  if (dot == std::string::npos) return path;
  std::string last = path.substr(dot + 1), op = node.op_type();
  std::transform(op.begin(), op.end(), op.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const std::size_t underscore = last.find('_');
  if (last.substr(0, underscore) == op &&
      (underscore == std::string::npos ||
       std::all_of(last.begin() + static_cast<std::ptrdiff_t>(underscore) + 1, last.end(), ::isdigit)))
    path.resize(dot);
  return path;
}

}  // namespace

std::string groupName(const TransformerGraph& t, const Contents& c, bool whole) {
  std::vector<std::size_t> nodes = c.tableGathers;
  nodes.insert(nodes.end(), c.nodes.begin(), c.nodes.end());
  std::sort(nodes.begin(), nodes.end());
  std::vector<std::string> paths;
  for (std::size_t i : nodes) {
    const onnx::NodeProto& node = nodeAt(t, i);
    if (node.name().empty() || node.name().front() != '/' || node.name().find('/', 1) == std::string::npos) continue;
    const std::string path = modulePath(node, i);
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
  }
  if (paths.empty()) return "layer_" + std::to_string(c.nodes.front());
  std::string prefix = paths.front();
  for (const auto& p : paths)
    while (!prefix.empty() && !(p == prefix || p.rfind(prefix + ".", 0) == 0))
      prefix = prefix.find('.') == std::string::npos ? "" : prefix.substr(0, prefix.rfind('.'));
  if (whole && !prefix.empty()) return prefix;
  std::string name;
  std::set<std::string> seen;
  for (const auto& p : paths) {
    std::string rest = prefix.empty() ? p : p == prefix ? "" : p.substr(prefix.size() + 1);
    if (!prefix.empty()) rest = rest.substr(0, rest.find('.'));
    if (rest.empty() || !seen.insert(rest).second) continue;
    name += (name.empty() ? "" : "+") + rest;
  }
  return prefix.empty() ? name : name.empty() ? prefix : prefix + "." + name;
}

namespace {

// Whether a non-data tensor is computed from a Range (the position ids of a position lookup).
bool fromRange(const TransformerGraph& t, const std::string& tensor, int depth = 0) {
  auto it = t.producer.find(tensor);
  if (it == t.producer.end() || depth > 16 || isData(t, tensor)) return false;
  const onnx::NodeProto& node = nodeAt(t, it->second);
  if (node.op_type() == "Range") return true;
  return std::any_of(node.input().begin(), node.input().end(),
                     [&](const std::string& in) { return fromRange(t, in, depth + 1); });
}

// The tables' [rows, width], each a Gather from a rank-2 parameter of one width.
Status readTables(const TransformerGraph& t, const Contents& c, LayerSpec& spec) {
  for (std::size_t i : c.tableGathers) {
    const onnx::NodeProto& node = nodeAt(t, i);
    const Shape* table = t.shapeOf(node.input(0));
    const bool ids = node.input(1) == t.input;
    if (table == nullptr || table->size() != 2 || intAttribute(node, "axis", 0) != 0)
      return t.graph->fail(i, "an embedding is a Gather along axis 0 of a [rows, width] table; this one reads " +
                                  (table ? shapeToString(*table) : std::string("a table of unknown shape")));
    if (spec.width != 0 && (*table)[1] != spec.width)
      return t.graph->fail(i, "the table " + shapeToString(*table) + " is not as wide as the embedding's others (" +
                                  std::to_string(spec.width) + ")");
    spec.width = (*table)[1];
    if (ids) {
      const Shape* in = t.shapeOf(node.input(1));
      if (in == nullptr || *in != t.inputShape)
        return t.graph->fail(i, "the token ids are not the input's [batch, sequence]");
      spec.vocab = (*table)[0];
    } else if (fromRange(t, node.input(1))) {
      spec.positions = (*table)[0];
    } else {
      spec.segments = (*table)[0];
    }
  }
  if (spec.vocab == 0)
    return t.graph->fail(c.nodes.front(), "the embedding has no Gather of the token ids from a [vocab, width] table");
  if (spec.positions == 0)
    return t.graph->fail(c.nodes.front(),
                         "the embedding has no position table (a Gather of Range's position ids); "
                         "token_embedding models a learned position table");
  return Status::ok();
}

Result<LayerSpec> embeddingLayer(const TransformerGraph& t, const Contents& c) {
  LayerSpec spec;
  spec.name = groupName(t, c, false);
  if (t.tokens) {
    spec.kind = LayerKind::TokenEmbedding;
    REMAT_RETURN_IF_ERROR(readTables(t, c, spec));
    spec.embeddingNorm = c.norms > 0;
  } else {
    spec.kind = LayerKind::PatchEmbedding;
    if (c.convs.size() != 1 || c.linears.size() > 0)
      return t.graph->fail(c.nodes.front(),
                           "a patch embedding is one Conv (kernel = stride) before the first "
                           "attention; this part of the graph has " +
                               std::to_string(c.convs.size()) + " Conv and " + std::to_string(c.linears.size()) +
                               " linears");
    const onnx::NodeProto& conv = nodeAt(t, c.convs.front());
    const auto kernel = intsAttribute(conv, "kernel_shape");
    const auto strides = intsAttribute(conv, "strides");
    const Shape* weight = t.shapeOf(conv.input(1));
    if (!kernel || kernel->size() != 2 || (*kernel)[0] != (*kernel)[1] || !strides || *strides != *kernel ||
        weight == nullptr || weight->size() != 4)
      return t.graph->fail(c.convs.front(), "a patch embedding's Conv has a square kernel equal to its stride");
    spec.kernel = (*kernel)[0];
    spec.width = (*weight)[0];
  }
  auto p = oneDropout(t, c, "the embedding");
  if (!p) return p.status();
  spec.dropoutP = *p;
  if (!c.epsilons.empty()) spec.epsilon = float32Value(c.epsilons.front());
  return spec;
}

// The attention's mask (a Where, or an Add of a constant, just before the Softmax) must broadcast
// to the scores: [.., S, S] at the sizes given.
Status checkMasks(const TransformerGraph& t, const Contents& c) {
  for (std::size_t i : c.masks) {
    const onnx::NodeProto& node = nodeAt(t, i);
    const Shape* scores = t.shapeOf(node.output(0));
    for (const auto& in : node.input()) {
      const Shape* mask = t.shapeOf(in);
      if (isData(t, in) || mask == nullptr || elementCount(*mask) == 1) continue;
      bool fits = scores != nullptr && mask->size() <= scores->size() && mask->back() == scores->back();
      for (std::size_t k = 1; fits && k <= mask->size(); ++k) {
        const std::int64_t m = (*mask)[mask->size() - k], s = (*scores)[scores->size() - k];
        fits = m == s || m == 1;
      }
      if (!fits)
        return t.graph->fail(i, "the attention mask " + quoteText(in, 60) + " is " + shapeToString(*mask) +
                                    ", which does not fit the scores " +
                                    (scores ? shapeToString(*scores) : std::string("(shape unknown)")) +
                                    " (a mask is [.., S, S] for the sequence S)");
    }
  }
  return Status::ok();
}

// heads from the Softmax's input: [N, heads, S, S] (nanoGPT, Hugging Face) or [N * heads, S, S]
// (nn.MultiheadAttention).
Result<std::int64_t> headsOf(const TransformerGraph& t, std::size_t softmax, std::int64_t seq) {
  const Shape* scores = t.shapeOf(nodeAt(t, softmax).input(0));
  const std::int64_t n = t.batch;
  if (scores != nullptr && scores->size() == 4 && (*scores)[0] == n && (*scores)[2] == seq && (*scores)[3] == seq)
    return (*scores)[1];
  if (scores != nullptr && scores->size() == 3 && (*scores)[0] % n == 0 && (*scores)[1] == seq && (*scores)[2] == seq)
    return (*scores)[0] / n;
  return t.graph->fail(softmax, "the attention's scores are " +
                                    (scores ? shapeToString(*scores) : std::string("of unknown shape")) +
                                    "; expected [N, heads, S, S] or [N * heads, S, S] with N = " + std::to_string(n) +
                                    ", S = " + std::to_string(seq));
}

Result<LayerSpec> blockLayer(const TransformerGraph& t, const Contents& attn, const Contents& mlp, const Contents& all,
                             const Shape& stream) {
  LayerSpec spec;
  spec.kind = LayerKind::TransformerBlock;
  spec.name = groupName(t, all, true);
  if (attn.softmax.size() != 1 || all.norms != 2 || mlp.linears.size() != 2)
    return t.graph->fail(attn.nodes.front(),
                         "a transformer layer is one attention (a Softmax), an MLP (two linears) and two "
                         "LayerNorms; this one has " +
                             std::to_string(attn.softmax.size()) + " Softmax, " + std::to_string(mlp.linears.size()) +
                             " linears after the attention and " + std::to_string(all.norms) + " LayerNorms");
  auto heads = headsOf(t, attn.softmax.front(), stream[1]);
  if (!heads) return heads.status();
  spec.heads = *heads;
  spec.hidden = linearOut(t, mlp.linears.front());
  REMAT_RETURN_IF_ERROR(checkMasks(t, attn));
  spec.causal = !attn.masks.empty();
  spec.preNorm = attn.startsWithNorm;
  spec.reluMlp = mlp.relu;
  if (!mlp.relu && !mlp.erf && !mlp.tanh)
    return t.graph->fail(mlp.linears.front(), "the MLP's activation is neither GELU (Erf or Tanh form) nor ReLU");
  auto p = oneDropout(t, all, "the layer");
  if (!p) return p.status();
  spec.dropoutP = *p;
  if (!all.epsilons.empty()) spec.epsilon = float32Value(all.epsilons.front());
  return spec;
}

}  // namespace

// Whether the linear's output gets a bias: Gemm's C, or an Add of a parameter.
bool hasBias(const TransformerGraph& t, std::size_t linear) {
  const onnx::NodeProto& node = nodeAt(t, linear);
  if (node.op_type() == "Gemm") return node.input_size() > 2 && !node.input(2).empty();
  for (std::size_t i : t.dataNodes) {
    const onnx::NodeProto& next = nodeAt(t, i);
    if (next.op_type() == "Add" && (next.input(0) == node.output(0) || next.input(1) == node.output(0))) {
      std::set<std::string> w;
      for (const auto& in : next.input()) traceWeights(t, in, w);
      return !w.empty();
    }
  }
  return false;
}

namespace {

Result<LayerSpec> headLayer(const TransformerGraph& t, const Contents& c, const std::set<std::string>& tables) {
  LayerSpec spec;
  spec.name = groupName(t, c, false);
  if (c.linears.empty())
    return t.graph->fail(c.nodes.front(),
                         "the part after the last transformer layer has no linear; expected a "
                         "language-model head or a classification head");
  const std::size_t linear = c.linears.back();
  spec.norm = c.norms > 0;
  if (!c.epsilons.empty()) spec.epsilon = float32Value(c.epsilons.front());
  if (!c.tokenPicks.empty() || !t.tokens) {
    spec.kind = LayerKind::ClsHead;
    if (c.linears.size() != 1) return t.graph->fail(c.linears.back(), "a classification head is one linear on token 0");
    spec.outFeatures = linearOut(t, linear);
    spec.tanhOut = c.tanh;
    spec.bias = hasBias(t, linear);
    return spec;
  }
  spec.kind = LayerKind::LmHead;
  spec.vocab = linearOut(t, linear);
  std::set<std::string> w;
  const onnx::NodeProto& node = nodeAt(t, linear);
  for (const auto& in : node.input()) traceWeights(t, in, w);
  spec.tied = !w.empty() && std::all_of(w.begin(), w.end(), [&](const std::string& n) { return tables.count(n) > 0; });
  return spec;
}

}  // namespace

// The kind's own parameter count for these fields must be what the ops read.
Status checkParameters(const TransformerGraph& t, const LayerSpec& spec, const Shape& input, std::size_t node,
                       std::uint64_t counted, Shape& output) {
  ChainLayer layer;
  Status inferred = operatorInfo(spec.kind).infer(spec, input, t.graph->dtype(), layer);
  if (!inferred.isOk())
    return t.graph->fail(
        node, "layer " + quoteText(spec.name) + " (" + std::string(kindName(spec.kind)) + "): " + inferred.message());
  if (layer.paramCount != counted)
    return t.graph->fail(node, "layer " + quoteText(spec.name) + " (" + std::string(kindName(spec.kind)) + ") reads " +
                                   std::to_string(counted) + " parameters; the kind with the fields read (" + "width " +
                                   std::to_string(input.back()) + ") has " + std::to_string(layer.paramCount) +
                                   " (a linear without bias, or a part the kind does not model?)");
  output = layer.outputShape;
  return Status::ok();
}

namespace {

bool hasSoftmax(const TransformerGraph& t, const Piece& piece) {
  return std::any_of(piece.nodes.begin(), piece.nodes.end(),
                     [&](std::size_t i) { return nodeAt(t, i).op_type() == "Softmax"; });
}

// A piece of LayerNorm's ops only (LayerNormalization, or its decomposition and affine product).
bool normPiece(const TransformerGraph& t, const Piece& piece) {
  static const std::set<std::string> ops = {
      "LayerNormalization", "ReduceMean", "Sub", "Pow", "Add", "Sqrt", "Div", "Mul"};
  return std::all_of(piece.nodes.begin(), piece.nodes.end(),
                     [&](std::size_t i) { return ops.count(nodeAt(t, i).op_type()) > 0; });
}

bool startsNorm(const TransformerGraph& t, const Piece& piece) {
  const std::string& op = nodeAt(t, piece.nodes.front()).op_type();
  return op == "LayerNormalization" || op == "ReduceMean";
}

// One transformer layer's pieces: [begin, attnEnd) the attention, [attnEnd, end) the MLP (with,
// post-norm, the LayerNorm after it).
struct BlockSpan {
  std::size_t begin = 0, attnEnd = 0, end = 0;
};

Result<std::vector<BlockSpan>> blockSpans(const TransformerGraph& t, const std::vector<Piece>& pieces) {
  std::vector<BlockSpan> spans;
  std::size_t p = 0;
  while (p < pieces.size() && !hasSoftmax(t, pieces[p])) ++p;
  while (p < pieces.size() && hasSoftmax(t, pieces[p])) {
    BlockSpan span{p, p + 1, p + 1};
    const bool preNorm = readPieces(t, pieces, p, p + 1).startsWithNorm;
    std::size_t q = p + 1;
    while (q < pieces.size() && !hasSoftmax(t, pieces[q]) &&
           readPieces(t, pieces, span.attnEnd, q + 1).linears.size() < 2)
      ++q;
    if (q >= pieces.size() || hasSoftmax(t, pieces[q]))
      return t.graph->fail(pieces[p].nodes.front(), "this attention has no MLP (two linears) after it");
    span.end = q + 1;
    // Post-norm (BERT, nn.TransformerEncoderLayer's default): the LayerNorm after the MLP's add, in
    // pieces when decomposed (its Sub, its Div and its affine product are articulation tensors).
    while (!preNorm && span.end < pieces.size() && normPiece(t, pieces[span.end]) &&
           readPieces(t, pieces, span.attnEnd, span.end).norms + readPieces(t, pieces, span.end, span.end + 1).norms <=
               2 &&
           !(readPieces(t, pieces, span.attnEnd, span.end).norms == 2 && startsNorm(t, pieces[span.end])))
      span.end += 1;
    spans.push_back(span);
    p = span.end;
  }
  if (spans.empty()) return Status::invalid(t.graph->source() + ": the graph has no attention (Softmax) on the data");
  for (std::size_t q = p; q < pieces.size(); ++q)
    if (hasSoftmax(t, pieces[q]))
      return t.graph->fail(pieces[q].nodes.front(),
                           "this attention is not where a transformer layer can start (after "
                           "the previous layer's MLP)");
  return spans;
}

}  // namespace

Result<std::vector<LayerSpec>> transformerLayers(const TransformerGraph& t, const std::vector<Piece>& pieces,
                                                 std::vector<std::size_t>& firstNodes) {
  auto spans = blockSpans(t, pieces);
  if (!spans) return spans.status();
  std::vector<LayerSpec> layers;
  std::set<std::string> counted;
  Shape stream = t.inputShape;
  auto add = [&](const LayerSpec& spec, const Contents& c) -> Status {
    std::set<std::string> own;
    for (const auto& w : c.weights)
      if (!counted.count(w)) own.insert(w);
    Shape output;
    REMAT_RETURN_IF_ERROR(checkParameters(t, spec, stream, c.nodes.front(), weightElements(t, own), output));
    counted.insert(own.begin(), own.end());
    stream = output;
    layers.push_back(spec);
    firstNodes.push_back(c.nodes.front());
    return Status::ok();
  };
  if (spans->front().begin == 0)
    return t.graph->fail(pieces.front().nodes.front(),
                         "the first attention reads the input; a transformer starts "
                         "with an embedding (token ids or image patches)");
  const Contents embedding = readPieces(t, pieces, 0, spans->front().begin);
  auto embed = embeddingLayer(t, embedding);
  if (!embed) return embed.status();
  REMAT_RETURN_IF_ERROR(add(*embed, embedding));
  const std::set<std::string> tables = embedding.weights;
  for (const BlockSpan& span : *spans) {
    const Contents attn = readPieces(t, pieces, span.begin, span.attnEnd);
    const Contents mlp = readPieces(t, pieces, span.attnEnd, span.end);
    const Contents all = readPieces(t, pieces, span.begin, span.end);
    auto block = blockLayer(t, attn, mlp, all, stream);
    if (!block) return block.status();
    REMAT_RETURN_IF_ERROR(add(*block, all));
  }
  if (spans->back().end >= pieces.size())
    return t.graph->fail(pieces.back().nodes.back(),
                         "the graph ends with a transformer layer; expected a head after it");
  const Contents head = readPieces(t, pieces, spans->back().end, pieces.size());
  auto spec = headLayer(t, head, tables);
  if (!spec) return spec.status();
  REMAT_RETURN_IF_ERROR(add(*spec, head));
  return layers;
}

const onnx::NodeProto& nodeAt(const TransformerGraph& t, std::size_t i) {
  return t.graph->proto().node(static_cast<int>(i));
}

std::optional<double> constantScalar(const TransformerGraph& t, const std::string& tensor, bool floatOnly) {
  const onnx::TensorProto* proto = nullptr;
  auto it = t.producer.find(tensor);
  if (it != t.producer.end()) {
    const onnx::NodeProto& node = nodeAt(t, it->second);
    if (node.op_type() != "Constant" || node.attribute_size() != 1 || !node.attribute(0).has_t()) return std::nullopt;
    proto = &node.attribute(0).t();
  } else {
    for (const auto& init : t.graph->proto().initializer())
      if (init.name() == tensor) proto = &init;
  }
  if (proto == nullptr) return std::nullopt;
  const int type = proto->data_type();
  if (floatOnly && type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::FLOAT16 &&
      type != onnx::TensorProto::BFLOAT16)
    return std::nullopt;
  auto value = decodeTensor(*proto, 1);
  if (!value || value->values.size() != 1) return std::nullopt;
  if (floatOnly && !std::isfinite(value->values.front())) return std::nullopt;
  return value->values.front();
}

}  // namespace remat::onnx_import
