#pragma once
// ONNX models in: an ONNX file (any opset from 9 on, with or without its weights, a fixed or a
// symbolic batch) becomes the same ChainSpec a chain file gives, so every tool takes it through one
// path. The graph is cut into a chain at its articulation tensors (a tensor that alone carries
// everything forward): a single op between two cuts is a plain layer, a multi-branch piece a `block`
// whose inner ops are the ONNX ops (a piece that is exactly one of torchvision's residual blocks is
// written as that kind). Shapes come from the importer's own inference, not from the file. What is
// supported, and how it relates to the zoo, is docs/import.md.
//
// Errors are InvalidInput (IoError for a file that cannot be read) and name the file and, where
// one is to blame, the node: "model.onnx: node 12 ('/layer1/layer1.0/Add', Add): ...". This target
// (remat::onnx) is the only one that links protobuf; its header needs neither ONNX nor protobuf.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat {

struct OnnxImportOptions {
  // > 0: the batch size, for a symbolic batch dimension, overriding a fixed one. 0: as exported (a
  // symbolic batch is then an error that names the dimension).
  std::int64_t batch = 0;
  // The data input by name (`--input NAME`): a graph input that is not an initializer; every other
  // graph input is then a weight. Empty: the one graph input of rank 2 or more that reaches the
  // output (a torch export's first input); more than one such is an error that asks for the name.
  std::string input = {};
  // `--dim NAME=V`: the size of every input dimension named NAME (a symbolic dimension, e.g. a token
  // model's "sequence"); a name no input has is an error. The batch is --batch's.
  std::vector<std::pair<std::string, std::int64_t>> dims = {};
};

// "sequence=2048" -> {"sequence", 2048}: a name, '=', a whole number in [1, 2^31 - 1]; errors name
// the text.
Result<std::pair<std::string, std::int64_t>> parseOnnxDimension(std::string_view text);

// What the import did, for the summary `remat import` prints (formatOnnxSummary).
struct OnnxImportSummary {
  std::int64_t opset = 0;
  std::string producer;    // "'pytorch 1.13.0'" (quoteText: the file's text), or empty
  std::size_t nodes = 0;   // nodes in the graph
  std::size_t layers = 0;  // chain layers (flatten views are not layers)
  std::size_t blocks = 0;  // of them, composite (basic_block, bottleneck, inverted_residual, block)
  std::uint64_t paramCount = 0;
  bool weightsInFile = false;  // false: counted from the shapes of the weight inputs (export_params=False)
  std::string batch;           // how the batch was set: "2 (fixed)", "64 (symbolic 'batch', --batch)", ...
  // Per ONNX op type, how many nodes became no layer of their own: folded (views, shape plumbing,
  // constants, a Pad into the next op, a bias Add into its MatMul) and dropped (Identity, no-op
  // Dropout and Reshape, zero Pad, nodes whose outputs nothing uses).
  std::vector<std::pair<std::string, std::size_t>> folded;
  std::vector<std::pair<std::string, std::size_t>> dropped;
};

struct OnnxImport {
  ChainSpec spec;  // buildChain(spec) succeeds
  OnnxImportSummary summary;
};

// Imports a serialized ModelProto; `source` names it in messages and its stem names the chain.
Result<OnnxImport> importOnnxModel(const std::string& bytes, const std::string& source,
                                   const OnnxImportOptions& options = {});
// Reads and imports a file.
Result<OnnxImport> importOnnxFile(const std::string& path, const OnnxImportOptions& options = {});

// The names of the symbolic dimensions of a transformer's inputs besides the batch (an input's first
// dimension, --batch's): what `--dim NAME=V` sets (e.g. "sequence"), in the inputs' order, each once.
// Empty for a model that is no transformer: only its batch may be symbolic. Reads the file as
// importOnnxFile does (its errors). At most 16 names of at most 64 characters (a hostile model's
// names become the explorer's fields): more, or longer, is an error naming the input.
Result<std::vector<std::string>> onnxSymbolicDimensions(const std::string& path);
// The same for a serialized ModelProto; `source` names it in messages (the fuzz target's entry).
Result<std::vector<std::string>> onnxSymbolicDimensionsOf(const std::string& bytes, const std::string& source);

// Whether this build reads ONNX models (REMAT_WITH_ONNX); without, every import says what to install.
bool onnxImportAvailable();

// Whether a path names an ONNX model: it ends in ".onnx" (any case).
bool isOnnxPath(std::string_view path);
// Whether a file is an ONNX model: its path says so, or it is a regular file whose first byte is a
// ModelProto's first field (ir_version, tag 0x08), which no chain file (JSON text) starts with.
bool isOnnxFile(const std::string& path);

// The ONNX operators the importer takes, for messages and docs.
std::string onnxSupportedOperators();

// The summary as `remat import` prints it: one line each for the model, the batch, what was
// folded and what was dropped.
std::string formatOnnxSummary(const OnnxImportSummary& summary, const std::string& source);

}  // namespace remat
