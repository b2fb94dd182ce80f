// Swin's kernels under bf16-mixed (window_half.hpp). Plain loops; each output element is written by
// one iteration, so every loop runs in parallel without atomics.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "window_half.hpp"

namespace remat::cpu {
namespace {

// A bfloat16 row of C (even) elements as C / 2 float32 words: the float32 gathers move it unchanged.
const float* words(const BFloat16* p) { return reinterpret_cast<const float*>(p); }
float* words(BFloat16* p) { return reinterpret_cast<float*>(p); }

WindowGeometry wordGeometry(WindowGeometry g) {
  g.channels /= 2;
  return g;
}

}  // namespace

void windowPartitionHalf(const WindowGeometry& g, const BFloat16* x, BFloat16* windows) {
  windowPartition(wordGeometry(g), words(x), words(windows));
}
void windowReverseHalf(const WindowGeometry& g, const BFloat16* windows, BFloat16* y) {
  windowReverse(wordGeometry(g), words(windows), words(y));
}
void mergeGatherHalf(Index batch, Index height, Index width, Index channels, const BFloat16* x, BFloat16* cat) {
  mergeGather(batch, height, width, channels / 2, words(x), words(cat));
}
void mergeScatterHalf(Index batch, Index height, Index width, Index channels, const BFloat16* dCat, BFloat16* dx) {
  mergeScatter(batch, height, width, channels / 2, words(dCat), words(dx));
}

void addHalf(Index count, const BFloat16* a, const BFloat16* b, BFloat16* out) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) out[i] = BFloat16(a[i].value() + b[i].value());
}

void addHalfRounded(Index count, const BFloat16* a, const float* b, BFloat16* out) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) out[i] = BFloat16(a[i].value() + BFloat16(b[i]).value());
}

void scaleSamplesHalf(Index batch, Index perSample, const BFloat16* factor, const BFloat16* x, BFloat16* y) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < batch * perSample; ++i) y[i] = BFloat16(x[i].value() * factor[i / perSample].value());
}

void averagePositionsHalf(Index batch, Index positions, Index channels, const BFloat16* x, BFloat16* pooled) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < batch * channels; ++r) {
    const Index n = r / channels, c = r % channels;
    float sum = 0.0f;
    for (Index p = 0; p < positions; ++p) sum += x[(n * positions + p) * channels + c].value();
    pooled[r] = BFloat16(sum / static_cast<float>(positions));
  }
}

void averagePositionsHalfBackward(Index batch, Index positions, Index channels, const BFloat16* dPooled, float* dx) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < batch * positions; ++r)
    for (Index c = 0; c < channels; ++c)
      dx[r * channels + c] =
          BFloat16(dPooled[(r / positions) * channels + c].value() / static_cast<float>(positions)).value();
}

Index swinAttentionThreadFloats(const AttentionGeometry& g) { return 2 * g.seq * g.seq + g.seq; }

namespace {

// One (batch entry, head) pair's [L][dh] block of a heads-order tensor, and its [L][L] block.
Index headBlock(const AttentionGeometry& g, Index pair) { return pair * g.seq * g.headDim; }
Index squareBlock(const AttentionGeometry& g, Index pair) { return pair * g.seq * g.seq; }

float dot(const BFloat16* a, const BFloat16* b, Index n) {
  float sum = 0.0f;
  for (Index d = 0; d < n; ++d) sum += a[d].value() * b[d].value();
  return sum;
}

void forwardPair(const SwinHalfAttention& a, Index pair, float* probs32, BFloat16* probs16, BFloat16* out,
                 float* rowScratch) {
  const AttentionGeometry& g = a.g;
  const Index L = g.seq, dh = g.headDim, h = pair % g.heads, entry = pair / g.heads;
  const BFloat16 *q = a.q + headBlock(g, pair), *k = a.k + headBlock(g, pair), *v = a.v + headBlock(g, pair);
  const float* bias = a.bias + h * L * L;
  const float* mask = a.mask != nullptr ? a.mask + (entry % a.windows) * L * L : nullptr;
  BFloat16* p16 = probs16 + squareBlock(g, pair);
  for (Index i = 0; i < L; ++i) {
    float* row = probs32 != nullptr ? probs32 + squareBlock(g, pair) + i * L : rowScratch;
    float top = -INFINITY;
    for (Index j = 0; j < L; ++j) {  // q k^T rounded (a bf16 matmul), then the float32 adds (pure: bf16 adds)
      float s = BFloat16(dot(q + i * dh, k + j * dh, dh)).value() + bias[i * L + j];
      if (a.pure) s = BFloat16(s).value();
      if (mask != nullptr) s += mask[i * L + j];
      if (a.pure) s = BFloat16(s).value();
      row[j] = s;
      top = std::max(top, s);
    }
    float sum = 0.0f;
    for (Index j = 0; j < L; ++j) sum += row[j] = std::exp(row[j] - top);
    for (Index j = 0; j < L; ++j) {
      row[j] /= sum;
      p16[i * L + j] = BFloat16(row[j]);
    }
  }
  BFloat16* o = out + headBlock(g, pair);
  for (Index i = 0; i < L; ++i)
    for (Index d = 0; d < dh; ++d) {
      float sum = 0.0f;
      for (Index j = 0; j < L; ++j) sum += p16[i * L + j].value() * v[j * dh + d].value();
      o[i * dh + d] = BFloat16(sum);
    }
}

}  // namespace

