#pragma once
// The importer's own view of an ONNX graph while it converts it, and the helpers its stages share.
// Internal to remat::onnx. The stages, in order:
//   onnx_graph.cpp      the model's inputs (which one is the data), weights, outputs, the batch;
//   onnx_validate.cpp   the structural validation of every node before any stage reads the graph;
//   onnx_tensors.cpp    tensor data, declared types and shapes, ONNX's checker;
//   onnx_constants.cpp  values of the constant plumbing (Constant, Shape, Gather, Unsqueeze, ...);
//   onnx_layers.cpp     Conv, pools, BatchNormalization, Gemm, MatMul, Relu, Clip, Dropout, ...;
//   onnx_views.cpp      Add, Sub, Mul, Div, Concat, Flatten, Reshape, Identity, Pad, ReduceMean: views and merges;
//   onnx_channels.cpp   ShuffleNetV2's channel split (Slice) and channel shuffle (Reshape-Transpose-Reshape);
//   onnx_cut.cpp        the cut at articulation tensors into plain layers and blocks;
//   onnx_import.cpp     the walk over the nodes and the public entry points.
#include <onnx/onnx_pb.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/chain.hpp"

namespace remat::onnx_import {

inline constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// A tensor that carries activations: the model's data input (id 0) or a data op's output.
struct Activation {
  std::string tensor;  // its ONNX name
  Shape shape;
  std::size_t producer = kNone;  // data op index; kNone for the input
};

// What a data op is in the chain: a layer of a primitive kind (or a flatten view), or one of the
// merges that only a block holds.
enum class OpRole { Layer, Add, Concat, Mul, Slice, ChannelShuffle, LayerScale, Sub, Div };

// One ONNX node (or a fused pair, MatMul + Add) that computes on activations.
struct DataOp {
  std::size_t node = 0;  // index in graph.node
  std::string nodeName, opType;
  std::string name;  // the layer name, from the node's module path
  OpRole role = OpRole::Layer;
  LayerSpec layer;                  // kind and fields; name = `name`
  std::vector<std::size_t> inputs;  // activation ids
  std::size_t output = kNone;       // activation id
};

// A small constant tensor (shape plumbing, Clip bounds, Dropout ratio, Pad amounts), as doubles:
// every value the importer reads is an integer below 2^53 or a float.
struct Constant {
  Shape dims;
  std::vector<double> values;
};

// A weight: an initializer or (export_params=False) a graph input that is not the data.
struct Weight {
  Shape shape;
  const onnx::TensorProto* initializer = nullptr;  // null for a graph input
};

class Graph {
 public:
  Graph(const onnx::ModelProto& model, std::string source, const OnnxImportOptions& options)
      : model_(model), graph_(model.graph()), source_(std::move(source)), options_(options) {}

  // The opset, the structural validation (onnx_validate.cpp), then the data input, the weights and
  // the output (onnx_graph.cpp).
  Status readInterface(OnnxImportSummary& summary);
  // readInterface's first part, all a transformer's import takes (onnx_transformer.cpp reads its
  // inputs itself): the opset, the validation, the checker, the weights, the readers, the output.
  Status readHeader(OnnxImportSummary& summary);
  const onnx::ModelProto& model() const { return model_; }
  const OnnxImportOptions& options() const { return options_; }
  // After the walk: declared output and value_info shapes and types against the inferred ones.
  Status checkDeclaredShapes() const;

  const onnx::GraphProto& proto() const { return graph_; }
  const std::string& source() const { return source_; }
  std::int64_t opset() const { return opset_; }
  DType dtype() const { return dtype_; }
  const std::string& outputTensor() const { return output_; }
  // The batch the model's input fixes (0: symbolic). Where --batch changes it, a Reshape constant
  // whose leading dimension is this batch is rewritten to the new one (onnx_views.cpp).
  std::int64_t exportBatch() const { return exportBatch_; }

