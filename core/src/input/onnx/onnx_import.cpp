// The importer's entry points: parse the ModelProto, read its interface, walk the nodes in order
// (constant plumbing is evaluated, data ops converted), cut the result into a chain and check it
// against the chain's own shape inference.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "onnx_graph.hpp"
#include "onnx_transformer.hpp"
#include "remat/base/text.hpp"
#include "remat/input/input_file.hpp"

namespace remat {
namespace onnx_import {
namespace {

Status convertDataNode(Graph& g, std::size_t node);

bool isRandomOp(const std::string& opType) {
  return opType == "Bernoulli" || opType == "RandomUniform" || opType == "RandomUniformLike" ||
         opType == "RandomNormal" || opType == "RandomNormalLike";
}

Status unsupported(const Graph& g, std::size_t node) {
  const onnx::NodeProto& n = g.proto().node(static_cast<int>(node));
  // torchvision's StochasticDepth (EfficientNet, ConvNeXt) draws its [N, 1, 1, 1] mask in training
  // mode; torch writes that as a random op (torch 1.13 cannot export it at all). With probability 0
  // it is the identity: the same layers and parameters, without the mask (docs/import.md).
  if (n.domain().empty() && isRandomOp(n.op_type()))
    return g.fail(node, "draws random numbers (" + n.op_type() +
                            "); the importer models no random op but Dropout. torchvision's StochasticDepth "
                            "(EfficientNet, ConvNeXt) exports its training-mode mask this way: export the model "
                            "built with stochastic_depth_prob=0.0 (e.g. torchvision.models.efficientnet_b0("
                            "stochastic_depth_prob=0.0)), which has the same layers and parameters");
  const std::string domain =
      n.domain().empty() || n.domain() == "ai.onnx" ? "" : " of domain " + quoteText(n.domain(), 40);
  return g.fail(node, "the operator " + opTypeText(n.op_type()) + domain + " is not supported; the importer takes " +
                          onnxSupportedOperators());
}

// Only a Conv or an AveragePool takes a Pad's zeros into its own padding.
Status checkPendingPads(const Graph& g, std::size_t node) {
  const onnx::NodeProto& n = g.proto().node(static_cast<int>(node));
  for (int i = 0; i < n.input_size(); ++i)
    if (g.pendingPad(n.input(i)) > 0 && !(i == 0 && (n.op_type() == "Conv" || n.op_type() == "AveragePool")))
      return g.fail(node,
                    "reads the output of a non-zero Pad; only a Conv or an AveragePool can take a Pad into "
                    "its padding");
  return Status::ok();
}

// torch writes a Linear on a 4-D tensor as MatMul(x, Transpose(weight, perm [1, 0])): the transposed
// weight is the same parameters, [in, out].
bool convertWeightTranspose(Graph& g, std::size_t node) {
  const onnx::NodeProto& n = g.proto().node(static_cast<int>(node));
  const Weight* w = g.weight(nodeInput(n, 0));
  const auto perm = intsAttribute(n, "perm");
  if (n.op_type() != "Transpose" || w == nullptr || w->shape.size() != 2 || !perm ||
      *perm != std::vector<std::int64_t>{1, 0})
    return false;
  Weight transposed = *w;
  transposed.shape = {w->shape[1], w->shape[0]};
  g.addWeightAlias(n.output(0), transposed);
  g.countFolded("Transpose");
  return true;
}

// A node reading one of ConvNeXt's channels-last tensors (Graph::markChannelsLast) is one that
// computes along its last axis or elementwise, as torchvision's CNBlock and LayerNorm2d do;
// its outputs are channels-last too (the Transpose back is convertTranspose's).
Status channelsLastRefused(const Graph& g, std::size_t node) {
  return g.fail(node,
                "reads a channels-last tensor (a Transpose perm [0, 2, 3, 1] of an NCHW activation); the "
                "importer reads one only as ConvNeXt does: LayerNormalization over the last axis (or its "
                "decomposition), MatMul with its bias Add, GELU, and Transpose perm [0, 3, 1, 2] back");
}

Result<bool> readsChannelsLast(const Graph& g, std::size_t node) {
  const onnx::NodeProto& n = g.proto().node(static_cast<int>(node));
  bool reads = false;
  for (const auto& input : n.input()) reads = reads || g.isChannelsLast(input);
  if (!reads) return false;
  const std::string& op = n.op_type();
  // An Add of two activations would add an NHWC and an NCHW tensor as if both were NCHW.
  const bool biasAdd =
      op == "Add" && n.input_size() == 2 && !(g.isActivation(n.input(0)) && g.isActivation(n.input(1)));
  // Gelu: GELU as one node (opset 20), elementwise like its Div-Erf pattern below 20.
  if (op == "Transpose" || op == "LayerNormalization" || op == "MatMul" || biasAdd || op == "Div" ||
      op == "ReduceMean" || op == "Gelu")
    return true;
  return channelsLastRefused(g, node);
}

// A node that reads a channels-last tensor: its outputs are channels-last too. Div and ReduceMean
// only as the start of GELU's and LayerNorm's patterns (a lone ReduceMean would average other axes
// than the NCHW reading says).
Status convertChannelsLastNode(Graph& g, std::size_t node) {
  const onnx::NodeProto& n = g.proto().node(static_cast<int>(node));
  const std::size_t before = g.activations().size();
  if (n.op_type() == "Div" || n.op_type() == "ReduceMean") {
    auto pattern = convertPatternNode(g, node);
    if (!pattern) return pattern.status();
    if (!*pattern) return channelsLastRefused(g, node);
  } else {
    REMAT_RETURN_IF_ERROR(convertDataNode(g, node));
  }
  for (std::size_t a = before; a < g.activations().size(); ++a) g.markChannelsLast(g.activations()[a].tensor);
  g.markChannelsLast(n.output(0));  // a bias Add aliases the MatMul's output
  return Status::ok();
}

Status convertNode(Graph& g, std::size_t node) {
  const onnx::NodeProto& n = g.proto().node(static_cast<int>(node));
  if (g.isFused(node)) return Status::ok();  // part of an earlier node's pattern
  if (!n.domain().empty() && n.domain() != "ai.onnx") return unsupported(g, node);
  if (n.output_size() == 0 || n.output(0).empty()) return g.fail(node, "has no output");
  bool readsData = false;
  for (const auto& input : n.input()) readsData = readsData || g.isActivation(input);
  if (!readsData && convertWeightTranspose(g, node)) return Status::ok();
  if (!readsData || n.op_type() == "Shape") {
    auto handled = g.evaluateConstantNode(node);
    if (!handled) return handled.status();
    if (*handled) return Status::ok();
    if (isLayerOp(n.op_type()) || isViewOp(n.op_type()))
      return g.fail(node, "computes from weights and constants only, not from the model's input");
    return unsupported(g, node);
  }
  REMAT_RETURN_IF_ERROR(checkPendingPads(g, node));
  auto channelsLast = readsChannelsLast(g, node);
  if (!channelsLast) return channelsLast.status();
  if (*channelsLast && n.op_type() != "Transpose") return convertChannelsLastNode(g, node);
  return convertDataNode(g, node);
}

Status convertDataNode(Graph& g, std::size_t node) {
  const onnx::NodeProto& n = g.proto().node(static_cast<int>(node));
  auto pattern = convertPatternNode(g, node);
  if (!pattern) return pattern.status();
  if (*pattern) return Status::ok();
  if (isLayerOp(n.op_type())) return convertLayerNode(g, node);
  if (isViewOp(n.op_type())) return convertViewNode(g, node);
  return unsupported(g, node);
}

// The chain's shape inference (PyTorch's rules) must give what ONNX's rules gave, layer by layer.
Status checkShapes(const Graph& g, const CutLayers& cut, const Chain& chain) {
  for (const ChainLayer& layer : chain.layers) {
    const Shape& expected = cut.outputShapes[layer.specIndex];
    if (layer.outputShape != expected)
      return g.fail(cut.lastNodes[layer.specIndex],
                    "ONNX's rules give the output " + shapeToString(expected) + ", the chain's layer " +
                        quoteText(layer.name) + " (" + std::string(kindName(layer.kind)) + ") gives " +
                        shapeToString(layer.outputShape) +
                        " (ceil-mode pooling where PyTorch's and ONNX's rules differ?)");
  }
  return Status::ok();
}

std::vector<std::pair<std::string, std::size_t>> listed(const std::map<std::string, std::size_t>& counts) {
  return {counts.begin(), counts.end()};
}

Result<OnnxImport> importModel(const onnx::ModelProto& model, const std::string& source,
                               const OnnxImportOptions& options) {
  if (isTransformerGraph(model.graph())) return importTransformerModel(model, source, options);
  if (!options.dims.empty())
    return Status::invalid(source +
                           ": --dim applies to a transformer's inputs (token ids); this model's only "
                           "symbolic dimension may be the batch (--batch)");
  OnnxImport result;
  Graph g(model, source, options);
  REMAT_RETURN_IF_ERROR(g.readInterface(result.summary));
  for (std::size_t node = 0; node < static_cast<std::size_t>(model.graph().node_size()); ++node)
    REMAT_RETURN_IF_ERROR(convertNode(g, node));
  REMAT_RETURN_IF_ERROR(g.checkDeclaredShapes());
  auto cut = cutIntoLayers(g);
  if (!cut) return cut.status();
  ChainSpec& spec = result.spec;
  spec.name = std::filesystem::path(source).stem().string();
  spec.input.shape = g.activations().front().shape;
  spec.input.dtype = g.dtype();
  spec.layers = cut->layers;
  auto chain = buildChain(spec);
  if (!chain) return chain.status().withContext(source);
  REMAT_RETURN_IF_ERROR(checkShapes(g, *cut, *chain));
  OnnxImportSummary& summary = result.summary;
  summary.layers = chain->size();
  for (const ChainLayer& layer : chain->layers) summary.blocks += isComposite(layer.kind) ? 1 : 0;
  summary.paramCount = chain->paramCount();
  summary.weightsInFile = g.weightsInFile();
  summary.folded = listed(g.folded());
  summary.dropped = listed(g.dropped());
  return result;
}

}  // namespace
}  // namespace onnx_import

bool onnxImportAvailable() { return true; }

namespace {

const char* const kNotParsed = ": not an ONNX model, or a truncated one (it does not parse as a ModelProto)";

// Every list in a message is capped and every string of the file quoted and bounded; this is the
// net under them: no message of a hostile file fills a terminal.
constexpr std::size_t kMaxMessageChars = 1500;

Status bounded(const Status& status) {
  const std::string& message = status.message();
  if (message.size() <= kMaxMessageChars) return status;
  return Status(status.code(), message.substr(0, kMaxMessageChars) + "... (" +
                                   std::to_string(message.size() - kMaxMessageChars) + " characters more)");
}

// The checks every parsed model passes before its graph is read.
Result<OnnxImport> importParsed(const onnx::ModelProto& model, const std::string& source,
                                const OnnxImportOptions& options) {
  if (model.ir_version() <= 0 || !model.has_graph())
    return Status::invalid(source + ": not an ONNX model (it has no IR version or no graph)");
  if (model.graph().node_size() == 0) return Status::invalid(source + ": the ONNX graph has no nodes");
  auto imported = onnx_import::importModel(model, source, options);
  if (!imported) return bounded(imported.status());
  return imported;
}

}  // namespace

Result<OnnxImport> importOnnxModel(const std::string& bytes, const std::string& source,
                                   const OnnxImportOptions& options) {
  if (bytes.empty()) return Status::invalid(source + ": the file is empty, not an ONNX model");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return Status::invalid(source + kNotParsed);
  return importParsed(model, source, options);
}

namespace {

// Parsed from the stream, so a model with its weights (VGG's: 0.5 GB) is in memory once.
Status readModelFile(const std::string& path, onnx::ModelProto& model) {
  // Refused before reading: a folder, a device (/dev/zero never ends), a pipe, a file too big.
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error) return Status::io(path + ": cannot open the ONNX model for reading: " + error.message());
  if (!std::filesystem::is_regular_file(status))
    return Status::io(path + ": not a regular file, so not an ONNX model file");
  const std::uint64_t bytes = std::filesystem::file_size(path, error);
  if (!error && bytes > kMaxOnnxFileBytes)
    return Status::invalid(path + ": " + std::to_string(bytes) + " bytes, more than an ONNX model can have (" +
                           std::to_string(kMaxOnnxFileBytes) + ", protobuf's limit)");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io(path + ": cannot open the ONNX model for reading: " + std::strerror(errno));
  if (in.peek() == std::ifstream::traits_type::eof()) {
    if (in.bad()) return Status::io(path + ": read error");
    return Status::invalid(path + ": the file is empty, not an ONNX model");
  }
  if (!model.ParseFromIstream(&in)) {
    if (in.bad()) return Status::io(path + ": read error");
    return Status::invalid(path + kNotParsed);
  }
  return Status::ok();
}

}  // namespace

