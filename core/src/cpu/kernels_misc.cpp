// The element-wise kernels that no oneDNN primitive fits: the residual add and its backward,
// relu6's backward from its input (oneDNN's clip passes the gradient at x = 6), hardsigmoid,
// dropout with the counter-based generator, a linear layer's bias gradient, the loss seed, and
// fills. Every element is computed by one thread, in a fixed order: bitwise reproducible at any
// thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::cpu {

namespace {

// The residual add's copy or sum in float32 or bfloat16 (a half block's; each sum rounded once).
template <typename T>
void copyOrAddOf(Index count, const T* a, T* out, bool accumulate) {
  if (accumulate) {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < count; ++i) out[i] = stored<T>(valueOf(out[i]) + valueOf(a[i]));
  } else {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < count; ++i) out[i] = a[i];
  }
}

template <typename T>
void copyOrAddRowsOf(Index rows, Index width, const T* from, Index fromStride, T* to, Index toStride, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const T* a = from + r * fromStride;
    T* out = to + r * toStride;
    if (accumulate)
      for (Index i = 0; i < width; ++i) out[i] = stored<T>(valueOf(out[i]) + valueOf(a[i]));
    else
      for (Index i = 0; i < width; ++i) out[i] = a[i];
  }
}

}  // namespace

void copyOrAdd(Index count, const float* a, float* out, bool accumulate) { copyOrAddOf(count, a, out, accumulate); }
void copyOrAdd(Index count, const BFloat16* a, BFloat16* out, bool accumulate) {
  copyOrAddOf(count, a, out, accumulate);
}
void copyOrAddRows(Index rows, Index width, const float* from, Index fromStride, float* to, Index toStride,
                   bool accumulate) {
  copyOrAddRowsOf(rows, width, from, fromStride, to, toStride, accumulate);
}
void copyOrAddRows(Index rows, Index width, const BFloat16* from, Index fromStride, BFloat16* to, Index toStride,
                   bool accumulate) {
  copyOrAddRowsOf(rows, width, from, fromStride, to, toStride, accumulate);
}

namespace {

// The own activations in float32 and bfloat16 alike (valueOf, stored: kernels.hpp).
template <typename T>
void relu6BackwardOf(Index count, const T* x, const T* dy, T* dx, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) {
    const float v = valueOf(x[i]);
    const float pass = (v > 0.0f && v < 6.0f) ? valueOf(dy[i]) : 0.0f;
    dx[i] = stored<T>(accumulate ? valueOf(dx[i]) + pass : pass);
  }
}

template <typename T>
void hardSigmoidForwardOf(Index count, const T* x, T* y) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) y[i] = stored<T>(std::min(std::max(valueOf(x[i]) + 3.0f, 0.0f), 6.0f) / 6.0f);
}

template <typename T>
void hardSigmoidBackwardOf(Index count, const T* x, const T* dy, T* dx, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) {
    const float v = valueOf(x[i]);
    const float pass = (v > -3.0f && v < 3.0f) ? valueOf(dy[i]) / 6.0f : 0.0f;
    dx[i] = stored<T>(accumulate ? valueOf(dx[i]) + pass : pass);
  }
}

}  // namespace

void relu6Backward(Index count, const float* x, const float* dy, float* dx, bool accumulate) {
  relu6BackwardOf(count, x, dy, dx, accumulate);
}
void relu6Backward(Index count, const BFloat16* x, const BFloat16* dy, BFloat16* dx, bool accumulate) {
  relu6BackwardOf(count, x, dy, dx, accumulate);
}
void hardSigmoidForward(Index count, const float* x, float* y) { hardSigmoidForwardOf(count, x, y); }
void hardSigmoidForward(Index count, const BFloat16* x, BFloat16* y) { hardSigmoidForwardOf(count, x, y); }
void hardSigmoidBackward(Index count, const float* x, const float* dy, float* dx, bool accumulate) {
  hardSigmoidBackwardOf(count, x, dy, dx, accumulate);
}
void hardSigmoidBackward(Index count, const BFloat16* x, const BFloat16* dy, BFloat16* dx, bool accumulate) {
  hardSigmoidBackwardOf(count, x, dy, dx, accumulate);
}

void add(Index count, const float* a, const float* b, float* out) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

void addInto(Index count, const float* from, float* to) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) to[i] += from[i];
}

void addBiasGradient(Index batch, Index outFeatures, const float* dy, float* db) {
#pragma omp parallel for schedule(static)
  for (Index o = 0; o < outFeatures; ++o) {
    float sum = 0.0f;
    for (Index n = 0; n < batch; ++n) sum += dy[n * outFeatures + o];
    db[o] += sum;
  }
}

void fillBytes(void* data, std::uint64_t bytes, unsigned char value) {
  constexpr std::uint64_t kChunk = std::uint64_t{1} << 20;
  const auto chunks = static_cast<Index>((bytes + kChunk - 1) / kChunk);
  auto* base = static_cast<unsigned char*>(data);
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < chunks; ++c) {
    const std::uint64_t begin = static_cast<std::uint64_t>(c) * kChunk;
    std::memset(base + begin, value, static_cast<std::size_t>(bytes - begin < kChunk ? bytes - begin : kChunk));
  }
}

void dropoutForward(const ActivationLayout& layout, double p, std::uint64_t key, const float* x, float* y,
                    std::uint8_t* mask) {
  const Index perSample = layout.perSample();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  const float threshold = static_cast<float>(p);
  const Index count = layout.batch * perSample;
#pragma omp parallel for schedule(static)
  for (Index e = 0; e < count; ++e) {
    const Index n = e / perSample, i = e % perSample;
    const std::uint64_t index = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(perSample) +
                                static_cast<std::uint64_t>(layout.canonicalIndex(i));
    const bool keep = p < 1.0 && rng::uniform01(rng::at(key, index)) >= threshold;
    y[e] = keep ? x[e] * scale : 0.0f;
    if (mask != nullptr) mask[e] = keep ? 1 : 0;
  }
}

void dropoutBackward(Index count, double p, const std::uint8_t* mask, const float* dy, float* dx, bool accumulate) {
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  if (accumulate) {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < count; ++i) dx[i] += mask[i] ? dy[i] * scale : 0.0f;
    return;
  }
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

void softmaxCrossEntropyBackward(const ActivationLayout& layout, const float* logits, const std::int64_t* labels,
                                 float* grad) {
  const Index k = layout.perSample();
  const float invBatch = 1.0f / static_cast<float>(layout.batch);
#pragma omp parallel for schedule(static)
  for (Index n = 0; n < layout.batch; ++n) {
    const float* row = logits + n * k;
    float* out = grad + n * k;
    float maxValue = row[0];
    for (Index i = 1; i < k; ++i) maxValue = row[i] > maxValue ? row[i] : maxValue;
    double sum = 0.0;
    for (Index i = 0; i < k; ++i) sum += std::exp(static_cast<double>(row[i] - maxValue));
    const double invSum = 1.0 / sum;
    for (Index i = 0; i < k; ++i)
      out[i] = static_cast<float>(std::exp(static_cast<double>(row[i] - maxValue)) * invSum) * invBatch;
    out[layout.position(labels[n])] -= invBatch;
  }
}

}  // namespace remat::cpu
