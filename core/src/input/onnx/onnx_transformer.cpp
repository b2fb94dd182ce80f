// Transformers in: detection, the data input and its sizes (--batch, --dim), ONNX's shape inference
// at those sizes, and the cut of the residual stream into pieces (onnx_transformer.hpp).
#include "onnx_transformer.hpp"

#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <filesystem>

#include "remat/base/text.hpp"

namespace remat::onnx_import {
namespace {

bool isIntegerType(std::int32_t type) { return type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32; }

bool isFloatType(std::int32_t type) {
  return type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::FLOAT16 || type == onnx::TensorProto::BFLOAT16;
}

std::set<std::string> initializerNames(const onnx::GraphProto& graph) {
  std::set<std::string> names;
  for (const auto& t : graph.initializer()) names.insert(t.name());
  return names;
}

// Graph inputs read as a Gather's indices (token ids) or as a Conv's image.
std::vector<std::string> dataCandidates(const onnx::GraphProto& graph) {
  const std::set<std::string> initializers = initializerNames(graph);
  std::vector<std::string> ids, images;
  for (const auto& input : graph.input()) {
    if (initializers.count(input.name())) continue;
    for (const auto& node : graph.node()) {
      // A 1-D index is not token ids: Swin's relative position index, a graph input without weights.
      const bool gather = node.op_type() == "Gather" && node.input_size() == 2 && node.input(1) == input.name() &&
                          input.type().tensor_type().shape().dim_size() != 1;
      const bool conv = node.op_type() == "Conv" && node.input_size() > 0 && node.input(0) == input.name();
      if (gather && std::find(ids.begin(), ids.end(), input.name()) == ids.end()) ids.push_back(input.name());
      if (conv && std::find(images.begin(), images.end(), input.name()) == images.end()) images.push_back(input.name());
    }
  }
  return ids.empty() ? images : ids;
}

const onnx::ValueInfoProto* findInput(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto& input : graph.input())
    if (input.name() == name) return &input;
  return nullptr;
}

std::string dimText(const onnx::TensorShapeProto::Dimension& d) {
  return d.has_dim_value() ? std::to_string(d.dim_value())
                           : quoteText(d.dim_param().empty() ? "(unnamed)" : d.dim_param(), 40);
}

std::string declaredShapeText(const onnx::ValueInfoProto& input) {
  std::string text = "[";
  const auto& dims = input.type().tensor_type().shape().dim();
  for (int i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + dimText(dims[i]);
  return text + "]";
}

// The data input: --input's, else the one graph input read as token ids (or, without any, as an image).
Result<std::string> chooseDataInput(const Graph& g, const OnnxImportOptions& options) {
  const onnx::GraphProto& graph = g.proto();
  if (!options.input.empty()) {
    const onnx::ValueInfoProto* input = findInput(graph, options.input);
    if (input == nullptr || initializerNames(graph).count(options.input))
      return Status::invalid(g.source() + ": --input " + quoteText(options.input, 80) +
                             ": the graph has no input of that name");
    return options.input;
  }
  const std::vector<std::string> candidates = dataCandidates(graph);
  if (candidates.empty())
    return Status::invalid(g.source() +
                           ": a transformer's data input is token ids read by a Gather (an embedding) or an image read "
                           "by a Conv (a patch embedding); no graph input is either");
  if (candidates.size() > 1)
    return Status::invalid(g.source() + ": more than one data input (" + quotedList(candidates) +
                           "); name the data input with --input NAME");
  return candidates.front();
}

Status checkDataType(const Graph& g, const onnx::ValueInfoProto& input, bool& tokens) {
  const std::string what = g.source() + ": input " + quoteText(input.name());
  if (!input.type().has_tensor_type() || !input.type().tensor_type().has_shape())
    return Status::invalid(what + " has no tensor shape");
  const std::int32_t type = input.type().tensor_type().elem_type();
  const int rank = input.type().tensor_type().shape().dim_size();
  tokens = isIntegerType(type);
  if (tokens && rank != 2)
    return Status::invalid(what + ": token ids are [batch, sequence] integers; this input is " +
                           declaredShapeText(input) + " (" + std::to_string(rank) + " dimensions)");
  if (!tokens && !(isFloatType(type) && rank == 4))
    return Status::invalid(what +
                           ": the data input is token ids (int64 [batch, sequence]) or an image (float "
                           "[batch, channels, height, width]); this one is " +
                           declaredShapeText(input) + " of element type " + std::to_string(type));
  return Status::ok();
}

// Every symbolic dimension of the inputs gets its size: the data input's first from --batch, the
// others from --dim NAME=V. Writes the sizes into `model`'s inputs for shape inference.
Status resolveSizes(const Graph& g, const OnnxImportOptions& options, onnx::ModelProto& model, TransformerGraph& t,
                    OnnxImportSummary& summary) {
  std::map<std::string, std::int64_t> sizes(options.dims.begin(), options.dims.end());
  std::set<std::string> symbols;
  onnx::GraphProto& graph = *model.mutable_graph();
  for (const auto& input : graph.input())
    for (const auto& d : input.type().tensor_type().shape().dim())
      if (!d.has_dim_value()) symbols.insert(d.dim_param());
  for (const auto& [name, size] : options.dims)
    if (!symbols.count(name))
      return Status::invalid(g.source() + ": --dim " + quoteText(name, 40) +
                             ": no input dimension has that name (the symbolic ones: " +
                             quotedList(std::vector<std::string>(symbols.begin(), symbols.end())) + ")");
  const onnx::ValueInfoProto* data = findInput(g.proto(), t.input);
  const auto& first = data->type().tensor_type().shape().dim(0);
  if (first.has_dim_param() && !first.dim_param().empty() && options.batch > 0)
    sizes.emplace(first.dim_param(), options.batch);
  for (auto& input : *graph.mutable_input()) {
    if (!input.type().has_tensor_type() || !input.type().tensor_type().has_shape()) continue;
    auto& dims = *input.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim();
    for (int i = 0; i < dims.size(); ++i) {
      auto& d = dims[i];
      const std::string where = g.source() + ": input " + quoteText(input.name()) + ", dimension " + std::to_string(i);
      std::int64_t size = d.has_dim_value() ? d.dim_value() : 0;
      if (input.name() == t.input && i == 0 && options.batch > 0) size = options.batch;
      if (!d.has_dim_value()) {
        auto it = sizes.find(d.dim_param());
        if (it != sizes.end()) size = it->second;
      }
      if (size > kMaxIntegerField)
        return Status::invalid(where + " is " + std::to_string(size) + ", more than " +
                               std::to_string(kMaxIntegerField));
      if (size <= 0 && input.name() == t.input)
        return Status::invalid(where + " (" + dimText(d) + ") is symbolic: give its size with " +
                               (i == 0 ? std::string("--batch N") : "--dim " + d.dim_param() + "=N"));
      if (size > 0) d.set_dim_value(size);
      if (input.name() == t.input) t.inputShape.push_back(size);
    }
  }
  t.batch = t.inputShape.front();
  summary.batch = std::to_string(t.batch) + (options.batch > 0 ? " (--batch)" : " (fixed in the model)");
  return Status::ok();
}

void recordShapes(const onnx::GraphProto& graph, TransformerGraph& t) {
  auto record = [&t](const onnx::ValueInfoProto& info) {
    if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape()) return;
    Shape shape;
    for (const auto& d : info.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0) return;
      shape.push_back(d.dim_value());
    }
    t.shapes[info.name()] = std::move(shape);
  };
  for (const auto& info : graph.value_info()) record(info);
  for (const auto& info : graph.input()) record(info);
  for (const auto& info : graph.output()) record(info);
  for (const auto& init : graph.initializer()) t.shapes[init.name()] = tensorDims(init);
}

