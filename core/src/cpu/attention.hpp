#pragma once
// The transformer block's own kernels (kernels_attention.cpp): attention over [N, heads, S, d/h]
// in its two memory rules (docs/memory-model.md section 12.1), the head split and merge copies,
// and GELU in its erf and tanh forms. Internal to core/src/cpu.
//
// Math attention materialises the [N, h, S, S] probabilities (softmax's result, what its backward
// and PV's keep); the fused rule is flash attention: blocked over the sequence in tiles of
// kAttentionTile queries x kAttentionTile keys with an online softmax, so no S x S matrix exists;
// it saves only the output and the [N, h, S] float32 log-sum-exp, and its backward recomputes the
// probabilities tile by tile from q, k and the log-sum-exp. Every output element is computed by
// one thread in a fixed order (tiles are split over (sample, head[, query tile]) only): bitwise
// reproducible at any thread count. The kernels allocate nothing: a tile's scores live in the
// per-thread scratch the caller passes (threads x attentionThreadFloats()).
#include "kernels.hpp"

namespace remat::cpu {

inline constexpr Index kAttentionTile = 64;

struct AttentionGeometry {
  Index batch = 0, seq = 0, heads = 0, headDim = 0;
  bool causal = false;  // GPT: position i attends to keys j <= i
  int threads = 1;      // the device's thread count, which sized the per-thread scratch
  Index width() const { return heads * headDim; }
  Index tokens() const { return batch * seq; }
};

// Floats of per-thread scratch the flash kernels need (forward and backward alike).
Index attentionThreadFloats(const AttentionGeometry& g);

// rows [N*S][rowStride], head h's columns at column0 + h*dh  <->  heads [N][h][S][dh].
void rowsToHeads(const AttentionGeometry& g, const float* rows, Index rowStride, Index column0, float* heads);
void headsToRows(const AttentionGeometry& g, const float* heads, float* rows, Index rowStride, Index column0);

// Math: probs = softmax(q k^T / sqrt(dh) [+ causal mask]) ([N][h][S][S]), out = probs v.
void mathAttentionForward(const AttentionGeometry& g, const float* q, const float* k, const float* v, float* probs,
                          float* out);
// From the saved q, k, v copies and probabilities: dq, dk, dv written into the token rows dqkv
// [N*S][3d] (q | k | v); dProbs is an [N][h][S][S] scratch.
void mathAttentionBackward(const AttentionGeometry& g, const float* q, const float* k, const float* v,
                           const float* probs, const float* dOut, float* dProbs, float* dqkv);

// Fused (flash): q, k, v read from the token rows qkv [N*S][3d]; out [N][h][S][dh]; lse [N][h][S].
void flashAttentionForward(const AttentionGeometry& g, const float* qkv, float* out, float* lse, float* threadScratch);
// rowDot: an [N][h][S] scratch (sum_j dOut * out per query); dqkv [N*S][3d] written.
void flashAttentionBackward(const AttentionGeometry& g, const float* qkv, const float* out, const float* lse,
                            const float* dOut, float* dqkv, float* rowDot, float* threadScratch);

// GELU, y = x * Phi(x) (erf) or PyTorch's approximate='tanh' form; the backward reads x and may
// run in place (dx == dy).
void geluForward(Index count, bool tanhForm, const float* x, float* y);
void geluBackward(Index count, bool tanhForm, const float* x, const float* dy, float* dx);

}  // namespace remat::cpu
