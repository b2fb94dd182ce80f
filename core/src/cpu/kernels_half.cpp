// The own kernels of bf16-mixed (kernels.hpp): autocast's casts, a half gradient added into its
// float32 master, and the loss's gradient from half logits. Each element is one thread's, in a
// fixed order, so the results do not depend on the thread count.
#include <cmath>

#include "kernels.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::cpu {

void castToHalf(Index count, const float* from, BFloat16* to) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) to[i] = BFloat16(from[i]);
}

void castToFloat(Index count, const BFloat16* from, float* to) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) to[i] = from[i].value();
}

void addHalfInto(Index count, const BFloat16* from, float* to) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) to[i] += from[i].value();
}

void addHalfBiasGradient(Index batch, Index outFeatures, const BFloat16* dy, float* db) {
#pragma omp parallel for schedule(static)
  for (Index o = 0; o < outFeatures; ++o) {
    float sum = 0.0f;
    for (Index n = 0; n < batch; ++n) sum += dy[n * outFeatures + o].value();
    // PyTorch's half bias gradient is rounded to bfloat16 before its float32 cast.
    db[o] += BFloat16(sum).value();
  }
}

void add(Index count, const BFloat16* a, const BFloat16* b, BFloat16* out) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) out[i] = BFloat16(a[i].value() + b[i].value());
}

void softmaxCrossEntropyBackward(const ActivationLayout& layout, const BFloat16* logits, const std::int64_t* labels,
                                 BFloat16* grad) {
  const Index k = layout.perSample();
  const float invBatch = 1.0f / static_cast<float>(layout.batch);
#pragma omp parallel for schedule(static)
  for (Index n = 0; n < layout.batch; ++n) {
    const BFloat16* row = logits + n * k;
    BFloat16* out = grad + n * k;
    float maxValue = row[0].value();
    for (Index i = 1; i < k; ++i) maxValue = row[i].value() > maxValue ? row[i].value() : maxValue;
    double sum = 0.0;
    for (Index i = 0; i < k; ++i) sum += std::exp(static_cast<double>(row[i].value() - maxValue));
    const double invSum = 1.0 / sum;
    const Index label = layout.position(labels[n]);
    for (Index i = 0; i < k; ++i) {
      const float p = static_cast<float>(std::exp(static_cast<double>(row[i].value() - maxValue)) * invSum) * invBatch;
      out[i] = BFloat16(i == label ? p - invBatch : p);
    }
  }
}

void dropoutForward(const ActivationLayout& layout, double p, std::uint64_t key, const BFloat16* x, BFloat16* y,
                    std::uint8_t* mask) {
  const Index perSample = layout.perSample();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  const float threshold = static_cast<float>(p);
  const Index count = layout.batch * perSample;
#pragma omp parallel for schedule(static)
  for (Index e = 0; e < count; ++e) {
    // The float32 kernel's draw for the same element: the same mask in either dtype.
    const Index n = e / perSample, i = e % perSample;
    const std::uint64_t index = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(perSample) +
                                static_cast<std::uint64_t>(layout.canonicalIndex(i));
    const bool keep = p < 1.0 && rng::uniform01(rng::at(key, index)) >= threshold;
    y[e] = BFloat16(keep ? x[e].value() * scale : 0.0f);
    if (mask != nullptr) mask[e] = keep ? 1 : 0;
  }
}

// accumulate: a half block's inner dropout whose input another op's gradient wrote first (the sum in
// float32, rounded once).
void dropoutBackward(Index count, double p, const std::uint8_t* mask, const BFloat16* dy, BFloat16* dx,
                     bool accumulate) {
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  if (accumulate) {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < count; ++i) dx[i] = BFloat16(dx[i].value() + (mask[i] ? dy[i].value() * scale : 0.0f));
    return;
  }
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) dx[i] = BFloat16(mask[i] ? dy[i].value() * scale : 0.0f);
}

void addMixed(Index count, const float* a, const BFloat16* b, float* out) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) out[i] = a[i] + b[i].value();
}

void layerScaleMixedForward(Index rows, Index channels, const BFloat16* x, const float* gamma, float* y) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r)
    for (Index c = 0; c < channels; ++c) y[r * channels + c] = x[r * channels + c].value() * gamma[c];
}

void layerScaleMixedBackward(Index rows, Index channels, const float* dy, const BFloat16* x, const float* gamma,
                             BFloat16* dx, bool accumulate, float* dGamma) {
  if (dx != nullptr) {
#pragma omp parallel for schedule(static)
    for (Index r = 0; r < rows; ++r)
      for (Index c = 0; c < channels; ++c) {
        const Index e = r * channels + c;
        const float d = dy[e] * gamma[c];
        dx[e] = BFloat16(accumulate ? dx[e].value() + BFloat16(d).value() : d);
      }
  }
  // One channel's sum per thread, over the rows in order: independent of the thread count.
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < channels; ++c) {
    float sum = 0.0f;
    for (Index r = 0; r < rows; ++r) sum += dy[r * channels + c] * x[r * channels + c].value();
    dGamma[c] += sum;
  }
}

}  // namespace remat::cpu
