#pragma once
// ConvNeXt's inner ops under bf16-mixed on the GPU (kernels_half_convnext.cu; memory-model.md 11.7,
// "ConvNeXt's blocks under autocast"): the layer norm over NCHW's channels on bfloat16 data with
// float32 gamma, beta and statistics (a bfloat16 output), layer_scale's bfloat16 x float32 gamma
// product written in float32 (type promotion), the float32 residual add of one bfloat16 and one
// float32 operand, and a float32 gradient written or added into a bfloat16 operand's. Each
// computes in float32 and rounds what it writes in bfloat16 once, the float32 kernels' order
// (kernels_layernorm.cu, kernels_broadcast.cu), as the CPU's run_blocks.cpp. Internal to gpu/.
#include "kernels.hpp"
#include "kernels_half.hpp"

namespace remat::gpu::kernels {

// rows = N*H*W positions of `features` channels, `inner` = H*W apart; stats = [mean][rstd] float32.
Status layerNormForwardHalf(cudaStream_t stream, Index rows, Index features, float epsilon, const Bf16* x,
                            const float* weightBias, Bf16* y, float* stats, Index inner);
Status layerNormBackwardHalf(cudaStream_t stream, Index rows, Index features, const Bf16* x, const Bf16* dy,
                             const float* weightBias, const float* stats, Bf16* dx, float* dWeightBias, Index inner,
                             bool accumulate);
// y = gamma[c] * x (NCHW x of dims d, float32 y); backward: dx (=|+=) round(dy * gamma), dGamma += sum(dy * x).
Status layerScaleForwardHalf(cudaStream_t stream, const Dims4& d, const Bf16* x, const float* gamma, float* y);
Status layerScaleBackwardHalf(cudaStream_t stream, const Dims4& d, const float* dy, const Bf16* x, const float* gamma,
                              Bf16* dx, bool accumulate, float* dGamma);
// y = a + b in float32, each operand bfloat16 where its flag says so.
Status addMixed(cudaStream_t stream, Index count, const void* a, bool aHalf, const void* b, bool bHalf, float* y);
// d (=|+=) g, a float32 gradient into a bfloat16 tensor's (rounded once).
Status copyOrAddFloatToHalf(cudaStream_t stream, Index count, const float* g, Bf16* d, bool accumulate);

}  // namespace remat::gpu::kernels