// Strict: a node whose shapes do not chain is an error (the last pass); else it leaves its outputs
// without a shape. ONNX 1.12's own data propagation is off: it crashes on some hostile shapes, and
// foldShapePlumbing does its work.
Status runInference(const Graph& g, onnx::ModelProto& model, const TransformerGraph& t, bool strict) {
  try {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, strict ? 1 : 0, false));
  } catch (const std::exception& error) {
    // ONNX names the node it failed on: "... (op_type:Where, node name: /h.0/attn/Where): ...".
    const std::string what = error.what();
    const std::string message = "ONNX's shape inference at input " + shapeToString(t.inputShape) +
                                " fails (the shapes do not chain at these sizes): " + quoteText(what, 400);
    const std::size_t at = what.find("node name: ");
    if (at != std::string::npos) {
      const std::size_t begin = at + 11, end = what.find(')', begin);
      const std::string name = what.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
      for (int i = 0; i < g.proto().node_size(); ++i)
        if (!name.empty() && g.proto().node(i).name() == name) return g.fail(static_cast<std::size_t>(i), message);
    }
    return Status::invalid(g.source() + ": " + message);
  }
  return Status::ok();
}

bool knownShape(const onnx::GraphProto& graph, const std::string& tensor) {
  for (const auto& info : graph.value_info())
    if (info.name() == tensor && info.type().tensor_type().has_shape()) {
      for (const auto& d : info.type().tensor_type().shape().dim())
        if (!d.has_dim_value()) return false;
      return true;
    }
  return false;
}

