#pragma once
// Math attention on the GPU (cuda_attention.cpp), shared by transformer_block and swin_block: the
// [N, h, S, S] probabilities materialised (what PyTorch's softmax and PV keep), the matmuls as
// cuBLAS strided-batched GEMMs over the N*h heads, the softmax kernels_attention.cu's. Internal
// to gpu/.
#include "cuda_transformer.hpp"
#include "kernels_attention.hpp"

namespace remat::gpu {

// The probabilities' dropout: the site's key, p, the mask (bytes) and the dropped probabilities
// PV reads; inactive when p = 0.
struct MathAttentionDropout {
  std::uint64_t key = 0;
  double p = 0.0;
  std::uint8_t* mask = nullptr;
  float* dropped = nullptr;
};

// Heads-layout q, k, v [N][h][S][dh] and the probabilities [N][h][S][S].
struct MathAttention {
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  float* probs = nullptr;
  MathAttentionDropout drop;
};

// probs = softmax(q k^T / sqrt(dh) [+ bias] [+ causal mask]); out [N][h][S][dh] = dropout(probs) v.
Status mathAttentionForward(const LayerContext& c, const kernels::AttentionShape& g, const MathAttention& m,
                            const kernels::ScoreBias& bias, float* out);
// From dOut [N][h][S][dh]: square ([N][h][S][S]) ends holding d(scores); grads (3 * N*S*d floats)
// holds dq, dk, dv per head, then merged into the token rows dqkv [N*S][3d] (q | k | v).
Status mathAttentionBackward(const LayerContext& c, const kernels::AttentionShape& g, const MathAttention& m,
                             const float* dOut, float* square, float* grads, float* dqkv);

}  // namespace remat::gpu
