#pragma once
// The CPU backend's kernel geometry and its own kernels: those where no oneDNN primitive fits
// (dnnl_layers.hpp has the rest). Internal to core.
//
// Layouts (the CPU backend's own; upload/download convert from / to the canonical ones):
//   4-D activations are channels-last, [N][H][W][C] (oneDNN's nhwc: no padding, so a tensor has
//   exactly the model's bytes); 2-D activations are [N][F] (after a flatten of a channels-last
//   tensor, F runs over (h, w, c)); conv2d weights are PyTorch's [out][in/groups][kh][kw] then bias;
//   linear weights [out][in] with `in` in the activation's own order, then bias.
// Own kernels run on the calling thread's OpenMP team (the device's thread count). Each output
// element is computed by one thread in a fixed order that does not depend on the thread count, so
// they are bitwise reproducible; they allocate nothing. Backward kernels WRITE the input gradient,
// or add into it when `accumulate` is set; parameter gradients are ADDED into.
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace remat::cpu {

using Index = std::int64_t;

// A bfloat16 value as PyTorch's c10::BFloat16 and oneDNN's bf16 store it: the upper 16 bits of a
// float32, rounded to nearest even from float (NaN kept a quiet NaN). The half activations of
// bf16-mixed (memory-model.md section 11.7) are arrays of it.
struct BFloat16 {
  std::uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value) {
    std::uint32_t word = 0;
    std::memcpy(&word, &value, sizeof word);
    if ((word & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<std::uint16_t>((word >> 16) | 0x40u);
      return;
    }
    word += 0x7fffu + ((word >> 16) & 1u);
    bits = static_cast<std::uint16_t>(word >> 16);
  }
  float value() const {
    const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
    float out = 0.0f;
    std::memcpy(&out, &word, sizeof out);
    return out;
  }
};

// The own kernels compute in float32 whatever they read, and store in T: a bfloat16 result rounded
// once, as PyTorch's bfloat16 kernels round their float32 arithmetic.
inline float valueOf(float v) { return v; }
inline float valueOf(BFloat16 v) { return v.value(); }
template <typename T>
T stored(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return T(v);
}

struct ConvGeometry {
  Index batch = 0, inChannels = 0, inHeight = 0, inWidth = 0;
  Index outChannels = 0, outHeight = 0, outWidth = 0;
  Index kernel = 1, stride = 1, padding = 0, groups = 1;  // the height's (and the width's when square)
  Index kernelW = 1, strideW = 1, paddingW = 0;           // the width's (1x7, 7x1: Inception-v3)
  bool square() const { return kernelW == kernel && strideW == stride && paddingW == padding; }
  Index taps() const { return kernel * kernelW; }
};

struct PoolGeometry {
  Index batch = 0, channels = 0, inHeight = 0, inWidth = 0, outHeight = 0, outWidth = 0;
  Index kernel = 1, stride = 1, padding = 0;
  // The padding past the bottom / right edge that the last window reaches (ceil mode can reach
  // beyond `padding`); oneDNN's padding_r.
  Index paddingBottom() const { return extraPadding(inHeight, outHeight); }
  Index paddingRight() const { return extraPadding(inWidth, outWidth); }
  // Every window lies inside the input plus `padding`: PyTorch's count_include_pad divisor is then
  // kernel^2 everywhere, oneDNN's avg_include_padding.
  bool windowsInsidePadding() const { return paddingBottom() <= padding && paddingRight() <= padding; }

 private:
  Index extraPadding(Index in, Index out) const {
    const Index reach = (out - 1) * stride + kernel - in - padding;
    return reach > padding ? reach : padding;
  }
};

// Max pooling's saved argmax, as PyTorch's max_pool2d_with_indices keeps it (int64 per output
// element, memory-model.md section 5.1): for each output, the index into x of the first input
// position (in window scan order) equal to y. x and y as the forward read and wrote them.
void maxPoolIndices(const PoolGeometry& g, const float* x, const float* y, std::int64_t* indices);
void maxPoolIndices(const PoolGeometry& g, const BFloat16* x, const BFloat16* y, std::int64_t* indices);
// Routes each output's gradient to its saved argmax; dx is written (zeroed first), or added into
// when `accumulate` (a block's input read by more than one branch).
void maxPoolBackward(const PoolGeometry& g, const std::int64_t* indices, const float* dy, float* dx,
                     bool accumulate = false);
void maxPoolBackward(const PoolGeometry& g, const std::int64_t* indices, const BFloat16* dy, BFloat16* dx,
                     bool accumulate = false);
// The window maximum (a block's inner max pool; the layer's runs on oneDNN): the values oneDNN's
// gives, so maxPoolIndices finds the same argmax.
void maxPoolForward(const PoolGeometry& g, const float* x, float* y);
// count_include_pad = true, PyTorch's divisor rule (padded window clipped at input + padding):
// ceil-mode pools whose last window reaches past the padding, where oneDNN's divisor differs.
void avgPoolForward(const PoolGeometry& g, const float* x, float* y);
void avgPoolBackward(const PoolGeometry& g, const float* dy, float* dx, bool accumulate = false);
// PyTorch's adaptive bins: [floor(i*In/Out), ceil((i+1)*In/Out)). kernel/stride/padding unused.
void adaptiveAvgPoolForward(const PoolGeometry& g, const float* x, float* y);
void adaptiveAvgPoolBackward(const PoolGeometry& g, const float* dy, float* dx);
// The same in bfloat16 (bf16-mixed): sums in float32, each written element rounded once.
void maxPoolForward(const PoolGeometry& g, const BFloat16* x, BFloat16* y);
void avgPoolForward(const PoolGeometry& g, const BFloat16* x, BFloat16* y);
void avgPoolBackward(const PoolGeometry& g, const BFloat16* dy, BFloat16* dx, bool accumulate = false);
void adaptiveAvgPoolForward(const PoolGeometry& g, const BFloat16* x, BFloat16* y);
void adaptiveAvgPoolBackward(const PoolGeometry& g, const BFloat16* dy, BFloat16* dx);

// out += a, or out = a when !accumulate (the residual add's backward), elementwise.
void copyOrAdd(Index count, const float* a, float* out, bool accumulate);
// `rows` runs of `width` floats: to[r * toStride + i] (=|+=) from[r * fromStride + i]. A channel
// concatenation of channels-last tensors copies each input ([rows][C_in]) into its columns of the
// output ([rows][C_out]); its backward copies (or adds) those columns back into d(input).
void copyOrAddRows(Index rows, Index width, const float* from, Index fromStride, float* to, Index toStride,
                   bool accumulate);
// relu6's backward from its input, as PyTorch's hardtanh_backward(grad, self, 0, 6):
// dx (=|+=) dy where 0 < x < 6, else 0.
// Each also in bfloat16 (bf16-mixed; computed in float32, stored rounded).
void relu6Backward(Index count, const float* x, const float* dy, float* dx, bool accumulate);
void relu6Backward(Index count, const BFloat16* x, const BFloat16* dy, BFloat16* dx, bool accumulate);
// PyTorch's hardsigmoid, relu6(x + 3) / 6, which oneDNN 2.6 lacks; its backward from the input, as
// hardsigmoid_backward(grad, self): dx (=|+=) dy / 6 where -3 < x < 3, else 0.
void hardSigmoidForward(Index count, const float* x, float* y);
void hardSigmoidForward(Index count, const BFloat16* x, BFloat16* y);
void hardSigmoidBackward(Index count, const float* x, const float* dy, float* dx, bool accumulate);
void hardSigmoidBackward(Index count, const BFloat16* x, const BFloat16* dy, BFloat16* dx, bool accumulate);
// out = a + b, elementwise.
void add(Index count, const float* a, const float* b, float* out);
// A fresh weight gradient added into the layer's gradient (AccumulateGrad under --grads static,
// memory-model.md 11.2); pure bf16's is addHalfIntoHalf.
void addInto(Index count, const float* from, float* to);
// db[o] += sum over n of dy[n][o], samples in order (a linear layer's bias gradient).
void addBiasGradient(Index batch, Index outFeatures, const float* dy, float* db);
// Sets `bytes` bytes to `value` on every thread (zeroing large parameter gradients).
void fillBytes(void* data, std::uint64_t bytes, unsigned char value);

// Where a tensor's elements sit: channels-last 4-D ([N][H][W][C]) or plain 2-D ([N][F]), possibly
// a flattened channels-last tensor. canonicalIndex gives an element's index inside its sample in
// PyTorch's NCHW order; dropout keys and loss labels use it so that every backend agrees.
struct ActivationLayout {
  Index batch = 0, channels = 0, height = 1, width = 1;
  bool channelsLast = false;  // false: the element order is already canonical
  Index perSample() const { return channels * height * width; }
  // Position p inside a sample (this layout's order) -> NCHW index inside the sample.
  Index canonicalIndex(Index p) const {
    if (!channelsLast) return p;
    const Index c = p % channels, hw = p / channels;
    return c * height * width + hw;
  }
  // NCHW index inside a sample -> position in this layout.
  Index position(Index canonical) const {
    if (!channelsLast) return canonical;
    const Index hw = height * width, c = canonical / hw;
    return (canonical % hw) * channels + c;
  }
};

// An NCHW shape's extents; the data itself is channels-last ([N][H][W][C]).
struct Dims4 {
  Index n = 1, c = 1, h = 1, w = 1;
};
// Global average pooling x [N, C, H, W] -> y [N, C, 1, 1] (PyTorch's mean over H and W), and its
// backward d(x) (=|+=) d(y) / (H * W); it reads no activation.
void globalAvgPoolForward(const Dims4& in, const float* x, float* y);
void globalAvgPoolBackward(const Dims4& in, const float* dy, float* dx, bool accumulate);
// y = a * b with NumPy broadcasting (an axis of extent 1 repeats); `out` is the broadcast shape.
void mulForward(const Dims4& out, const Dims4& a, const Dims4& b, const float* x, const float* z, float* y);
// One operand's gradient: d(self) (=|+=) the sum, over the axes self was broadcast along, of
// d(y) * other (`value` holds the other operand, of dims `other`).
void mulBackwardOperand(const Dims4& out, const Dims4& self, const Dims4& other, const float* dy, const float* value,
                        float* dSelf, bool accumulate);
// A block's y = a + b, a - b or a / b with NumPy broadcasting (kernels_arith.cpp), float32 or bfloat16, and
// one operand's gradient (operand 0: a, 1: b), summed over the axes it was broadcast along: add's
// d(y), sub's d(y) and -d(y), div's d(y) / b and -d(y) * (a / b) / b. x and z hold a and b (read
// by div's backward only; add's and sub's may pass null).
enum class BroadcastOp { Add, Sub, Div };
void broadcastForward(BroadcastOp op, const Dims4& out, const Dims4& a, const Dims4& b, const float* x, const float* z,
                      float* y);
void broadcastBackwardOperand(BroadcastOp op, int operand, const Dims4& out, const Dims4& a, const Dims4& b,
                              const float* dy, const float* x, const float* z, float* dSelf, bool accumulate);
void broadcastForward(BroadcastOp op, const Dims4& out, const Dims4& a, const Dims4& b, const BFloat16* x,
                      const BFloat16* z, BFloat16* y);
void broadcastBackwardOperand(BroadcastOp op, int operand, const Dims4& out, const Dims4& a, const Dims4& b,
                              const BFloat16* dy, const BFloat16* x, const BFloat16* z, BFloat16* dSelf,
                              bool accumulate);
// The same in bfloat16 (a half block under bf16-mixed): float32 arithmetic, each written element rounded once.
void globalAvgPoolForward(const Dims4& in, const BFloat16* x, BFloat16* y);
void globalAvgPoolBackward(const Dims4& in, const BFloat16* dy, BFloat16* dx, bool accumulate);
void mulForward(const Dims4& out, const Dims4& a, const Dims4& b, const BFloat16* x, const BFloat16* z, BFloat16* y);
void mulBackwardOperand(const Dims4& out, const Dims4& self, const Dims4& other, const BFloat16* dy,
                        const BFloat16* value, BFloat16* dSelf, bool accumulate);

// ShuffleNetV2's channel split and shuffle on channels-last rows (rows = N * H * W). A slice's
// backward writes d(output) into its channels of d(input) and (not accumulating) zeros into the
// others, as PyTorch's slice_backward; the shuffle's output channel k * g + i is input channel
// i * (C / g) + k, its backward the inverse permutation. Both read no activation.
void sliceBackward(Index rows, Index inChannels, Index begin, Index count, const float* dy, float* dx, bool accumulate);
// x's rows are xStride floats apart (a view of a wider tensor's channels; channels otherwise).
void channelShuffleForward(Index rows, Index channels, Index groups, const float* x, Index xStride, float* y);
void channelShuffleBackward(Index rows, Index channels, Index groups, const float* dy, float* dx, bool accumulate);
void sliceBackward(Index rows, Index inChannels, Index begin, Index count, const BFloat16* dy, BFloat16* dx,
                   bool accumulate);
void channelShuffleForward(Index rows, Index channels, Index groups, const BFloat16* x, Index xStride, BFloat16* y);
void channelShuffleBackward(Index rows, Index channels, Index groups, const BFloat16* dy, BFloat16* dx,
                            bool accumulate);

// A depthwise convolution's weight gradient (kernels_depthwise.cpp), for the kernel sizes where
// oneDNN has no depthwise backward-weights kernel: d(w) [C][1][k][k] (PyTorch's order) and d(b)
// [C] (null: no bias) are ADDED into; x and d(y) are channels-last. Needs no scratch.
// depthwiseWeightGradientFits: groups = in = out channels, kernel at most kMaxDepthwiseKernel.
constexpr Index kMaxDepthwiseKernel = 7;
bool depthwiseWeightGradientFits(const ConvGeometry& g);
void depthwiseWeightGradient(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db);

// Dropout with probability p and the inverted scale 1/(1-p). The keep decision of an element is a
// pure function of (key, sample, canonical index), see counter_rng.hpp; mask (may be null: discard
// mode) receives one byte per element, 1 = kept.
void dropoutForward(const ActivationLayout& layout, double p, std::uint64_t key, const float* x, float* y,
                    std::uint8_t* mask);
// accumulate: d(x) += instead of = (an inner dropout whose input another op of the block also reads).
void dropoutBackward(Index count, double p, const std::uint8_t* mask, const float* dy, float* dx,
                     bool accumulate = false);
// The same in bfloat16 (bf16-mixed; kernels_half.cpp): the same mask for the same key.
void dropoutForward(const ActivationLayout& layout, double p, std::uint64_t key, const BFloat16* x, BFloat16* y,
                    std::uint8_t* mask);
void dropoutBackward(Index count, double p, const std::uint8_t* mask, const BFloat16* dy, BFloat16* dx,
                     bool accumulate = false);

// Softmax cross-entropy, mean over the batch: d[n][k] = (softmax(x[n])[k] - [k == label[n]]) / N,
// with labels as canonical class indices (checked by the caller to lie in 0..perSample-1).
void softmaxCrossEntropyBackward(const ActivationLayout& layout, const float* logits, const std::int64_t* labels,
                                 float* grad);
// The same from bfloat16 logits (bf16-mixed): autocast runs the loss in float32 on a cast of the
// logits, and the gradient flows back to the half logits through the cast (rounded to bfloat16).
void softmaxCrossEntropyBackward(const ActivationLayout& layout, const BFloat16* logits, const std::int64_t* labels,
                                 BFloat16* grad);

// Autocast's casts (kernels_half.cpp): float32 to bfloat16 (an input's cast copy, a weight's half
// copy), and a half gradient added into its float32 master gradient (ToCopyBackward, then
// AccumulateGrad's add); a linear's bias gradient from half d(y), summed in float32.
void castToHalf(Index count, const float* from, BFloat16* to);
void castToFloat(Index count, const BFloat16* from, float* to);  // a float32 op's (layer norm's) cast copy
void addHalfInto(Index count, const BFloat16* from, float* to);
void addHalfBiasGradient(Index batch, Index outFeatures, const BFloat16* dy, float* db);
// Pure bf16 (kernels_pure_half.cpp): bfloat16 gradients added into bfloat16 gradient buffers,
// each sum rounded once (AccumulateGrad in bfloat16).
void addHalfIntoHalf(Index count, const BFloat16* from, BFloat16* to);
void addFloatIntoHalf(Index count, const float* from, BFloat16* to);  // a float32 result rounded first
void addHalfBiasGradientHalf(Index batch, Index outFeatures, const BFloat16* dy, BFloat16* db);
// The residual add and a gradient that two readers of one tensor share, in bfloat16 (a block's
// inner ops under bf16-mixed): each sum rounded to bfloat16, as PyTorch's half add and autograd's
// accumulation of half gradients round it.
void add(Index count, const BFloat16* a, const BFloat16* b, BFloat16* out);
void copyOrAdd(Index count, const BFloat16* a, BFloat16* out, bool accumulate);
void copyOrAddRows(Index rows, Index width, const BFloat16* from, Index fromStride, BFloat16* to, Index toStride,
                   bool accumulate);
// ConvNeXt's layer_scale under bf16-mixed (kernels_half.cpp): bfloat16 x [rows][C] (channels-last)
// times the float32 gamma [C] is float32 y (type promotion); the backward's d(x) = d(y) * gamma
// rounded to bfloat16 (written or added) and d(gamma) += sum over rows of d(y) * x, in float32.
// y = a + b with a float32 and b bfloat16, y float32 (type promotion: ConvNeXt's residual add after
// a bfloat16 x(l-1)).
void addMixed(Index count, const float* a, const BFloat16* b, float* out);
void layerScaleMixedForward(Index rows, Index channels, const BFloat16* x, const float* gamma, float* y);
void layerScaleMixedBackward(Index rows, Index channels, const float* dy, const BFloat16* x, const float* gamma,
                             BFloat16* dx, bool accumulate, float* dGamma);

}  // namespace remat::cpu
