#pragma once
// Chain files, format "remat-chain/1" (docs/formats.md). Loading is all-or-nothing: either a whole
// valid chain or one error "FILE:LINE:COLUMN: layer 3 ('c'): field 'kernel' ..." naming the place,
// the layer (its 1-based position in "layers", and its name) and the field. The text is read as
// JsonDocument reads it (no duplicated keys, nothing after the value, nesting at most 6 deep);
// loadChainFile refuses a file over kMaxChainFileBytes (input_file.hpp) before reading it.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "remat/base/status.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/model/chain.hpp"

namespace remat {

inline constexpr const char* kChainFormat = "remat-chain/1";

// Parses a chain spec from JSON text; `source` names the file in messages.
Result<ChainSpec> parseChainSpec(const std::string& text, const std::string& source);
Result<ChainSpec> chainSpecFromJson(const nlohmann::json& json, const std::string& source);
nlohmann::json chainSpecToJson(const ChainSpec& spec);

// Reads, parses and builds (shape inference) a chain.
Result<Chain> loadChainFile(const std::string& path);
Result<Chain> parseChain(const std::string& text, const std::string& source);

// Writes the chain's spec (writeFileAtomically, atomic_file.hpp); abstract layers write every field.
Status saveChainFile(const ChainSpec& spec, const std::string& path, const WriteOptions& options = {});
std::string chainSpecToText(const ChainSpec& spec);

}  // namespace remat