// A class token expanded to the batch (torchvision's and Hugging Face's ViT: `class_token.expand(n,
// -1, -1)`) goes through a Where on -1 that ONNX's propagation does not evaluate: an Expand of a
// [1, ...] parameter whose output has no shape is [N, ...].
bool hintClassTokens(onnx::GraphProto& graph, const TransformerGraph& t) {
  bool hinted = false;
  for (const auto& node : graph.node()) {
    if (node.op_type() != "Expand" || node.output_size() != 1 || knownShape(graph, node.output(0))) continue;
    const onnx::ValueInfoProto* weight = findInput(graph, node.input(0));
    if (weight == nullptr || !weight->type().tensor_type().has_shape()) continue;
    const auto& dims = weight->type().tensor_type().shape().dim();
    if (dims.size() < 2 || dims[0].dim_value() != 1) continue;
    onnx::ValueInfoProto* info = graph.add_value_info();
    info->set_name(node.output(0));
    auto* type = info->mutable_type()->mutable_tensor_type();
    type->set_elem_type(weight->type().tensor_type().elem_type());
    type->mutable_shape()->add_dim()->set_dim_value(t.batch);
    for (int i = 1; i < dims.size(); ++i) type->mutable_shape()->add_dim()->set_dim_value(dims[i].dim_value());
    hinted = true;
  }
  return hinted;
}

// ONNX's own rules (and its propagation of shape values through Shape, Gather, Concat) at the
// sizes given; the tensors whose every dimension is known are recorded.
Status inferShapes(const Graph& g, onnx::ModelProto& model, TransformerGraph& t) {
  onnx::GraphProto& graph = *model.mutable_graph();
  // The declared value_info and output types stay: ONNX's pass refuses one that contradicts what it
  // infers (at the node), as the CNN path's check of the declared shapes does.
  REMAT_RETURN_IF_ERROR(runInference(g, model, t, false));
  if (hintClassTokens(graph, t)) REMAT_RETURN_IF_ERROR(runInference(g, model, t, false));
  for (int pass = 0; pass < 256; ++pass) {  // each pass reaches one layer further
    t.shapes.clear();
    recordShapes(graph, t);
    if (!foldShapePlumbing(graph, t.shapes)) break;
    REMAT_RETURN_IF_ERROR(runInference(g, model, t, false));
  }
  REMAT_RETURN_IF_ERROR(runInference(g, model, t, true));
  t.shapes.clear();
  recordShapes(graph, t);
  return Status::ok();
}

bool sameDeclaredType(const onnx::TypeProto& a, const onnx::TypeProto& b) {
  const auto &x = a.tensor_type(), &y = b.tensor_type();
  if (x.elem_type() != y.elem_type()) return false;
  if (!x.has_shape() || !y.has_shape()) return true;
  if (x.shape().dim_size() != y.shape().dim_size()) return false;
  for (int i = 0; i < x.shape().dim_size(); ++i) {
    const auto &d = x.shape().dim(i), &e = y.shape().dim(i);
    if (d.has_dim_value() && e.has_dim_value() && d.dim_value() != e.dim_value()) return false;
  }
  return true;
}

