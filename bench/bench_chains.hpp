#pragma once
// The seeded random chains every benchmark program plans (seed 2025, activations of 1..64 KiB),
// built once per size and kind.
#include <map>
#include <utility>

#include "remat/model/random_chain.hpp"

namespace remat::bench {

// "cnn": CNN-like layers (u nondecreasing: linear's deque path). "mixed": random flags, extras and
// workspaces (u not monotone: linear's heap path). "equal": equal sizes, conv-like flags (every
// plan ties with its mirror images).
enum class Kind { Cnn, Mixed, Equal };

inline const Chain& chainOf(std::size_t n, Kind kind) {
  static std::map<std::pair<std::size_t, Kind>, Chain> cache;
  auto it = cache.find({n, kind});
  if (it == cache.end()) {
    RandomChainOptions o;
    o.layers = n;
    o.seed = 2025;
    o.cnnLike = kind == Kind::Cnn;
    o.equalSizes = kind == Kind::Equal;
    o.mixFlags = kind != Kind::Equal;
    o.extras = kind != Kind::Equal;
    o.workspaces = kind != Kind::Equal;
    o.maxUnits = 64;
    it = cache.emplace(std::make_pair(n, kind), makeRandomChain(o)).first;
  }
  return it->second;
}

}  // namespace remat::bench
