#pragma once
// Chain files, format "remat-chain/1" (docs/formats.md). Loading is all-or-nothing:
// either a whole valid chain or an error naming the file, the layer (index and name) and the
// field. Saving writes a temporary file and renames it.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "remat/model/chain.hpp"
#include "remat/base/status.hpp"

namespace remat {

inline constexpr const char* kChainFormat = "remat-chain/1";

// Parses a chain spec from JSON text; `source` names the file in messages.
Result<ChainSpec> parseChainSpec(const std::string& text, const std::string& source);
Result<ChainSpec> chainSpecFromJson(const nlohmann::json& json, const std::string& source);
nlohmann::json chainSpecToJson(const ChainSpec& spec);

// Reads, parses and builds (shape inference) a chain.
Result<Chain> loadChainFile(const std::string& path);
Result<Chain> parseChain(const std::string& text, const std::string& source);

// Writes the chain's spec; abstract layers write every field.
Status saveChainFile(const ChainSpec& spec, const std::string& path);
std::string chainSpecToText(const ChainSpec& spec);

// Writes text to path through a temporary file in the same folder and a rename, so a failed
// write never leaves a half-written file behind.
Status writeFileAtomically(const std::string& path, const std::string& text);

}  // namespace remat
