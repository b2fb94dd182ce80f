#pragma once
// The GPU's bfloat16 layout of Swin's kinds under bf16-mixed (docs/gpu.md; docs/memory-model.md
// 12.10, "Swin under autocast"): what the GPU's kernels save per layer, tensor for tensor the CPU's
// (core/src/cpu/run_swin_half.cpp, run_swin_ends_half.cpp): the bfloat16 stream, the norms' float32
// statistics, the linears' and the patch conv's bfloat16 weight copies, the image's cast, the
// windowed attention's bfloat16 tensors beside softmax's float32 result. checkHalfSwinLayer proves
// the chain's numbers equal this layout before anything runs. Internal to gpu/.
#include <cstdint>

#include "remat/exec/layer_checks.hpp"
#include "remat/model/chain.hpp"

namespace remat::gpu {

// swin_block's E (byte offsets, packed in the CPU's order). Unused regions are 0 bytes wide.
struct HalfSwinBlockLayout {
  std::uint64_t stats1 = 0, stats2 = 0;  // norm1's, norm2's mean and rstd (float32)
  std::uint64_t windowed = 0, qkvCopy = 0, q = 0, k = 0, v = 0;
  std::uint64_t qkvOut = 0;  // one window in the batch: qkv's output in place of the k and v copies
  std::uint64_t merged = 0, projCopy = 0;
  std::uint64_t probs32 = 0, probs16 = 0;  // softmax's float32 result, P @ v's bfloat16 cast of it
  std::uint64_t h1 = 0, ln2Out = 0, fc1Copy = 0, fc = 0, gelu = 0, fc2Copy = 0;
  std::uint64_t noise = 0;  // stochastic depth's two bfloat16 noises [N] (p > 0)
  std::uint64_t savedBytes = 0;
};

// swin_embedding's, patch_merging's and swin_head's E: `stats` the norm's float32 statistics, `a`
// and `b` bfloat16 tensors, `copy` the weight copy (`cast`: the embedding's image cast).
//   swin_embedding: [cast][copy][a: the conv's output][stats]
//   patch_merging:  [a: the 2x2 concatenation][b: the norm's output][stats][copy]
//   swin_head:      [stats][a: the normalised map][b: the pooled [N, C]][copy]
struct HalfSwinEndLayout {
  std::uint64_t cast = 0, copy = 0, a = 0, b = 0, stats = 0, savedBytes = 0;
};

HalfSwinBlockLayout halfSwinBlockLayout(const Shape& input, const LayerSpec& spec);
HalfSwinEndLayout halfSwinEndLayout(LayerKind kind, const Shape& input, const Shape& output, const LayerSpec& spec);

bool isSwinKind(LayerKind kind);

// Layer l (a Swin kind) of a bf16-mixed chain: its parameters, in / out flags and E equal the GPU's
// bfloat16 layout; the embedding reads the float32 image (`inputHalf` false), the others the
// bfloat16 stream of a Swin layer before them (`inputHalf`); C even and every float32 region 4-byte
// aligned, as the kernels need. Errors name the layer (check's label).
Status checkHalfSwinLayer(const Chain& chain, std::size_t l, bool inputHalf, const LayerChecks& check);

}  // namespace remat::gpu
