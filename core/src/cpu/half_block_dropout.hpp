// The dropout of the bfloat16 transformer blocks (bf16-mixed run_transformer_half.cpp and pure
// bf16 run_transformer_pure.cpp), the same on either's prep: a residual branch's on its bfloat16
// output (site 1: the attention's, 2: the MLP's; masks in E), its backward, and math attention's
// (site 3: the dropped probabilities and their mask in E).
#pragma once

#include <cstdint>

#include "attention_half.hpp"
#include "block_prep.hpp"

namespace remat::cpu {

// In place, the mask (1 byte per element) into E.
template <typename Prep>
void halfBranchDropout(const Prep& t, const HalfBlockTensors& s, int site, BFloat16* branch) {
  if (!s.drop.active()) return;
  const DropoutDraw draw = s.drop.site(static_cast<std::uint64_t>(site));
  std::uint8_t* mask = s.bytes(site == 1 ? t.mask1 : t.mask2);
  const Index count = t.tokens * t.width;
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) {
    const bool keep = draw.keep(static_cast<std::uint64_t>(i));
    mask[i] = keep ? 1 : 0;
    branch[i] = BFloat16(keep ? branch[i].value() * draw.scale : 0.0f);
  }
}

// On the branch's bfloat16 d(output), in place.
template <typename Prep>
void halfBranchDropoutBackward(const Prep& t, const HalfBlockTensors& s, int site, BFloat16* grad) {
  if (!s.drop.active()) return;
  const std::uint8_t* mask = s.bytes(site == 1 ? t.mask1 : t.mask2);
  const Index count = t.tokens * t.width;
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) grad[i] = BFloat16(mask[i] ? grad[i].value() * s.drop.scale : 0.0f);
}

template <typename Prep>
HalfAttentionDropout halfMathDropout(const Prep& t, const HalfBlockTensors& s) {
  if (!s.drop.active()) return {};
  return {s.drop.site(3), s.bytes(t.attnMask), s.at(t.dropped)};
}

}  // namespace remat::cpu
