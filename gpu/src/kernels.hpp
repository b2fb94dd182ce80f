#pragma once
// Host-side launchers of the CUDA kernels (kernels_*.cu) for what cuDNN and cuBLAS do not do:
// elementwise activations with the CPU backend's exact rules, the residual add, the channel
// concatenation's strided copies, pooling and the channel shuffle inside blocks, Squeeze-and-Excitation's pooling and
// product, dropout with the counter-based generator shared with the CPU, bias handling of linear layers, adaptive
// average pooling, the softmax cross-entropy seed, the optimizer's update and the synthetic kernels of abstract layers.
// Every launcher checks the launch and returns a Status; none allocates memory. Internal to gpu/.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "remat/base/status.hpp"

namespace remat::gpu::kernels {

using Index = std::int64_t;

// y = max(x, 0); dx (=|+=) y > 0 ? dy : 0.
Status reluForward(cudaStream_t stream, Index count, const float* x, float* y);
Status reluBackward(cudaStream_t stream, Index count, const float* y, const float* dy, float* dx, bool accumulate);
// y = min(max(x, 0), 6); dx (=|+=) 0 < x < 6 ? dy : 0 (from x, as PyTorch's hardtanh_backward).
Status relu6Forward(cudaStream_t stream, Index count, const float* x, float* y);
Status relu6Backward(cudaStream_t stream, Index count, const float* x, const float* dy, float* dx, bool accumulate);
// The other pointwise activations (operators.hpp), each with PyTorch's formula; the backward reads
// what the kind's description says PyTorch keeps: y for sigmoid and tanh, x for the others.
enum class Pointwise { Sigmoid, Tanh, Silu, HardSwish, HardSigmoid, Gelu };
Status pointwiseForward(cudaStream_t stream, Pointwise fn, Index count, const float* x, float* y);
// saved: y for sigmoid and tanh, x for the others.
Status pointwiseBackward(cudaStream_t stream, Pointwise fn, Index count, const float* saved, const float* dy, float* dx,
                         bool accumulate);
// out = a + b.
Status add(cudaStream_t stream, Index count, const float* a, const float* b, float* out);
// out (=|+=) a.
Status copyOrAdd(cudaStream_t stream, Index count, const float* a, float* out, bool accumulate);
// `rows` runs of `width` floats: to[r * toStride + i] (=|+=) from[r * fromStride + i]. A channel
// concatenation of NCHW tensors copies each input ([N][C_in * H * W]) into its slice of each
// sample of the output ([N][C_out * H * W]); its backward copies (or adds) the slices back.
Status copyOrAddRows(cudaStream_t stream, Index rows, Index width, const float* from, Index fromStride, float* to,
                     Index toStride, bool accumulate);

// An NCHW shape's extents.
struct Dims4 {
  Index n = 1, c = 1, h = 1, w = 1;
};
// Squeeze-and-Excitation's inner ops (kernels_broadcast.cu): global average pooling x [N, C, H, W]
// -> y [N, C, 1, 1] and its backward d(x) (=|+=) d(y) / (H * W); y = a * b with NumPy broadcasting
// (`out` the broadcast shape) and one operand's gradient, d(self) (=|+=) the sum over the axes self
// was broadcast along of d(y) * other (`value` the other operand, of dims `other`).
Status globalAvgPoolForward(cudaStream_t stream, const Dims4& in, const float* x, float* y);
Status globalAvgPoolBackward(cudaStream_t stream, const Dims4& in, const float* dy, float* dx, bool accumulate);
Status mulForward(cudaStream_t stream, const Dims4& out, const Dims4& a, const Dims4& b, const float* x, const float* z,
                  float* y);
Status mulBackwardOperand(cudaStream_t stream, const Dims4& out, const Dims4& self, const Dims4& other, const float* dy,
                          const float* value, float* dSelf, bool accumulate);
// Issue 22's broadcasting add, sub and div inside blocks (kernels_arith.cu): y = x op z with NumPy
// broadcasting (`out` the broadcast shape); the backward of operand 0 (x, dims a) or 1 (z, dims b),
// d(self) (=|+=) the sum over the axes self was broadcast along of d(y) * d(x op z)/d(self). Only
// div reads x and z (add's and sub's may be null).
enum class Arith { Add, Sub, Div };
Status arithForward(cudaStream_t stream, Arith op, const Dims4& out, const Dims4& a, const Dims4& b, const float* x,
                    const float* z, float* y);
Status arithBackwardOperand(cudaStream_t stream, Arith op, int operand, const Dims4& out, const Dims4& a,
                            const Dims4& b, const float* dy, const float* x, const float* z, float* dSelf,
                            bool accumulate);

// Element i (NCHW order) is kept when uniform01(at(key, i)) >= p, as on the CPU; kept elements are
// scaled by 1 / (1 - p). mask (null in discard mode) gets 1 for kept, 0 for dropped. accumulate:
// dx is added to (a block's inner dropout whose input another op's gradient wrote first).
Status dropoutForward(cudaStream_t stream, Index count, double p, std::uint64_t key, const float* x, float* y,
                      std::uint8_t* mask);
Status dropoutBackward(cudaStream_t stream, Index count, double p, const std::uint8_t* mask, const float* dy, float* dx,
                       bool accumulate = false);

// Layer norm over the last axis of a row-major [rows][features] matrix (kernels_layernorm.cu), weight
// and bias one [2][features] buffer: the forward writes y and, when stats is not null (keep mode),
// the row means then the row rstd (2 * rows floats); the backward writes dx (when not null) from x,
// the stats and the weight, and adds d(weight, bias) into dWeightBias. inner > 1: over the channels
// of NCHW (ConvNeXt's LayerNorm2d), rows = N * H * W, features = C, inner = H * W. accumulate: dx is
// added to, not written.
Status layerNormForward(cudaStream_t stream, Index rows, Index features, float epsilon, const float* x,
                        const float* weightBias, float* y, float* stats, Index inner = 1);
Status layerNormBackward(cudaStream_t stream, Index rows, Index features, const float* x, const float* dy,
                         const float* weightBias, const float* stats, float* dx, float* dWeightBias, Index inner = 1,
                         bool accumulate = false);

// y[r][f] += bias[f] for a row-major [rows][features] matrix.
Status addRowBias(cudaStream_t stream, Index rows, Index features, const float* bias, float* y);
// db[f] += sum over r of dy[r][f], summed in row order (deterministic).
Status accumulateRowBiasGrad(cudaStream_t stream, Index rows, Index features, const float* dy, float* db);

// db[c] += sum over n, h, w of dy[n][c][h][w] (NCHW; planeSize = H * W). One block per channel
// with a fixed assignment of elements to threads and a fixed reduction tree: deterministic, unlike
// a reduction through atomics.
Status accumulateChannelBiasGrad(cudaStream_t stream, Index batch, Index channels, Index planeSize, const float* dy,
                                 float* db);

struct AdaptivePoolGeometry {
  Index batch = 0, channels = 0, inHeight = 0, inWidth = 0, outHeight = 0, outWidth = 0;
};
// PyTorch's bins [floor(i*In/Out), ceil((i+1)*In/Out)), NCHW.
Status adaptiveAvgPoolForward(cudaStream_t stream, const AdaptivePoolGeometry& g, const float* x, float* y);
Status adaptiveAvgPoolBackward(cudaStream_t stream, const AdaptivePoolGeometry& g, const float* dy, float* dx);

// Pooling inside a block (kernels_pool.cu), NCHW, with the CPU's windows and order of sums:
// kernel x kernel taps from o * stride - padding clipped to the input (ceil mode's last window may
// reach past the padding); average pooling divides by the window clipped to input + padding
// (count_include_pad). Max pooling writes, when indices is not null (keep mode), the index into x
// of each output's first maximum (int64, what PyTorch keeps); its backward reads them. accumulate:
// dx is added to (another branch of the block wrote it), not written.
struct PoolWindowGeometry {
  Index batch = 0, channels = 0, inHeight = 0, inWidth = 0, outHeight = 0, outWidth = 0;
  Index kernel = 1, stride = 1, padding = 0;
};
Status maxPoolForward(cudaStream_t stream, const PoolWindowGeometry& g, const float* x, float* y,
                      std::int64_t* indices);
Status maxPoolBackward(cudaStream_t stream, const PoolWindowGeometry& g, const std::int64_t* indices, const float* dy,
                       float* dx, bool accumulate);
Status avgPoolForward(cudaStream_t stream, const PoolWindowGeometry& g, const float* x, float* y);
Status avgPoolBackward(cudaStream_t stream, const PoolWindowGeometry& g, const float* dy, float* dx, bool accumulate);

// ShuffleNetV2's channel shuffle on NCHW (kernels_channels.cu), `plane` = H * W floats per channel:
// y[n][k * groups + i] = x[n][i * perGroup + k], x's samples xSampleStride floats apart (a channel
// slice read in place: its owner's C * H * W); the backward dx[n][i * perGroup + k] (=|+=)
// dy[n][k * groups + i], dx contiguous.
Status channelShuffleForward(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                             const float* x, Index xSampleStride, float* y);
Status channelShuffleBackward(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                              const float* dy, float* dx, bool accumulate);

// d[n][k] = (softmax(x[n])[k] - [k == label[n]]) / N, rows of `classes` logits.
Status softmaxCrossEntropyBackward(cudaStream_t stream, Index batch, Index classes, const float* logits,
                                   const std::int64_t* labels, float* grad);

// The optimizer step of one layer (kernels_optimizer.cu), in place over `count` floats: the CPU
// backend's formulas (core/src/cpu/optimizer_step.cpp). state is momentum_buffer or exp_avg (null
// for SGD), stateSquare exp_avg_sq, denominator Adam's sqrt(v) / sqrt(1 - beta2^t) + eps; squareRoot
// (single-tensor Adam only, else null) the square root before the division.
enum class OptimizerUpdate { Sgd, Momentum, Adam, AdamW };
struct OptimizerSpans {
  float* params = nullptr;
  const float* grads = nullptr;
  float* state = nullptr;
  float* stateSquare = nullptr;
  float* denominator = nullptr;
  float* squareRoot = nullptr;
  Index count = 0;
};
// Host-computed as the CPU computes them: stepSize = lr / (1 - beta1^t) and sqrt(1 - beta2^t) in
// double, then rounded to float.
struct OptimizerScalars {
  float learningRate = 0, momentum = 0, beta1 = 0, beta2 = 0, epsilon = 0, weightDecay = 0;
  float stepSize = 0, biasCorrection2Sqrt = 1;
};
Status optimizerUpdate(cudaStream_t stream, OptimizerUpdate update, const OptimizerSpans& spans,
                       const OptimizerScalars& scalars);

// fp16-mixed's GradScaler (torch.cuda.amp.GradScaler; memory-model.md 11.7), on device float32
// scalars: data[i] *= *scale (a float32 loss seed; the scale is a power of two, so exact unless it
// overflows); grads[i] *= 1 / *scale, *foundInf = 1 where a gradient is inf or NaN
// (_amp_foreach_non_finite_check_and_unscale_); *scale *= factor (backoff or growth).
Status gradScalerMultiply(cudaStream_t stream, Index count, const float* scale, float* data);
Status gradScalerUnscale(cudaStream_t stream, Index count, const float* scale, float* grads, float* foundInf);
Status gradScalerUpdate(cudaStream_t stream, float factor, float* scale);
// Abstract layers: p -= g and state += g bytewise (either of state, denominator may be null); the
// denominator gets p's new bytes.
Status abstractOptimizerUpdate(cudaStream_t stream, void* params, const void* grads, void* state, void* denominator,
                               std::uint64_t bytes);
// AccumulateGrad's `grad += new_grad` (GradMode::Static): dst[i] += src[i] over `count` floats, or
// over `bytes` bytes mod 256 for an abstract layer's parameters.
Status accumulateFloats(cudaStream_t stream, Index count, float* dst, const float* src);
Status accumulateBytes(cudaStream_t stream, std::uint64_t bytes, void* dst, const void* src);

}  // namespace remat::gpu::kernels
