#pragma once
// The zoo's Swin Transformer (zoo_swin.cpp): torchvision's swin_t as a chain of one layer per patch
// embedding, Swin block, patch merging and head. Internal to core; zoo.cpp lists it.
#include <optional>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/zoo.hpp"

namespace remat::detail {

std::vector<ZooEntry> swinZooModels();
// The model's chain spec, checked by shape inference; nullopt when `name` is not a Swin model.
std::optional<Result<ChainSpec>> swinZooChain(std::string_view name, const ZooOptions& options);

}  // namespace remat::detail