  // "model.onnx: node 12 ('/layer1/layer1.0/Add', Add)"
  std::string where(std::size_t node) const;
  Status fail(std::size_t node, const std::string& message) const;

  // Tensors by ONNX name. An empty name (an omitted optional input) is none of them.
  std::optional<std::size_t> activation(const std::string& tensor) const;
  const Weight* weight(const std::string& tensor) const;
  // The constant's value, evaluating the plumbing that produced it (onnx_constants.cpp).
  const Constant* constant(const std::string& tensor) const;
  bool isActivation(const std::string& tensor) const { return activation(tensor).has_value(); }
  // Whether some node reads the tensor or it is the graph's output.
  bool isUsed(const std::string& tensor) const { return readers(tensor) > 0; }
  // How many node inputs (and graph outputs) name the tensor.
  std::size_t readers(const std::string& tensor) const {
    auto it = readers_.find(tensor);
    return it == readers_.end() ? 0 : it->second;
  }
  // A Conv, Gemm or MatMul records whether its weights are in the file (the summary says so).
  void noteWeight(const Weight& w) { weightsInFile_ = weightsInFile_ || w.initializer != nullptr; }
  bool weightsInFile() const { return weightsInFile_; }

  // The walk records what each node produced.
  std::size_t addActivation(const std::string& tensor, Shape shape, std::size_t producer);
  void alias(const std::string& tensor, std::size_t activation) { activations_[tensor] = activation; }
  void addWeightAlias(const std::string& tensor, const Weight& weight) { weights_[tensor] = weight; }
  void addConstant(const std::string& tensor, Constant value) { constants_[tensor] = std::move(value); }
  // A Pad's output: the same activation, with zeros around it that the Conv or AveragePool reading
  // it takes into its own padding.
  void setPendingPad(const std::string& tensor, std::int64_t pad) { pendingPads_[tensor] = pad; }
  std::int64_t pendingPad(const std::string& tensor) const {
    auto it = pendingPads_.find(tensor);
    return it == pendingPads_.end() ? 0 : it->second;
  }
  // Evaluates a node whose inputs are all constants or weights (onnx_constants.cpp); false when its
  // op is not constant plumbing.
  Result<bool> evaluateConstantNode(std::size_t node);

  std::vector<Activation>& activations() { return activationList_; }
  const std::vector<Activation>& activations() const { return activationList_; }
  std::vector<DataOp>& ops() { return ops_; }
  const std::vector<DataOp>& ops() const { return ops_; }

  // ConvNeXt's channels-last tensors: a Transpose perm [0, 2, 3, 1] of an NCHW activation, and what
  // LayerNormalization over the last axis, MatMul + Add and GELU compute from one. The importer keeps
  // the NCHW activation (a permute is a view that keeps nothing; docs/memory-model.md section 6):
  // such a tensor names an NCHW activation whose ONNX shape is its permutation.
  void markChannelsLast(const std::string& tensor) { channelsLast_.insert(tensor); }
  bool isChannelsLast(const std::string& tensor) const { return channelsLast_.count(tensor) > 0; }

  // Nodes a pattern took into the op of an earlier node (onnx_patterns.cpp); the walk skips them.
  void markFused(std::size_t node) { fused_.insert(node); }
  bool isFused(std::size_t node) const { return fused_.count(node) > 0; }

  // Counts for the summary, per op type.
  void countFolded(const std::string& opType) { ++folded_[opType]; }
  void countDropped(const std::string& opType) { ++dropped_[opType]; }
  const std::map<std::string, std::size_t>& folded() const { return folded_; }
  const std::map<std::string, std::size_t>& dropped() const { return dropped_; }

 private:
  Status readOpset();
  Status readDataInput(const std::vector<std::string>& candidates, OnnxImportSummary& summary);
  Status readBatch(const onnx::ValueInfoProto& input, Shape& shape, OnnxImportSummary& summary) const;
  Status readOutput();
  Status checkNamedInput() const;
  Status validateStructure();
  std::vector<std::string> dataInputCandidates() const;