void swinAttentionForwardHalf(const SwinHalfAttention& a, float* probs32, BFloat16* probs16, BFloat16* out,
                              float* threadScratch) {
  const Index pairs = a.g.batch * a.g.heads;
#pragma omp parallel for schedule(static)
  for (Index pair = 0; pair < pairs; ++pair)
    forwardPair(a, pair, probs32, probs16, out, threadScratch + omp_get_thread_num() * swinAttentionThreadFloats(a.g));
}

namespace {

struct PairGrad {
  const SwinHalfAttention& a;
  const float* probs32;
  const BFloat16* probs16;
  const BFloat16* dOut;
  float scale;
  BFloat16* dqkv;
  float* dScores;
};

// Column `part` (0 q, 1 k, 2 v) of head h, token i of batch entry `entry` in the rows [Tp][3C].
BFloat16* qkvAt(const PairGrad& p, Index entry, Index h, Index i, Index part) {
  const AttentionGeometry& g = p.a.g;
  return p.dqkv + (entry * g.seq + i) * 3 * g.width() + part * g.width() + h * g.headDim;
}

void backwardPair(const PairGrad& p, Index pair, float* work) {
  const AttentionGeometry& g = p.a.g;
  const Index L = g.seq, dh = g.headDim, h = pair % g.heads, entry = pair / g.heads;
  const BFloat16 *q = p.a.q + headBlock(g, pair), *k = p.a.k + headBlock(g, pair), *v = p.a.v + headBlock(g, pair);
  const BFloat16* dO = p.dOut + headBlock(g, pair);
  const BFloat16* p16 = p.probs16 + squareBlock(g, pair);
  // softmax's result as its backward reads it: float32 (bf16-mixed), or the bfloat16 one (pure)
  auto prob = [&](Index at) { return p.probs32 != nullptr ? p.probs32[squareBlock(g, pair) + at] : p16[at].value(); };
  float* dS = p.dScores + squareBlock(g, pair);
  float* dSh = work;  // d(q k^T): the float32 scores' gradient rounded to bfloat16 (the promotion's backward)
  for (Index i = 0; i < L; ++i) {
    float* dP = work + L * L;  // d(P): bmm's bfloat16 result, widened by the cast's backward
    float inner = 0.0f;
    for (Index j = 0; j < L; ++j) {
      dP[j] = BFloat16(dot(dO + i * dh, v + j * dh, dh)).value();
      inner += prob(i * L + j) * dP[j];
    }
    for (Index j = 0; j < L; ++j) {
      dS[i * L + j] = prob(i * L + j) * (dP[j] - inner);
      dSh[i * L + j] = BFloat16(dS[i * L + j]).value();
      if (p.a.pure) dS[i * L + j] = dSh[i * L + j];  // softmax's bfloat16 backward: the add's gradient as is
    }
  }
  for (Index i = 0; i < L; ++i)
    for (Index d = 0; d < dh; ++d) {
      float dq = 0.0f, dk = 0.0f, dv = 0.0f;
      for (Index j = 0; j < L; ++j) {
        dq += dSh[i * L + j] * k[j * dh + d].value();
        dk += dSh[j * L + i] * q[j * dh + d].value();
        dv += p16[j * L + i].value() * dO[j * dh + d].value();
      }
      qkvAt(p, entry, h, i, 0)[d] = BFloat16(BFloat16(dq).value() * p.scale);  // d(q * scale), then the mul's
      qkvAt(p, entry, h, i, 1)[d] = BFloat16(dk);
      qkvAt(p, entry, h, i, 2)[d] = BFloat16(dv);
    }
}

}  // namespace

void swinAttentionBackwardHalf(const SwinHalfAttention& a, const float* probs32, const BFloat16* probs16,
                               const BFloat16* dOut, float scale, BFloat16* dqkv, float* dScores,
                               float* threadScratch) {
  const PairGrad p{a, probs32, probs16, dOut, scale, dqkv, dScores};
  const Index pairs = a.g.batch * a.g.heads;
#pragma omp parallel for schedule(static)
  for (Index pair = 0; pair < pairs; ++pair)
    backwardPair(p, pair, threadScratch + omp_get_thread_num() * swinAttentionThreadFloats(a.g));
}

}  // namespace remat::cpu
