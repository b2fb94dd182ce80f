#pragma once
// The transformer block's own kernels (kernels_attention.cpp): attention over [N, heads, S, d/h]
// in its two memory rules (docs/memory-model.md section 12.1), the head split and merge copies,
// and GELU in its erf and tanh forms. Internal to core/src/cpu.
//
// Math attention (dnnl_attention.hpp) materialises the [N, h, S, S] probabilities (softmax's
// result, what its backward and PV's keep); the fused rule is flash attention: blocked over the sequence in tiles of
// kAttentionTile queries x kAttentionTile keys with an online softmax, so no S x S matrix exists;
// it saves only the output and the [N, h, S] float32 log-sum-exp, and its backward recomputes the
// probabilities tile by tile from q, k and the log-sum-exp. Every output element is computed by
// one thread in a fixed order (tiles are split over (sample, head[, query tile]) only): bitwise
// reproducible at any thread count. The kernels allocate nothing: a tile's scores live in the
// per-thread scratch the caller passes (threads x attentionThreadFloats()).
#include "kernels.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::cpu {

inline constexpr Index kAttentionTile = 64;

// Dropout inside the transformer kinds: element `index` of a stream is kept when the counter-based
// generator's uniform at (key, index) is >= p, the plain dropout layer's rule, and kept elements are
// scaled by 1/(1-p). A pure function of (key, index): a recompute, or the fused attention's backward
// (which keeps no mask, as PyTorch 2's SDPA regenerates it from its philox seed and offset), draws
// the very same mask. p = 0: inactive, every element kept unscaled.
struct DropoutDraw {
  std::uint64_t key = 0;
  float p = 0.0f, scale = 1.0f;
  DropoutDraw() = default;
  DropoutDraw(std::uint64_t streamKey, double probability)
      : key(streamKey),
        p(static_cast<float>(probability)),
        scale(probability < 1.0 ? static_cast<float>(1.0 / (1.0 - probability)) : 0.0f) {}
  bool active() const { return p > 0.0f; }
  bool keep(std::uint64_t index) const { return p < 1.0f && rng::uniform01(rng::at(key, index)) >= p; }
  // The sub-stream of one dropout site of a layer (attention, first and second residual, embedding).
  DropoutDraw site(std::uint64_t which) const {
    DropoutDraw d = *this;
    d.key = rng::mix64(key ^ which);
    return d;
  }
};

// y = dropout(x) over `count` elements (y may be x), the mask (1 byte per element, 1 = kept) into
// `mask` when it is not null; and the backward dx = mask ? dy * scale : 0 (dx may be dy).
void dropoutFlat(Index count, const DropoutDraw& draw, const float* x, float* y, std::uint8_t* mask);
void dropoutFlatBackward(Index count, const DropoutDraw& draw, const std::uint8_t* mask, const float* dy, float* dx);

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

// The probabilities' dropout of math attention, as PyTorch keeps it: the mask [N][h][S][S] (bytes)
// and the dropped probabilities PV's matmul reads. Both null (and draw inactive) when p = 0.
struct AttentionDropout {
  DropoutDraw draw;
  std::uint8_t* mask = nullptr;
  float* dropped = nullptr;
};

// Additive terms of the scores before the softmax (Swin's shifted-window attention): a per-head
// [h][S][S] bias (the relative position bias gathered from its table) and a per-window [windows][S][S]
// mask (the shift mask), where batch entry n is window n % windows of its image. Null: none.
struct ScoreBias {
  const float* perHead = nullptr;
  const float* perWindow = nullptr;
  Index windows = 1;
};

// Math attention (probs = softmax(q k^T / sqrt(dh) [+ bias] [+ causal mask]), out = dropout(probs) v,
// and its backward) is MathAttentionOp on oneDNN's primitives (dnnl_attention.hpp).

// Fused (flash): q, k, v read from the token rows qkv [N*S][3d]; out [N][h][S][dh]; lse [N][h][S]
// (of the probabilities before dropout). Dropout is drawn tile by tile and never stored.
void flashAttentionForward(const AttentionGeometry& g, const DropoutDraw& drop, const float* qkv, float* out,
                           float* lse, float* threadScratch);
// rowDot: an [N][h][S] scratch (sum_j dOut * out per query, which equals sum_j P * dP with dropout
// too); dqkv [N*S][3d] written; the dropout regenerated from `drop`.
void flashAttentionBackward(const AttentionGeometry& g, const DropoutDraw& drop, const float* qkv, const float* out,
                            const float* lse, const float* dOut, float* dqkv, float* rowDot, float* threadScratch);

// GELU, y = x * Phi(x) (erf) or PyTorch's approximate='tanh' form; the backward reads x and may
// run in place (dx == dy).
void geluForward(Index count, bool tanhForm, const float* x, float* y);
void geluBackward(Index count, bool tanhForm, const float* x, const float* dy, float* dx);

}  // namespace remat::cpu
