#pragma once
// The zoo's transformers (zoo_transformers.cpp): GPT-2 small, BERT-base and ViT-B/16 as chains of
// one layer per embedding, encoder/decoder layer and head. Internal to core; zoo.cpp lists them.
#include <optional>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/zoo.hpp"

namespace remat::detail {

std::vector<ZooEntry> transformerZooModels();
// The model's chain spec, checked by shape inference; nullopt when `name` is not a transformer.
std::optional<Result<ChainSpec>> transformerZooChain(std::string_view name, const ZooOptions& options);

}  // namespace remat::detail
