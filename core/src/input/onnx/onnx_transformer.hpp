#pragma once
// Transformers in (issue 23): a graph with attention (a Softmax over activations) or token ids (an
// integer input read by a Gather) is imported by its own path. ONNX's shape inference, with every
// input dimension made concrete (--batch, --dim NAME=V), gives the shapes; the residual stream's
// articulation tensors cut the graph into pieces; the pieces group into the chain's transformer
// kinds (docs/memory-model.md section 12): the embedding (token_embedding or patch_embedding), one
// transformer_block per attention (its attention piece, its MLP piece and, post-norm, the norms
// after them) and the head (lm_head or cls_head). Each layer's fields are read from its ops, and its
// parameter count (the weights its ops read) must be the kind's.
//   onnx_transformer.cpp         detection, the inputs and their sizes, shape inference, the cut;
//   onnx_transformer_layers.cpp  the pieces' contents, their grouping and the layers' fields;
//   onnx_swin.cpp                the same for torchvision's Swin Transformer (its own kinds).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "onnx_graph.hpp"

namespace remat::onnx_import {

// Whether the graph is a transformer's: it has a Softmax, or a Gather whose indices are an integer
// graph input.
bool isTransformerGraph(const onnx::GraphProto& graph);

// What the cut and the layer reader share about one graph.
struct TransformerGraph {
  const Graph* graph = nullptr;
  std::string input;    // the data input: token ids [N, S] or an image [N, C, H, W]
  bool tokens = false;  // integer ids
  Shape inputShape;     // with --batch and --dim applied
  std::int64_t batch = 0;
  std::map<std::string, Shape> shapes;          // after ONNX's shape inference (fully known ones)
  std::map<std::string, std::size_t> producer;  // tensor -> node
  std::set<std::string> data;                   // tensors computed from the data input
  std::set<std::string> weights;                // parameters: graph inputs and float initializers
  std::vector<std::size_t> dataNodes;           // nodes that read data, in order
  const Shape* shapeOf(const std::string& tensor) const {
    auto it = shapes.find(tensor);
    return it == shapes.end() ? nullptr : &it->second;
  }
};

// One piece between two articulation tensors of the residual stream: its data nodes, in order.
struct Piece {
  std::string in, out;  // the tensors it reads and writes
  std::vector<std::size_t> nodes;
};

// What one group of pieces holds, read from its data nodes.
struct Contents {
  std::vector<std::size_t> nodes;
  std::vector<std::size_t> softmax, linears, convs, tableGathers, tokenPicks, masks, losses;
  std::size_t norms = 0;  // LayerNormalization nodes, or torch's ReduceMean pairs below opset 17
  std::vector<double> epsilons, dropouts;
  bool relu = false, erf = false, tanh = false, startsWithNorm = false;
  std::set<std::string> weights;  // the parameters its ops read
};

// The data input, the sizes, the shapes and the pieces (onnx_transformer.cpp).
Result<std::vector<Piece>> readTransformerGraph(Graph& graph, TransformerGraph& t, OnnxImportSummary& summary);
// The pieces as chain layers, checked against their weights (onnx_transformer_layers.cpp).
Result<std::vector<LayerSpec>> transformerLayers(const TransformerGraph& t, const std::vector<Piece>& pieces,
                                                 std::vector<std::size_t>& firstNodes);

// What transformerLayers and swinLayers share (onnx_transformer_layers.cpp).
bool isData(const TransformerGraph& t, const std::string& tensor);
// The parameters a non-data tensor is computed from; `gathers` collects the table lookups on the way.
void traceWeights(const TransformerGraph& t, const std::string& tensor, std::set<std::string>& out,
                  std::vector<std::size_t>* gathers = nullptr);
Contents readPieces(const TransformerGraph& t, const std::vector<Piece>& pieces, std::size_t begin, std::size_t end);
std::uint64_t weightElements(const TransformerGraph& t, const std::set<std::string>& weights);
// The width a linear writes.
std::int64_t linearOut(const TransformerGraph& t, std::size_t i);
// A float32 attribute or constant as its shortest decimal (0.1, not 0.10000000149011612).
double float32Value(double value);
// A common dropout probability, or an error at the group's first node.
Result<double> oneDropout(const TransformerGraph& t, const Contents& c, const std::string& what);
// The layer's name from its nodes' module paths: their common prefix (whole) or the paths joined by '+'.
std::string groupName(const TransformerGraph& t, const Contents& c, bool whole);
// Whether the linear's output gets a bias: Gemm's C, or an Add of a parameter.
bool hasBias(const TransformerGraph& t, std::size_t linear);
// The kind's own parameter count for these fields must be what the ops read; `output` is the layer's.
Status checkParameters(const TransformerGraph& t, const LayerSpec& spec, const Shape& input, std::size_t node,
                       std::uint64_t counted, Shape& output);

// Swin Transformer (torchvision's SwinTransformer, onnx_swin.cpp): the patch embedding's Conv is read
// channels last (a Transpose perm [0, 2, 3, 1]) and the graph has attention.
bool isSwinGraph(const TransformerGraph& t);
// The pieces as swin_embedding, swin_block, patch_merging and swin_head layers.
Result<std::vector<LayerSpec>> swinLayers(const TransformerGraph& t, const std::vector<Piece>& pieces,
                                          std::vector<std::size_t>& firstNodes);

// Replaces the shape plumbing's value where ONNX's pass left an output without a shape
// (onnx_transformer_values.cpp); true when it replaced one, so the pass is worth running again.
bool foldShapePlumbing(onnx::GraphProto& graph, const std::map<std::string, Shape>& shapes);

// LayerNorm's and GELU's patterns as torch writes them, or an error at the node
// (onnx_transformer_checks.cpp).
Status checkTransformerPatterns(const TransformerGraph& t);

const onnx::NodeProto& nodeAt(const TransformerGraph& t, std::size_t i);
// The one number a scalar constant holds (a Constant node's or an initializer's); none when it is
// not one, or, with floatOnly, not a finite float32, float16 or bfloat16.
std::optional<double> constantScalar(const TransformerGraph& t, const std::string& tensor, bool floatOnly);

// The whole import of a transformer's graph (importModel's, for a graph isTransformerGraph takes).
Result<OnnxImport> importTransformerModel(const onnx::ModelProto& model, const std::string& source,
                                          const OnnxImportOptions& options);

}  // namespace remat::onnx_import