// ONNX's pass checks value_info against what it infers, but takes a graph output's type from its
// declaration in graph.output: a value_info entry for the same tensor must agree with it.
Status checkOutputValueInfo(const Graph& g) {
  for (const auto& info : g.proto().value_info())
    for (const auto& output : g.proto().output()) {
      if (info.name() != output.name() || sameDeclaredType(info.type(), output.type())) continue;
      const std::string message =
          "value_info declares the output " + quoteText(output.name()) + " otherwise than the graph's outputs do";
      for (int i = 0; i < g.proto().node_size(); ++i)
        for (const auto& out : g.proto().node(i).output())
          if (out == output.name()) return g.fail(static_cast<std::size_t>(i), message);
      return Status::invalid(g.source() + ": " + message);
    }
  return Status::ok();
}

// Data tensors (computed from the data input, not through Shape) and the parameters.
void markData(const Graph& g, TransformerGraph& t) {
  const onnx::GraphProto& graph = g.proto();
  t.data.insert(t.input);
  for (std::size_t i = 0; i < static_cast<std::size_t>(graph.node_size()); ++i) {
    const onnx::NodeProto& node = graph.node(static_cast<int>(i));
    for (const auto& out : node.output()) t.producer[out] = i;
    if (node.op_type() == "Shape" || node.op_type() == "Size") continue;
    bool reads = false;
    for (const auto& in : node.input()) reads = reads || t.data.count(in) > 0;
    if (!reads) continue;
    t.dataNodes.push_back(i);
    for (const auto& out : node.output()) t.data.insert(out);
  }
  const std::set<std::string> initializers = initializerNames(graph);
  for (const auto& input : graph.input())
    if (input.name() != t.input && input.type().has_tensor_type() &&
        isFloatType(input.type().tensor_type().elem_type()))
      t.weights.insert(input.name());
  for (const auto& init : graph.initializer())
    if (isFloatType(init.data_type())) t.weights.insert(init.name());
}

// The articulation tensors: after a data node, the one data tensor that later nodes (or the
// output) still read.
std::vector<Piece> cutPieces(const Graph& g, const TransformerGraph& t) {
  const onnx::GraphProto& graph = g.proto();
  std::map<std::string, std::size_t> lastRead;
  for (std::size_t i : t.dataNodes)
    for (const auto& in : graph.node(static_cast<int>(i)).input())
      if (t.data.count(in)) lastRead[in] = i;
  lastRead[g.outputTensor()] = graph.node_size();
  std::vector<Piece> pieces;
  Piece current{t.input, "", {}};
  std::set<std::string> live = {t.input};
  for (std::size_t i : t.dataNodes) {
    const onnx::NodeProto& node = graph.node(static_cast<int>(i));
    current.nodes.push_back(i);
    for (const auto& out : node.output())
      if (lastRead.count(out) && lastRead[out] > i) live.insert(out);
    for (auto it = live.begin(); it != live.end();) it = lastRead[*it] <= i ? live.erase(it) : std::next(it);
    if (live.size() == 1 && t.producer.at(*live.begin()) == i) {
      current.out = *live.begin();
      pieces.push_back(current);
      current = Piece{current.out, "", {}};
    }
  }
  if (!current.nodes.empty()) {
    current.out = g.outputTensor();
    pieces.push_back(current);
  }
  return pieces;
}

}  // namespace

