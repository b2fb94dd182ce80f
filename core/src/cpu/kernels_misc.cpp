// Elementwise kinds, batch norm, dropout, linear and the loss seed. Reductions accumulate in a
// fixed order (double where the sum is long) and keep everything in registers: no scratch.
#include <cmath>
#include <cstring>

#include "kernels.hpp"
#include "simd.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::cpu {

void reluForward(Index count, const float* x, float* y) {
  for (Index i = 0; i < count; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void reluBackward(Index count, const float* y, const float* dy, float* dx, bool accumulate) {
  if (accumulate)
    for (Index i = 0; i < count; ++i) dx[i] += y[i] > 0.0f ? dy[i] : 0.0f;
  else
    for (Index i = 0; i < count; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void relu6Forward(Index count, const float* x, float* y) {
  for (Index i = 0; i < count; ++i) y[i] = x[i] > 0.0f ? (x[i] < 6.0f ? x[i] : 6.0f) : 0.0f;
}

void relu6Backward(Index count, const float* y, const float* dy, float* dx, bool accumulate) {
  if (accumulate)
    for (Index i = 0; i < count; ++i) dx[i] += (y[i] > 0.0f && y[i] < 6.0f) ? dy[i] : 0.0f;
  else
    for (Index i = 0; i < count; ++i) dx[i] = (y[i] > 0.0f && y[i] < 6.0f) ? dy[i] : 0.0f;
}

void copyOrAdd(Index count, const float* a, float* out, bool accumulate) {
  if (accumulate)
    for (Index i = 0; i < count; ++i) out[i] += a[i];
  else
    std::memcpy(out, a, static_cast<std::size_t>(count) * sizeof(float));
}

void add(Index count, const float* a, const float* b, float* out) {
  for (Index i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

namespace {

// B channels [c0, c0 + B) at once (channels are innermost, so a block reads contiguous runs of the
// rows instead of one float per cache line). Each channel still sums its rows in row order, in
// double: the result does not depend on B.
template <int B>
void batchNormForwardBlock(Index rows, Index channels, Index c0, const float* x, const float* gamma, const float* beta,
                           float* y, float* stats) {
  double sum[B], squares[B];
  float mean[B], invStd[B], scale[B], shift[B];
  REMAT_UNROLL
  for (int j = 0; j < B; ++j) sum[j] = squares[j] = 0.0;
  for (Index r = 0; r < rows; ++r) {
    const float* row = x + r * channels + c0;
    REMAT_UNROLL
    for (int j = 0; j < B; ++j) sum[j] += row[j];
  }
  REMAT_UNROLL
  for (int j = 0; j < B; ++j) mean[j] = static_cast<float>(sum[j] / static_cast<double>(rows));
  for (Index r = 0; r < rows; ++r) {
    const float* row = x + r * channels + c0;
    REMAT_UNROLL
    for (int j = 0; j < B; ++j) {
      const double d = static_cast<double>(row[j]) - static_cast<double>(mean[j]);
      squares[j] += d * d;
    }
  }
  REMAT_UNROLL
  for (int j = 0; j < B; ++j) {
    const double variance = squares[j] / static_cast<double>(rows);  // biased, as in training mode
    invStd[j] = static_cast<float>(1.0 / std::sqrt(variance + static_cast<double>(kBatchNormEpsilon)));
    scale[j] = invStd[j] * gamma[c0 + j];
    shift[j] = beta[c0 + j];
    if (stats != nullptr) {
      stats[c0 + j] = mean[j];
      stats[channels + c0 + j] = invStd[j];
    }
  }
  for (Index r = 0; r < rows; ++r) {
    const float* in = x + r * channels + c0;
    float* out = y + r * channels + c0;
    REMAT_UNROLL
    for (int j = 0; j < B; ++j) out[j] = (in[j] - mean[j]) * scale[j] + shift[j];
  }
}

template <int B>
void batchNormBackwardBlock(Index rows, Index channels, Index c0, const float* x, const float* dy, const float* gamma,
                            const float* stats, float* dx, float* dgamma, float* dbeta, bool accumulate) {
  const float m = static_cast<float>(rows);
  float mean[B], invStd[B], k[B], sDy[B], sDyXhat[B];
  double sumDy[B], sumDyXhat[B];
  REMAT_UNROLL
  for (int j = 0; j < B; ++j) {
    mean[j] = stats[c0 + j];
    invStd[j] = stats[channels + c0 + j];
    sumDy[j] = sumDyXhat[j] = 0.0;
  }
  for (Index r = 0; r < rows; ++r) {
    const float* xr = x + r * channels + c0;
    const float* g = dy + r * channels + c0;
    REMAT_UNROLL
    for (int j = 0; j < B; ++j) {
      const float xhat = (xr[j] - mean[j]) * invStd[j];
      sumDy[j] += g[j];
      sumDyXhat[j] += static_cast<double>(g[j]) * static_cast<double>(xhat);
    }
  }
  REMAT_UNROLL
  for (int j = 0; j < B; ++j) {
    dgamma[c0 + j] += static_cast<float>(sumDyXhat[j]);
    dbeta[c0 + j] += static_cast<float>(sumDy[j]);
    k[j] = gamma[c0 + j] * invStd[j] / m;
    sDy[j] = static_cast<float>(sumDy[j]);
    sDyXhat[j] = static_cast<float>(sumDyXhat[j]);
  }
  if (dx == nullptr) return;
  for (Index r = 0; r < rows; ++r) {
    const float* xr = x + r * channels + c0;
    const float* g = dy + r * channels + c0;
    float* out = dx + r * channels + c0;
    REMAT_UNROLL
    for (int j = 0; j < B; ++j) {
      const float xhat = (xr[j] - mean[j]) * invStd[j];
      const float value = k[j] * ((m * g[j] - sDy[j]) - xhat * sDyXhat[j]);
      out[j] = accumulate ? out[j] + value : value;
    }
  }
}

}  // namespace

void batchNormForward(Index rows, Index channels, const float* x, const float* gamma, const float* beta, float* y,
                      float* stats) {
  Index c = 0;
  for (; c + 8 <= channels; c += 8) batchNormForwardBlock<8>(rows, channels, c, x, gamma, beta, y, stats);
  for (; c < channels; ++c) batchNormForwardBlock<1>(rows, channels, c, x, gamma, beta, y, stats);
}

void batchNormBackward(Index rows, Index channels, const float* x, const float* dy, const float* gamma,
                       const float* stats, float* dx, float* dgamma, float* dbeta, bool accumulate) {
  Index c = 0;
  for (; c + 8 <= channels; c += 8)
    batchNormBackwardBlock<8>(rows, channels, c, x, dy, gamma, stats, dx, dgamma, dbeta, accumulate);
  for (; c < channels; ++c)
    batchNormBackwardBlock<1>(rows, channels, c, x, dy, gamma, stats, dx, dgamma, dbeta, accumulate);
}

void dropoutForward(const ActivationLayout& layout, double p, std::uint64_t key, const float* x, float* y,
                    std::uint8_t* mask) {
  const Index perSample = layout.perSample();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  const float threshold = static_cast<float>(p);
  for (Index n = 0; n < layout.batch; ++n)
    for (Index i = 0; i < perSample; ++i) {
      const Index e = n * perSample + i;
      const std::uint64_t index = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(perSample) +
                                  static_cast<std::uint64_t>(layout.canonicalIndex(i));
      const bool keep = p < 1.0 && rng::uniform01(rng::at(key, index)) >= threshold;
      y[e] = keep ? x[e] * scale : 0.0f;
      if (mask != nullptr) mask[e] = keep ? 1 : 0;
    }
}

void dropoutBackward(Index count, double p, const std::uint8_t* mask, const float* dy, float* dx) {
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  for (Index i = 0; i < count; ++i) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

namespace {

// NB samples share each pass over a weight row; two accumulators per sample (elements i % 8 < 4
// and >= 4) keep the adds independent. Fixed order: hsum(acc0 + acc1) + the scalar tail.
template <int NB>
void linearForwardRows(Index in, Index out, const float* x, const float* w, const float* b, float* y) {
  for (Index o = 0; o < out; ++o) {
    const float* wr = w + o * in;
    v4f acc0[NB], acc1[NB];
    float tail[NB];
    REMAT_UNROLL
    for (int n = 0; n < NB; ++n) {
      acc0[n] = splat4(0.0f);
      acc1[n] = splat4(0.0f);
      tail[n] = 0.0f;
    }
    Index i = 0;
    for (; i + 8 <= in; i += 8) {
      const v4f w0 = load4(wr + i), w1 = load4(wr + i + 4);
      REMAT_UNROLL
      for (int n = 0; n < NB; ++n) {
        acc0[n] += w0 * load4(x + n * in + i);
        acc1[n] += w1 * load4(x + n * in + i + 4);
      }
    }
    for (; i < in; ++i) REMAT_UNROLL
    for (int n = 0; n < NB; ++n) tail[n] += wr[i] * x[n * in + i];
    REMAT_UNROLL
    for (int n = 0; n < NB; ++n) y[n * out + o] = (b ? b[o] : 0.0f) + (hsum4(acc0[n] + acc1[n]) + tail[n]);
  }
}

}  // namespace

void linearForward(Index batch, Index inFeatures, Index outFeatures, const float* x, const float* w, const float* b,
                   float* y) {
  Index n = 0;
  for (; n + 4 <= batch; n += 4)
    linearForwardRows<4>(inFeatures, outFeatures, x + n * inFeatures, w, b, y + n * outFeatures);
  for (; n + 2 <= batch; n += 2)
    linearForwardRows<2>(inFeatures, outFeatures, x + n * inFeatures, w, b, y + n * outFeatures);
  for (; n < batch; ++n) linearForwardRows<1>(inFeatures, outFeatures, x + n * inFeatures, w, b, y + n * outFeatures);
}

namespace {

// Samples [n0, n0 + NB) of weight row o: dx[n] += dy[n][o] * w[o] (rows in o order) and
// dw[o] += dy[n][o] * x[n] (samples in n order), in one pass over the row.
template <int NB>
void linearBackwardRow(Index batch, Index in, Index out, Index o, Index n0, const float* x, const float* w,
                       const float* dy, float* dx, float* dw) {
  const float* wr = w + o * in;
  float* dwr = dw + o * in;
  float g[NB];
  REMAT_UNROLL
  for (int n = 0; n < NB; ++n) g[n] = dy[(n0 + n) * out + o];
  (void)batch;
  Index i = 0;
  for (; i + 4 <= in; i += 4) {
    const v4f wv = load4(wr + i);
    v4f dwv = load4(dwr + i);
    REMAT_UNROLL
    for (int n = 0; n < NB; ++n) {
      const v4f gv = splat4(g[n]);
      if (dx != nullptr) store4(dx + (n0 + n) * in + i, load4(dx + (n0 + n) * in + i) + gv * wv);
      dwv += gv * load4(x + (n0 + n) * in + i);
    }
    store4(dwr + i, dwv);
  }
  for (; i < in; ++i) REMAT_UNROLL
  for (int n = 0; n < NB; ++n) {
    if (dx != nullptr) dx[(n0 + n) * in + i] += g[n] * wr[i];
    dwr[i] += g[n] * x[(n0 + n) * in + i];
  }
}

}  // namespace

void linearBackward(Index batch, Index inFeatures, Index outFeatures, const float* x, const float* w, const float* dy,
                    float* dx, float* dw, float* db) {
  if (dx != nullptr) std::memset(dx, 0, static_cast<std::size_t>(batch * inFeatures) * sizeof(float));
  for (Index o = 0; o < outFeatures; ++o) {
    Index n = 0;
    for (; n + 4 <= batch; n += 4) linearBackwardRow<4>(batch, inFeatures, outFeatures, o, n, x, w, dy, dx, dw);
    for (; n + 2 <= batch; n += 2) linearBackwardRow<2>(batch, inFeatures, outFeatures, o, n, x, w, dy, dx, dw);
    for (; n < batch; ++n) linearBackwardRow<1>(batch, inFeatures, outFeatures, o, n, x, w, dy, dx, dw);
    if (db != nullptr) {
      float sum = 0.0f;
      for (Index m = 0; m < batch; ++m) sum += dy[m * outFeatures + o];
      db[o] += sum;
    }
  }
}

void softmaxCrossEntropyBackward(const ActivationLayout& layout, const float* logits, const std::int32_t* labels,
                                 float* grad) {
  const Index k = layout.perSample();
  const float invBatch = 1.0f / static_cast<float>(layout.batch);
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
