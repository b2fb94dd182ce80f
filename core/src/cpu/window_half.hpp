#pragma once
// Swin's kernels under bf16-mixed (kernels_window_half.cpp; docs/memory-model.md 12.10, "Swin under
// autocast"): the window and merge gathers on bfloat16 rows, the half adds, the average pool, and
// the windowed attention as PyTorch 2's CPU autocast runs it: q * scale and q k^T in bfloat16, the
// float32 bias table's gather added (type promotion: float32 scores), the shift mask added, softmax
// in float32 (its result saved), P's bfloat16 cast (saved by P @ v) times v in bfloat16. Each
// (window, head) pair is one task and every sum runs in one fixed order: the results do not depend
// on the thread count. Internal to core/src/cpu.
#include "attention.hpp"
#include "window.hpp"

namespace remat::cpu {

// The gathers of window.hpp on bfloat16 rows (C even: a row is C / 2 float32 words, moved unchanged).
void windowPartitionHalf(const WindowGeometry& g, const BFloat16* x, BFloat16* windows);
void windowReverseHalf(const WindowGeometry& g, const BFloat16* windows, BFloat16* y);
void mergeGatherHalf(Index batch, Index height, Index width, Index channels, const BFloat16* x, BFloat16* cat);
void mergeScatterHalf(Index batch, Index height, Index width, Index channels, const BFloat16* dCat, BFloat16* dx);

// out = bf16(a + b); out may be a or b. And out = bf16(a + bf16(b)) with b float32 (a half tensor
// plus a float32 gradient rounded to the tensor's dtype first, as autograd's engine casts it).
void addHalf(Index count, const BFloat16* a, const BFloat16* b, BFloat16* out);
void addHalfRounded(Index count, const BFloat16* a, const float* b, BFloat16* out);
// y = bf16(x * factor[sample]) (stochastic depth's bfloat16 noise; y may be x).
void scaleSamplesHalf(Index batch, Index perSample, const BFloat16* factor, const BFloat16* x, BFloat16* y);
// pooled = bf16(mean over positions), summed in float32; the backward d(map) = bf16(dPooled / positions), widened.
void averagePositionsHalf(Index batch, Index positions, Index channels, const BFloat16* x, BFloat16* pooled);
void averagePositionsHalfBackward(Index batch, Index positions, Index channels, const BFloat16* dPooled, float* dx);

// Floats of per-thread scratch the windowed attention needs.
Index swinAttentionThreadFloats(const AttentionGeometry& g);

// The windowed attention's inputs: q (already scaled and rounded), k, v [N*nW][h][L][dh] bfloat16;
// the gathered bias [h][L][L] and the shift mask [nW][L][L] (null: not shifted), float32.
struct SwinHalfAttention {
  const AttentionGeometry& g;
  const BFloat16 *q, *k, *v;
  const float* bias;
  const float* mask;
  Index windows;      // nW: which mask a batch entry takes (entry % nW)
  bool pure = false;  // pure bf16: each score add rounds to bfloat16, no float32 probabilities
};

// probs32 [N*nW][h][L][L] float32 (softmax's result), probs16 its bfloat16 cast, out [..][L][dh] bfloat16.
// Pure: probs32 null, probs16 softmax's bfloat16 result (from bfloat16 scores).
void swinAttentionForwardHalf(const SwinHalfAttention& a, float* probs32, BFloat16* probs16, BFloat16* out,
                              float* threadScratch);
// dOut [N*nW][h][L][dh]; dq (through the scale), dk, dv written into the window rows dqkv [Tp][3C]
// (q | k | v); dScores [N*nW][h][L][L] float32 (the bias table's gradient is summed from it; pure:
// rounded to bfloat16, softmax's bfloat16 backward, from probs16).
void swinAttentionBackwardHalf(const SwinHalfAttention& a, const float* probs32, const BFloat16* probs16,
                               const BFloat16* dOut, float scale, BFloat16* dqkv, float* dScores, float* threadScratch);

}  // namespace remat::cpu
