#pragma once
// Token ids as a chain's data input (docs/memory-model.md 12.9): a chain whose first layer is a
// token_embedding reads PyTorch's torch.long ids [N, S], so x0 is int64 whatever the chain's dtype
// (the activations' type): ChainBuilder counts a(0) at kTokenIdBytes per element, the CPU executor
// stores the ids as int64, and the front ends show the input as int64.
#include <cstdint>
#include <string_view>

#include "remat/model/chain.hpp"

namespace remat {

inline constexpr std::uint64_t kTokenIdBytes = 8;

bool hasTokenIds(const ChainSpec& spec);  // the first layer is a token_embedding
bool hasTokenIds(const Chain& chain);
// The input's element type as the front ends name it: "int64" for token ids, else dtypeName(dtype).
std::string_view inputDTypeName(const Chain& chain);

}  // namespace remat