bool isTransformerGraph(const onnx::GraphProto& graph) {
  std::set<std::string> integerInputs;
  for (const auto& input : graph.input())
    if (input.type().has_tensor_type() && isIntegerType(input.type().tensor_type().elem_type()))
      integerInputs.insert(input.name());
  // Attention: a Softmax whose probabilities a MatMul reads (through a Dropout or a Cast); a
  // classifier's final Softmax is not one (the CNN path refuses it, naming the operator).
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers;
  for (const auto& node : graph.node())
    for (const auto& in : node.input()) readers[in].push_back(&node);
  auto readByMatMul = [&readers](const std::string& tensor, auto&& self, int depth) -> bool {
    for (const onnx::NodeProto* r : readers[tensor]) {
      if (r->op_type() == "MatMul") return true;
      if (depth < 2 && (r->op_type() == "Dropout" || r->op_type() == "Cast") && r->output_size() > 0 &&
          self(r->output(0), self, depth + 1))
        return true;
    }
    return false;
  };
  for (const auto& node : graph.node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;
    if (node.op_type() == "Softmax" && node.output_size() > 0 && readByMatMul(node.output(0), readByMatMul, 0))
      return true;
    if (node.op_type() == "Gather" && node.input_size() == 2 && integerInputs.count(node.input(1))) return true;
  }
  return false;
}

// The constant plumbing, evaluated as the CNN path evaluates it, dead or alive: a Slice with NaN
// bounds or an Unsqueeze with duplicate axes is an invalid model wherever it is.
Status evaluateConstants(Graph& g) {
  for (std::size_t i = 0; i < static_cast<std::size_t>(g.proto().node_size()); ++i) {
    const onnx::NodeProto& node = g.proto().node(static_cast<int>(i));
    const bool constantInputs = std::all_of(node.input().begin(), node.input().end(), [&g](const std::string& in) {
      return in.empty() || g.constant(in) != nullptr;
    });
    if (!constantInputs || node.op_type() == "Identity") continue;
    auto handled = g.evaluateConstantNode(i);
    if (!handled) return handled.status();
  }
  return Status::ok();
}

Result<std::vector<Piece>> readTransformerGraph(Graph& g, TransformerGraph& t, OnnxImportSummary& summary) {
  t.graph = &g;
  REMAT_RETURN_IF_ERROR(evaluateConstants(g));
  REMAT_RETURN_IF_ERROR(checkOutputValueInfo(g));
  auto input = chooseDataInput(g, g.options());
  if (!input) return input.status();
  t.input = *input;
  REMAT_RETURN_IF_ERROR(checkDataType(g, *findInput(g.proto(), t.input), t.tokens));
  onnx::ModelProto model = g.model();
  REMAT_RETURN_IF_ERROR(checkNewOpsetNodes(g));
  REMAT_RETURN_IF_ERROR(lowerForOnnxInference(g, model));  // opsets 18 to 20: ONNX 1.12 knows 17
  REMAT_RETURN_IF_ERROR(resolveSizes(g, g.options(), model, t, summary));
  REMAT_RETURN_IF_ERROR(inferShapes(g, model, t));
  markData(g, t);
  if (!t.data.count(g.outputTensor()))
    return Status::invalid(g.source() + ": the output " + quoteText(g.outputTensor()) +
                           " is not computed from the data input " + quoteText(t.input));
  return cutPieces(g, t);
}

Result<OnnxImport> importTransformerModel(const onnx::ModelProto& model, const std::string& source,
                                          const OnnxImportOptions& options) {
  OnnxImport result;
  Graph g(model, source, options);
  REMAT_RETURN_IF_ERROR(g.readHeader(result.summary));
  REMAT_RETURN_IF_ERROR(runOnnxChecker(g, model, true));
  TransformerGraph t;
  auto pieces = readTransformerGraph(g, t, result.summary);
  if (!pieces) return pieces.status();
  REMAT_RETURN_IF_ERROR(checkTransformerPatterns(t));
  std::vector<std::size_t> firstNodes;
  auto layers = isSwinGraph(t) ? swinLayers(t, *pieces, firstNodes) : transformerLayers(t, *pieces, firstNodes);
  if (!layers) return layers.status();
  ChainSpec& spec = result.spec;
  spec.name = std::filesystem::path(source).stem().string();
  spec.input.shape = t.inputShape;
  spec.input.dtype = g.dtype();
  spec.layers = std::move(layers).value();
  auto chain = buildChain(spec);
  if (!chain) return chain.status().withContext(source);
  OnnxImportSummary& summary = result.summary;
  summary.layers = chain->size();
  summary.paramCount = chain->paramCount();
  summary.weightsInFile = g.proto().initializer_size() > 0;
  return result;
}

}  // namespace remat::onnx_import
