#pragma once
// Math attention and the head copies in bfloat16, as PyTorch 1.13's CPU autocast runs nanoGPT's
// attention (docs/memory-model.md 12.10): q k^T and P v are bf16 matmuls (float32 accumulation, a
// bfloat16 result), the scale multiplies the bfloat16 scores, softmax follows its bfloat16 input
// (computed in float32, its probabilities rounded to bfloat16: what autograd saves). The backward
// rounds each matmul's and softmax's result to bfloat16 the same way. Plain loops: each (sample,
// head) pair is one task of the OpenMP team and every sum runs in one fixed order, so the results
// do not depend on the thread count. Internal to core/src/cpu.
#include "attention.hpp"
#include "kernels.hpp"

namespace remat::cpu {

// rows [N*S][rowStride] (head h's columns at column0 + h*dh) <-> heads [N][h][S][dh], bfloat16.
void rowsToHeadsHalf(const AttentionGeometry& g, const BFloat16* rows, Index rowStride, Index column0, BFloat16* heads);
void headsToRowsHalf(const AttentionGeometry& g, const BFloat16* heads, BFloat16* rows, Index rowStride, Index column0);

// Floats of per-thread scratch the bfloat16 math kernels need.
Index halfAttentionThreadFloats(const AttentionGeometry& g);

// Math attention's dropout in bfloat16: the mask [N][h][S][S] (bytes, drawn at the fused rule's
// indices) and the dropped probabilities P v reads. Inactive (p = 0): both null.
struct HalfAttentionDropout {
  DropoutDraw draw;
  std::uint8_t* mask = nullptr;
  BFloat16* dropped = nullptr;
};

// probs [N][h][S][S] (bfloat16, zero above the causal diagonal), out [N][h][S][dh] bfloat16.
void mathAttentionForwardHalf(const AttentionGeometry& g, const BFloat16* q, const BFloat16* k, const BFloat16* v,
                              BFloat16* probs, BFloat16* out, float* threadScratch,
                              const HalfAttentionDropout& drop = {});
// dOut [N][h][S][dh]; dq, dk, dv written into the token rows dqkv [N*S][3d] (q | k | v).
void mathAttentionBackwardHalf(const AttentionGeometry& g, const BFloat16* q, const BFloat16* k, const BFloat16* v,
                               const BFloat16* probs, const BFloat16* dOut, BFloat16* dqkv, float* threadScratch,
                               const HalfAttentionDropout& drop = {});

}  // namespace remat::cpu

namespace remat::cpu {

// Fused attention in bfloat16 (PyTorch 2's SDPA under autocast: bfloat16 q, k, v, output; the
// log-sum-exp float32; the probabilities float32 inside the kernel and never stored): q, k, v read
// from the token rows qkv [N*S][3d]; out [N][h][S][dh]; lse [N][h][S].
// Dropout (drop active) is drawn per element and never stored, as in float32.
void fusedAttentionForwardHalf(const AttentionGeometry& g, const BFloat16* qkv, BFloat16* out, float* lse,
                               float* threadScratch, const DropoutDraw& drop = {});
// The probabilities recomputed from q, k and lse; dqkv [N*S][3d] written.
void fusedAttentionBackwardHalf(const AttentionGeometry& g, const BFloat16* qkv, const BFloat16* out, const float* lse,
                                const BFloat16* dOut, BFloat16* dqkv, float* threadScratch,
                                const DropoutDraw& drop = {});

}  // namespace remat::cpu

namespace remat::cpu {

// GELU (tanh form: GPT-2's approximate='tanh'; else erf) on bfloat16 tensors, computed in float32
// and rounded once, in place allowed; its backward turns dyDx from d(output) into d(input). No
// workspace: each thread widens a small chunk on its stack.
void geluForwardHalf(Index count, bool tanhForm, const BFloat16* x, BFloat16* y);
void geluBackwardHalf(Index count, bool tanhForm, const BFloat16* x, BFloat16* dyDx);

}  // namespace remat::cpu
