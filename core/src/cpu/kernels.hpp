#pragma once
// The CPU reference kernels on raw pointers. Internal to core: cpu_device.cpp dispatches to them
// and the residual-block kernels compose them over arena offsets.
//
// Layouts (the CPU backend's own; upload/download convert from / to the canonical ones):
//   4-D activations are channels-last, [N][H][W][C]; 2-D activations are [N][F] (after a flatten of
//   a channels-last tensor, F runs over (h, w, c)); conv2d weights are [kh][kw][C/groups][K], then
//   bias [K]; linear weights [out][in] with `in` in the activation's own order, then bias.
// Every kernel is single-threaded, sums in a fixed order and allocates nothing: deterministic, so
// a recomputed forward equals the original bit for bit. Backward kernels ADD parameter gradients
// into dw / db; they WRITE the input gradient dx, or add into it when `accumulate` is set (inner
// ops of residual blocks whose input feeds two ops).
#include <cstdint>

namespace remat::cpu {

using Index = std::int64_t;

struct ConvGeometry {
  Index batch = 0, inChannels = 0, inHeight = 0, inWidth = 0;
  Index outChannels = 0, outHeight = 0, outWidth = 0;
  Index kernel = 1, stride = 1, padding = 0, groups = 1;
};
void conv2dForward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y);
void conv2dBackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx, bool accumulate = false);
// dw: [kh][kw][C/groups][K]; db may be null (no bias).
void conv2dBackwardParams(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db);

struct PoolGeometry {
  Index batch = 0, channels = 0, inHeight = 0, inWidth = 0, outHeight = 0, outWidth = 0;
  Index kernel = 1, stride = 1, padding = 0;
};
void maxPoolForward(const PoolGeometry& g, const float* x, float* y);
// Routes each output's gradient to the first input position (in window scan order) equal to it.
void maxPoolBackward(const PoolGeometry& g, const float* x, const float* y, const float* dy, float* dx);
// count_include_pad = true, PyTorch's divisor rule (padded window clipped at input + padding).
void avgPoolForward(const PoolGeometry& g, const float* x, float* y);
void avgPoolBackward(const PoolGeometry& g, const float* dy, float* dx);
// PyTorch's adaptive bins: [floor(i*In/Out), ceil((i+1)*In/Out)). kernel/stride/padding unused.
void adaptiveAvgPoolForward(const PoolGeometry& g, const float* x, float* y);
void adaptiveAvgPoolBackward(const PoolGeometry& g, const float* dy, float* dx);

void reluForward(Index count, const float* x, float* y);
void reluBackward(Index count, const float* y, const float* dy, float* dx, bool accumulate = false);
void relu6Forward(Index count, const float* x, float* y);
void relu6Backward(Index count, const float* y, const float* dy, float* dx, bool accumulate = false);
// out += a, or out = a when !accumulate (the residual add's backward), elementwise.
void copyOrAdd(Index count, const float* a, float* out, bool accumulate);
// out = a + b, elementwise.
void add(Index count, const float* a, const float* b, float* out);
// `rows` runs of `width` floats: to[r * toStride + i] (=|+=) from[r * fromStride + i]. A channel
// concatenation of channels-last tensors copies each input ([rows][C_in]) into its columns of the
// output ([rows][C_out]); its backward copies (or adds) those columns back into d(input).
void copyOrAddRows(Index rows, Index width, const float* from, Index fromStride, float* to, Index toStride,
                   bool accumulate);

// Batch norm in training mode over rows x channels (channels innermost: [N*H*W][C] or [N][F]).
// stats (may be null: discard mode) receives mean [C] then inverse std [C].
inline constexpr float kBatchNormEpsilon = 1e-5f;
void batchNormForward(Index rows, Index channels, const float* x, const float* gamma, const float* beta, float* y,
                      float* stats);
void batchNormBackward(Index rows, Index channels, const float* x, const float* dy, const float* gamma,
                       const float* stats, float* dx, float* dgamma, float* dbeta, bool accumulate = false);

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

// Dropout with probability p and the inverted scale 1/(1-p). The keep decision of an element is a
// pure function of (key, sample, canonical index), see counter_rng.hpp; mask (may be null: discard
// mode) receives one byte per element, 1 = kept.
void dropoutForward(const ActivationLayout& layout, double p, std::uint64_t key, const float* x, float* y,
                    std::uint8_t* mask);
void dropoutBackward(Index count, double p, const std::uint8_t* mask, const float* dy, float* dx);

// y[n][o] = b[o] + sum_i w[o][i] x[n][i]; b may be null.
void linearForward(Index batch, Index inFeatures, Index outFeatures, const float* x, const float* w, const float* b,
                   float* y);
// dx may be null (layer 1); db may be null.
void linearBackward(Index batch, Index inFeatures, Index outFeatures, const float* x, const float* w, const float* dy,
                    float* dx, float* dw, float* db);

// Softmax cross-entropy, mean over the batch: d[n][k] = (softmax(x[n])[k] - [k == label[n]]) / N,
// with labels as canonical class indices (checked by the caller to lie in 0..perSample-1).
void softmaxCrossEntropyBackward(const ActivationLayout& layout, const float* logits, const std::int32_t* labels,
                                 float* grad);

}  // namespace remat::cpu
