#pragma once
// The transformer block's own CUDA kernels (kernels_attention.cu), mirroring core/src/cpu/attention.hpp:
// the head split and merge copies, GELU in its erf and tanh forms, math attention's row softmax
// (scale, causal mask) and its backward, and the fused rule's flash attention, which streams over
// the keys of each query and never forms an S x S matrix: it saves only the output and the
// [N, h, S] log-sum-exp and recomputes the probabilities from q, k and it in the backward. Every
// output element is computed by one thread in a fixed order (no atomics): bitwise reproducible.
// Dropout inside attention draws element (n, h, i, j) at index ((n*h + h)*S + i)*S + j of the
// attention site's key, the CPU's rule, so the fused backward regenerates the forward's mask.
// None of them allocates memory. Internal to gpu/.
#include "kernels.hpp"
#include "remat/exec/counter_rng.hpp"  // REMAT_HOST_DEVICE

namespace remat::gpu::kernels {

struct AttentionShape {
  Index batch = 0, seq = 0, heads = 0, headDim = 0;
  bool causal = false;
  REMAT_HOST_DEVICE Index width() const { return heads * headDim; }
  REMAT_HOST_DEVICE Index tokens() const { return batch * seq; }
  REMAT_HOST_DEVICE Index rows() const { return batch * heads * seq; }  // (n, h, i) query rows
};

// The probabilities' dropout: key of the attention site and p (inactive when p = 0).
struct AttentionDrop {
  std::uint64_t key = 0;
  double p = 0.0;
  bool active() const { return p > 0.0; }
};

// rows [N*S][rowStride], head h's columns at column0 + h*dh  <->  heads [N][h][S][dh].
Status rowsToHeads(cudaStream_t stream, const AttentionShape& g, const float* rows, Index rowStride, Index column0,
                   float* heads);
Status headsToRows(cudaStream_t stream, const AttentionShape& g, const float* heads, float* rows, Index rowStride,
                   Index column0);

// GELU, y = x * Phi(x) (erf) or PyTorch's approximate='tanh' form; the backward reads x and may
// run in place (dx == dy).
Status geluForward(cudaStream_t stream, Index count, bool tanhForm, const float* x, float* y);
Status geluBackward(cudaStream_t stream, Index count, bool tanhForm, const float* x, const float* dy, float* dx);

// Additive terms of the scores before the softmax (Swin's shifted-window attention): a per-head
// [h][S][S] bias and a per-window [windows][S][S] mask, batch entry n being window n % windows of
// its image. Null: none.
struct ScoreBias {
  const float* perHead = nullptr;
  const float* perWindow = nullptr;
  Index windows = 1;
};

// In place over the [N][h][S][S] scores: probs = softmax(scores * scale [+ bias]) with keys j > i
// masked (causal); one thread per row.
Status attentionSoftmax(cudaStream_t stream, const AttentionShape& g, float scale, float* scores,
                        const ScoreBias& bias = {});
// In place over dProbs [N][h][S][S]: d(scores) = P * (dP - sum_j dP * P) (the scale is applied by
// the caller's matmuls).
Status attentionSoftmaxBackward(cudaStream_t stream, const AttentionShape& g, const float* probs, float* dProbs);

// Flash (fused) forward: q, k, v read from the token rows qkv [N*S][3d]; out [N][h][S][dh];
// lse [N][h][S] of the scaled scores before dropout.
Status flashAttentionForward(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop, const float* qkv,
                             float* out, float* lse);
// dOut [N][h][S][dh]; rowDot an [N][h][S] scratch (sum_c dOut * out); dqkv [N*S][3d] written.
Status flashAttentionBackward(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop, const float* qkv,
                              const float* out, const float* lse, const float* dOut, float* dqkv, float* rowDot);

}  // namespace remat::gpu::kernels
