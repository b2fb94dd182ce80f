#pragma once
// Attention's bfloat16 kernels for bf16-mixed on the GPU (kernels_attention_half.cu; docs/gpu.md):
// the head split and merge on bfloat16 rows, and the fused rule's flash attention on bfloat16 q, k,
// v as PyTorch 2's SDPA under autocast runs it and the CPU's kernels_attention_half.cpp computes it:
// float32 scores and probabilities inside the kernel (never stored), float32 accumulation, the
// output rounded once to bfloat16, the [N, h, S] log-sum-exp float32. The sums run in the CPU's
// order (one thread per query row for the output and dq, per key row for dk and dv, keys or queries
// in increasing order), so results agree with the CPU's up to the rounding of fused multiply-adds.
// Dropout draws the float32 kernels' mask (kernels_attention.hpp). No atomics, no allocation.
// Not yet called by a layer: the bfloat16 transformer_block (issue 24) is the next step.
// Internal to gpu/.
#include "kernels_attention.hpp"
#include "kernels_half.hpp"

namespace remat::gpu::kernels {

// rows [N*S][rowStride] (head h's columns at column0 + h*dh)  <->  heads [N][h][S][dh], bfloat16.
Status rowsToHeadsHalf(cudaStream_t stream, const AttentionShape& g, const Bf16* rows, Index rowStride, Index column0,
                       Bf16* heads);
Status headsToRowsHalf(cudaStream_t stream, const AttentionShape& g, const Bf16* heads, Bf16* rows, Index rowStride,
                       Index column0);

// Math attention's softmax in bfloat16 (the CPU's softmaxRow), in place over the [N][h][S][S]
// scores that q k^T wrote in bfloat16: each score scaled and rounded (the bf16 mul), softmax in
// float32, the probabilities rounded to bfloat16, zero above the causal diagonal. With dropout
// (drop active) also the byte mask [N][h][S][S] and the dropped bfloat16 probabilities P v reads
// (element ((n*h + h)*S + i)*S + j drawn, the fused rule's index); otherwise both may be null.
Status attentionSoftmaxHalf(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop, Bf16* scores,
                            std::uint8_t* mask, Bf16* dropped);
// In place over dP [N][h][S][S] (dO v^T, bfloat16): through the dropout mask (scaled and rounded),
// then d(scores) = bfloat16(bfloat16(P (dP - sum_j P dP)) * scale), zero above the diagonal: what
// dq = dS k and dk = dS^T q read (the CPU's headBackward).
Status attentionSoftmaxBackwardHalf(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop,
                                    const Bf16* probs, const std::uint8_t* mask, Bf16* dProbs);

// Flash forward: q, k, v read from the bfloat16 token rows qkv [N*S][3d]; out [N][h][S][dh]
// bfloat16; lse [N][h][S] float32 of the scaled scores before dropout.
Status flashAttentionForwardHalf(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop,
                                 const Bf16* qkv, Bf16* out, float* lse);
// dOut [N][h][S][dh] bfloat16; the probabilities recomputed from q, k and lse; dqkv [N*S][3d]
// bfloat16 written (every element).
Status flashAttentionBackwardHalf(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop,
                                  const Bf16* qkv, const Bf16* out, const float* lse, const Bf16* dOut, Bf16* dqkv);

}  // namespace remat::gpu::kernels
