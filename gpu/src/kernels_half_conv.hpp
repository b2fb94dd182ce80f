#pragma once
// bf16-mixed's own kernels around cuDNN's bfloat16 convolution and for the adaptive pool
// (kernels_half_pool.cu; docs/gpu.md): a convolution's float32 bias added onto its bfloat16
// output, its bias gradient from bfloat16 dy (summed in float32, rounded to bfloat16 before the
// float32 add, as PyTorch's half bias gradient through ToCopyBackward), and adaptive average
// pooling on bfloat16 tensors (PyTorch's bins, float32 sums, one rounding). One thread per output
// element or per channel, sums in a fixed order: bitwise reproducible. Also Squeeze-and-Excitation's
// global pool and broadcasting product in bfloat16 blocks. Internal to gpu/.
#include "kernels.hpp"
#include "kernels_half.hpp"

namespace remat::gpu::kernels {

// y[n][c][i] = bfloat16(y[n][c][i] + bias[c]) over the `plane` = H * W elements of each channel.
Status addChannelBiasHalf(cudaStream_t stream, Index batch, Index channels, Index plane, const float* bias, Bf16* y);
// db[c] += float(bfloat16(sum over n and the plane of dy[n][c][i])).
Status addHalfChannelBiasGradient(cudaStream_t stream, Index batch, Index channels, Index plane, const Bf16* dy,
                                  float* db);
// The float32 kernels' rule (kernels.hpp) on bfloat16: y = bfloat16(mean of the bin); dx written.
Status adaptiveAvgPoolForwardHalf(cudaStream_t stream, const AdaptivePoolGeometry& g, const Bf16* x, Bf16* y);
Status adaptiveAvgPoolBackwardHalf(cudaStream_t stream, const AdaptivePoolGeometry& g, const Bf16* dy, Bf16* dx);

// Squeeze-and-Excitation inside a bfloat16 block, NCHW (the float32 kernels' rules, kernels.hpp):
// the global average pool y[n][c] = bfloat16(sum / (H * W)) and its backward d(x) (=|+=) d(y) /
// (H * W); y = a * b with NumPy broadcasting (`out` the broadcast dims) and one operand's gradient,
// d(self) (=|+=) the float32 sum over the axes self was broadcast along of d(y) * other, rounded once.
Status globalAvgPoolForwardHalf(cudaStream_t stream, const Dims4& in, const Bf16* x, Bf16* y);
Status globalAvgPoolBackwardHalf(cudaStream_t stream, const Dims4& in, const Bf16* dy, Bf16* dx, bool accumulate);
Status mulForwardHalf(cudaStream_t stream, const Dims4& out, const Dims4& a, const Dims4& b, const Bf16* x,
                      const Bf16* z, Bf16* y);
Status mulBackwardOperandHalf(cudaStream_t stream, const Dims4& out, const Dims4& self, const Dims4& other,
                              const Bf16* dy, const Bf16* value, Bf16* dSelf, bool accumulate);

// The pool branches of bfloat16 blocks (GoogLeNet's, Inception's): kernels.hpp's windows, order of
// sums and int64 argmax on bfloat16 tensors (float32 sums, one rounding); accumulate adds into the
// gradient another branch wrote. And the concatenation's strided copies and adds of bfloat16 rows
// (copyOrAddRows's rule).
Status maxPoolForwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const Bf16* x, Bf16* y,
                          std::int64_t* indices);
Status maxPoolBackwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const std::int64_t* indices,
                           const Bf16* dy, Bf16* dx, bool accumulate);
Status avgPoolForwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const Bf16* x, Bf16* y);
Status avgPoolBackwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const Bf16* dy, Bf16* dx, bool accumulate);
Status copyOrAddRowsHalf(cudaStream_t stream, Index rows, Index width, const Bf16* from, Index fromStride, Bf16* to,
                         Index toStride, bool accumulate);
// ShuffleNetV2's channel shuffle on bfloat16 (kernels.hpp's channelShuffleForward / Backward
// rule: a permutation of channel planes; x's samples xSampleStride elements apart).
Status channelShuffleForwardHalf(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                                 const Bf16* x, Index xSampleStride, Bf16* y);
Status channelShuffleBackwardHalf(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                                  const Bf16* dy, Bf16* dx, bool accumulate);

// Batch normalisation in training mode on bfloat16 data (kernels_half_norm.cu): per channel c over
// N, H, W, y = bfloat16((x - mean) * invStd * gamma[c] + beta[c]) with the biased variance and
// float32 statistics, saved (mean then inverse std, 2 * C floats) when stats is not null; the
// backward reads them, writes (or adds into) dx in bfloat16 and adds the float32 gamma and beta
// gradients.
Status batchNormForwardHalf(cudaStream_t stream, const Dims4& d, float epsilon, const Bf16* x, const float* gamma,
                            const float* beta, Bf16* y, float* stats);
Status batchNormBackwardHalf(cudaStream_t stream, const Dims4& d, const Bf16* x, const Bf16* dy, const float* gamma,
                             const float* stats, Bf16* dx, float* dgamma, float* dbeta, bool accumulate);

}  // namespace remat::gpu::kernels
