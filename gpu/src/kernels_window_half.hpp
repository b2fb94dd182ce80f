#pragma once
// Swin's kernels under bf16-mixed on the GPU (docs/gpu.md; docs/memory-model.md 12.10, "Swin under
// autocast"): the CPU's window_half.hpp element for element. The gathers, stochastic depth's noise
// and scaling and the head's average are kernels_window.cu's float32 kernels instantiated on
// bfloat16 (each written element rounded once, half_io.cuh); GELU is kernels_attention.cu's,
// widened and rounded per element; the windowed attention's softmax is kernels_attention.cu's row
// softmax reading bfloat16 scores, promoted to float32 by the float32 relative position bias (and
// the shift mask), writing softmax's float32 result and its bfloat16 cast; its backward reads the
// float32 result. Internal to gpu/.
#include "kernels_attention.hpp"
#include "kernels_half.hpp"
#include "kernels_window.hpp"

namespace remat::gpu::kernels {

// kernels_window.hpp's gathers on bfloat16 rows.
Status windowPartitionHalf(cudaStream_t stream, const WindowShape& g, const Bf16* x, Bf16* windows);
Status windowReverseHalf(cudaStream_t stream, const WindowShape& g, const Bf16* windows, Bf16* y);
Status mergeGatherHalf(cudaStream_t stream, Index batch, Index height, Index width, Index channels, const Bf16* x,
                       Bf16* cat);
Status mergeScatterHalf(cudaStream_t stream, Index batch, Index height, Index width, Index channels, const Bf16* dCat,
                        Bf16* dx);
// Stochastic depth's noise in bfloat16 (the noise takes the input's dtype; the float32 draw) and
// y = bfloat16(x * factor[sample]).
Status stochasticDepthNoiseHalf(cudaStream_t stream, Index batch, double p, std::uint64_t key, Bf16* noise);
Status scaleSamplesHalf(cudaStream_t stream, Index batch, Index perSample, const Bf16* factor, const Bf16* x, Bf16* y);
// pooled = bfloat16(mean over positions) summed in float32; dx = bfloat16(dPooled / positions).
Status averagePositionsHalf(cudaStream_t stream, Index batch, Index positions, Index channels, const Bf16* x,
                            Bf16* pooled);
Status averagePositionsBackwardHalf(cudaStream_t stream, Index batch, Index positions, Index channels,
                                    const Bf16* dPooled, Bf16* dx);
// y = bfloat16(x * factor): q * scale (a bfloat16 mul), and d(q) through it.
Status scaleHalf(cudaStream_t stream, Index count, float factor, const Bf16* x, Bf16* y);

// GELU (erf or tanh form) computed in float32 from bfloat16 and rounded once; the backward reads x
// and may run in place (dx == dy).
Status geluForwardHalf(cudaStream_t stream, Index count, bool tanhForm, const Bf16* x, Bf16* y);
Status geluBackwardHalf(cudaStream_t stream, Index count, bool tanhForm, const Bf16* x, const Bf16* dy, Bf16* dx);

// The windowed attention's softmax under autocast, over the [N*nW][h][L][L] bfloat16 scores q k^T
// wrote (q already scaled): each row's scores widened, the float32 bias (and mask) added, softmax in
// float32 into probs32, and its bfloat16 cast written over the scores (what P @ v reads).
Status swinSoftmaxHalf(cudaStream_t stream, const AttentionShape& g, const ScoreBias& bias, Bf16* scores,
                       float* probs32);
// Its backward, in place over d(P) (dO v^T, bfloat16): d(scores) = P (dP - sum_j P dP) in float32
// from softmax's float32 result into dScores32 (the bias table's gradient is summed from it), and
// rounded to bfloat16 over d(P) (what dS k and dS^T q read).
Status swinSoftmaxBackwardHalf(cudaStream_t stream, const AttentionShape& g, const float* probs32, Bf16* dProbs,
                               float* dScores32);

}  // namespace remat::gpu::kernels
