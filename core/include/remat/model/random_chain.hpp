#pragma once
// Seeded random abstract chains for tests and benchmarks. The generator is our own SplitMix64 and
// bounded draws by modulo, never std:: distributions, so a (seed, options) pair gives the very same
// chain on every platform and standard library.
#include <cstdint>

#include "remat/model/chain.hpp"

namespace remat {

// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fast, portable 64-bit generator.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform-enough integer in [0, bound); bound 0 gives 0. Modulo bias is below 2^-40 for the
  // small bounds used here, and it is deterministic, which is what matters.
  std::uint64_t below(std::uint64_t bound);
  // True with probability numerator / denominator.
  bool chance(std::uint64_t numerator, std::uint64_t denominator);

 private:
  std::uint64_t state_;
};

struct RandomChainOptions {
  std::size_t layers = 8;
  std::uint64_t seed = 0;
  // Draw needs_input / needs_output per layer; off: every layer is conv-like (in, not out).
  bool mixFlags = true;
  // Some layers save extra bytes for their backward (batch-norm statistics, dropout masks).
  bool extras = true;
  // Some layers need forward / backward workspaces.
  bool workspaces = true;
  // Every activation has the same size (many ties between plans).
  bool equalSizes = false;
  // CNN-like: conv / batch-norm / relu / pool / dropout patterns whose activations never grow
  // along the chain, and where an activation that no backward reads is followed by one of the
  // same size (so u(k) = T(k-1) + a(k) is nondecreasing, like the zoo). Overrides mixFlags and
  // equalSizes.
  bool cnnLike = false;
  std::uint64_t unitBytes = 1024;  // sizes are multiples of this
  std::uint64_t maxUnits = 16;     // activations are 1..maxUnits units (general mode)
};

// A chain of abstract layers named "L1".."Ln"; the input is one unit (CNN mode: the first
// activation's size). Costs are drawn too (fwd 0.5..4, bwd twice the forward).
Chain makeRandomChain(const RandomChainOptions& options);

// Options that mix every feature, chosen from the seed: the generator the brute-force tests use
// (about a quarter CNN-like, a sixth equal sizes, the rest general with random flags, extras and
// workspaces switched on and off independently).
RandomChainOptions mixedRandomChainOptions(std::size_t layers, std::uint64_t seed);

}  // namespace remat