  const onnx::ModelProto& model_;
  const onnx::GraphProto& graph_;
  std::string source_;
  OnnxImportOptions options_;
  std::int64_t opset_ = 0;
  DType dtype_ = DType::Float32;
  std::string output_;
  std::map<std::string, std::size_t> activations_;
  std::vector<Activation> activationList_;
  mutable std::map<std::string, Weight> weights_;      // constants used as weights join when first asked for
  mutable std::map<std::string, Constant> constants_;  // initializers are decoded when first asked for
  std::map<std::string, std::size_t> folded_, dropped_;
  std::vector<DataOp> ops_;
  std::map<std::string, std::size_t> readers_;
  std::map<std::string, std::int64_t> pendingPads_;
  std::map<std::string, std::size_t> producers_;  // node output -> the node's index
  std::set<std::size_t> fused_;
  std::set<std::string> channelsLast_;
  bool weightsInFile_ = false;
  std::int64_t exportBatch_ = 0;
};

// The validation's parts (onnx_validate.cpp, onnx_tensors.cpp); each error names the file, and the
// node where one is to blame.
bool readsOperator(const onnx::NodeProto& node);  // one of the operators the importer reads
Status validateTensors(const Graph& graph);
std::map<std::string, std::int32_t> declaredElementTypes(const onnx::GraphProto& graph);
Status checkWeightTypes(const Graph& graph, const std::map<std::string, std::int32_t>& types);
// ONNX's checker on the nodes of the operators the importer reads; on every node of the standard
// domain with `everyNode` (a transformer's graph, whose ops ONNX's shape inference reads).
Status runOnnxChecker(const Graph& graph, const onnx::ModelProto& model, bool everyNode = false);

// Opsets 18 to 20 (onnx_opsets.cpp). A Reduce*'s axes: the attribute, or from opset 18 the constant
// input 1 (not constant, an attribute at 18, or out of range for `rank` when it is not 0: an error at
// the node); none when absent.
Result<std::optional<std::vector<std::int64_t>>> reduceAxes(const Graph& graph, std::size_t node, std::size_t rank);
// Split's num_outputs against its outputs, Gelu's approximate, Reduce*'s axes: errors at the node.
Status checkNewOpsetNodes(const Graph& graph);
// `model`, a copy of graph's, in the forms of the newest opset this build's ONNX knows, for its
// shape inference (nothing to do at or below it).
Status lowerForOnnxInference(const Graph& graph, onnx::ModelProto& model);

// "'a', 'b', 'c' and 5 more": names quoted (quoteText), at most `shown` of them.
std::string quotedList(const std::vector<std::string>& names, std::size_t shown = 3);

// Node attributes, with ONNX's defaults when absent.
const onnx::AttributeProto* findAttribute(const onnx::NodeProto& node, const char* name);
std::int64_t intAttribute(const onnx::NodeProto& node, const char* name, std::int64_t fallback);
double floatAttribute(const onnx::NodeProto& node, const char* name, double fallback);
std::string stringAttribute(const onnx::NodeProto& node, const char* name, const std::string& fallback);
std::optional<std::vector<std::int64_t>> intsAttribute(const onnx::NodeProto& node, const char* name);

// Input i of a node, or "" when the node has fewer (ONNX's way of omitting an optional input).
const std::string& nodeInput(const onnx::NodeProto& node, int i);

// A number as messages write it: "6", "0.25", "inf".
std::string numberText(double value);

// A constant's values as integers; an error (naming `what`) when one is not a whole number of at
// most 2^53 in magnitude, which no shape, axis or pad is.
Result<std::vector<std::int64_t>> integersOf(const Constant& constant, const std::string& what);

// The decoded values of a tensor, or an error naming it (too big, or an element type without
// numbers).
Result<Constant> decodeTensor(const onnx::TensorProto& tensor, std::size_t maxElements);
Shape tensorDims(const onnx::TensorProto& tensor);

// The chain layer's name of a node: its module path (torch names nodes
// "/features/features.0/Conv" -> "features.0"; Add and Concat get ".add"/".concat" after the module
// that calls them), its own name when it is not a scope path, "<op type>_<index>" when it has none.
std::string layerNameOf(const onnx::NodeProto& node, std::size_t index);
inline constexpr std::size_t kMaxLayerNameChars = 120;
// An op type for messages: as it is when it is a plain identifier, else quoted (quoteText).
std::string opTypeText(const std::string& opType);

// Converts one node with activation inputs into data ops or aliases (onnx_layers.cpp,
// onnx_views.cpp). Every error names the node.
Status convertLayerNode(Graph& graph, std::size_t node);
Status convertViewNode(Graph& graph, std::size_t node);
bool isLayerOp(const std::string& opType);
// A pattern of nodes torch writes for one op (SiLU, GELU) starting at `node`, converted into that
// op; false when the node starts none (onnx_patterns.cpp).
Result<bool> convertPatternNode(Graph& graph, std::size_t node);
bool isViewOp(const std::string& opType);
// A layernorm of activation `x` ([N, F]) for node `first` with weight `scale` and bias `bias`
// (weights of shape [F]) and `epsilon` (finite, in [0, 1)), writing `output` (default: the node's
// output 0); every error names node `first` (onnx_layers.cpp). LayerNormalization and torch's
// decomposed form below opset 17 (onnx_patterns.cpp) both end here.
Status appendLayerNorm(Graph& graph, std::size_t first, std::size_t x, const std::string& scale,
                       const std::string& bias, double epsilon, const std::string& output = {});
// ONNX's Reshape rule on `in` for Reshape node `index` (0 copies, one -1 takes the rest), with a
// fixed export batch in the leading dimension rewritten to --batch's (onnx_views.cpp).
Result<Shape> reshapeTarget(const Graph& g, std::size_t index, const Shape& in, const Constant& target);
// ShuffleNetV2's channel ops (onnx_channels.cpp): a Slice along the channels; the channel shuffle
// that starts at Reshape `index` of activation `a` to the 5-dimensional `split`; a Transpose
// anywhere else is refused.
Status convertSlice(Graph& graph, std::size_t index);
Status convertChannelShuffle(Graph& graph, std::size_t index, std::size_t a, const Shape& split);
Status convertTranspose(Graph& graph, std::size_t index);

// Appends a data op writing a new activation of `shape` into `tensor` (default: the node's output
// 0); returns the activation id.
std::size_t appendOp(Graph& graph, DataOp op, Shape shape, const std::string& tensor = {});
// A data op of `kind` for a node, named after it (layerNameOf).
DataOp makeOp(const Graph& graph, std::size_t node, LayerKind kind, std::vector<std::size_t> inputs);

// The spatial padding of a Conv or pool node on an NCHW `input`: its pads / auto_pad, plus a
// pending zero Pad on its input 0, as one value for every side, or an error for asymmetric padding.
// `kernel` and `stride` are per axis.
Result<std::int64_t> symmetricPadding(Graph& graph, std::size_t node, const Shape& input,
                                      const std::vector<std::int64_t>& kernel, const std::vector<std::int64_t>& stride);
// The same per axis (height, width): each axis padded alike at its start and end (a conv2d's padding
// and padding_width), or an error when an axis is padded more at one end.
Result<std::array<std::int64_t, 2>> axisPadding(Graph& graph, std::size_t node, const Shape& input,
                                                const std::vector<std::int64_t>& kernel,
                                                const std::vector<std::int64_t>& stride);

// The cut (onnx_cut.cpp): the data ops the output depends on as chain layers (the others are
// counted as dropped), with the shape ONNX's rules give each layer's output and the node that
// writes it, for the check against the chain's own shape inference.
struct CutLayers {
  std::vector<LayerSpec> layers;
  std::vector<Shape> outputShapes;
  std::vector<std::size_t> lastNodes;
};
Result<CutLayers> cutIntoLayers(Graph& graph);

}  // namespace remat::onnx_import