Result<OnnxImport> importOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  onnx::ModelProto model;
  REMAT_RETURN_IF_ERROR(readModelFile(path, model));
  return importParsed(model, path, options);
}

namespace {

// What onnxSymbolicDimensions lists, bounded: a hostile model's names become the explorer's fields.
constexpr std::size_t kMaxSymbolicDimensions = 16;
constexpr std::size_t kMaxDimensionNameChars = 64;

Result<std::vector<std::string>> symbolicDimensions(const onnx::ModelProto& model, const std::string& source) {
  std::vector<std::string> names;
  // Only a transformer's inputs may have symbolic dimensions besides the batch (import.md).
  if (!model.has_graph() || !onnx_import::isTransformerGraph(model.graph())) return names;
  std::set<std::string> batches;  // a name an input's first dimension has is a batch: --batch's
  for (const auto& input : model.graph().input())
    if (input.type().tensor_type().shape().dim_size() > 0)
      batches.insert(input.type().tensor_type().shape().dim(0).dim_param());
  for (const auto& input : model.graph().input()) {
    const auto& dims = input.type().tensor_type().shape().dim();
    for (int i = 1; i < dims.size(); ++i) {
      const std::string& name = dims[i].dim_param();
      if (dims[i].has_dim_value() || name.empty() || batches.count(name)) continue;
      if (std::find(names.begin(), names.end(), name) != names.end()) continue;
      const bool control = std::any_of(name.begin(), name.end(), [](unsigned char c) { return c < 0x20 || c == 0x7F; });
      if (name.size() > kMaxDimensionNameChars || control)
        return Status::invalid(source + ": input " + quoteText(input.name(), 40) + ", dimension " + std::to_string(i) +
                               ": the symbolic name " + quoteText(name, 40) + " is not a field's name (at most " +
                               std::to_string(kMaxDimensionNameChars) + " printable characters)");
      if (names.size() == kMaxSymbolicDimensions)
        return Status::invalid(source + ": more than " + std::to_string(kMaxSymbolicDimensions) +
                               " symbolic input dimensions besides the batch");
      names.push_back(name);
    }
  }
  return names;
}

}  // namespace

Result<std::vector<std::string>> onnxSymbolicDimensions(const std::string& path) {
  onnx::ModelProto model;
  REMAT_RETURN_IF_ERROR(readModelFile(path, model));
  return symbolicDimensions(model, path);
}

Result<std::vector<std::string>> onnxSymbolicDimensionsOf(const std::string& bytes, const std::string& source) {
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) return Status::invalid(source + kNotParsed);
  return symbolicDimensions(model, source);
}

}  // namespace remat
