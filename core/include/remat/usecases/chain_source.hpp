#pragma once
// The use case "open a chain source", as every front end offers it: the command line's chain
// argument, the explorer's Open, zoo bar and drop, and the GPU check's models. A source is a zoo
// model (zoo:NAME), an ONNX model (recognised by its content, isOnnxFile) or a chain file.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"
#include "remat/model/zoo.hpp"

namespace remat {

inline constexpr std::string_view kZooSourcePrefix = "zoo:";

enum class ChainSourceKind { Zoo, OnnxModel, ChainFile };

// What `source` names: zoo:NAME, else an ONNX model when the file looks like one, else a chain file.
ChainSourceKind chainSourceKind(const std::string& source);

struct ChainSourceOptions {
  // The batch of an ONNX model (sets a symbolic batch, overrides a fixed one) or of a zoo model;
  // 0: the model's own (the zoo's 64). A chain file states its batch: InvalidInput when set.
  std::int64_t batch = 0;
  // The sequence length of a zoo token model (gpt2, bert_base); 0: the model's context. Only zoo
  // token models take it: InvalidInput for the others.
  std::int64_t sequence = 0;
  // The attention rule of every transformer_block (docs/memory-model.md section 12): true fused
  // (scaled_dot_product_attention), false math; none: as the source says (the zoo's default is
  // fused). A layer field, not a step option: it decides the layer's saved tensors (its e, wf, wb),
  // which shape inference computes, and a saved chain must give back the same numbers.
  std::optional<bool> fusedAttention = std::nullopt;
  // An ONNX model's data input by name (OnnxImportOptions::input); empty: its only one.
  std::string input = {};
  // An ONNX model's symbolic input dimensions by name (OnnxImportOptions::dims, `--dim NAME=V`).
  std::vector<std::pair<std::string, std::int64_t>> dims = {};
};

// The chain `source` names, built (shape inference done). Errors name the source.
Result<Chain> openChainSource(const std::string& source, const ChainSourceOptions& options = {});

// A zoo model by name (without the prefix) at the options' batch and resolution, built.
Result<Chain> openZooChain(const std::string& name, const ZooOptions& options = {});

}  // namespace remat
