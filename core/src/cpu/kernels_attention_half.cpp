// Math attention in bfloat16 (attention_half.hpp). Each task reads its head's q, k, v and
// probabilities as float32 values of bfloat16 data and rounds every result the way PyTorch's
// bfloat16 ops round theirs; the per-thread scratch holds one head's float32 accumulators.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention_half.hpp"

namespace remat::cpu {
namespace {

float bf(float value) { return BFloat16(value).value(); }  // a bfloat16 op's result

float dotHalf(const BFloat16* a, const BFloat16* b, Index n) {
  float s = 0.0f;
  for (Index i = 0; i < n; ++i) s += a[i].value() * b[i].value();
  return s;
}

// One query row: the scaled bfloat16 scores, softmax in float32, the bfloat16 probabilities.
void softmaxRow(const AttentionGeometry& g, const BFloat16* qi, const BFloat16* k, Index limit, float scale, float* row,
                BFloat16* probs) {
  const Index S = g.seq, dh = g.headDim;
  float top = -std::numeric_limits<float>::infinity();
  for (Index j = 0; j < limit; ++j) {
    row[j] = bf(bf(dotHalf(qi, k + j * dh, dh)) * scale);
    top = std::max(top, row[j]);
  }
  float sum = 0.0f;
  for (Index j = 0; j < limit; ++j) {
    row[j] = std::exp(row[j] - top);
    sum += row[j];
  }
  for (Index j = 0; j < S; ++j) probs[j] = BFloat16(j < limit ? row[j] / sum : 0.0f);
}

}  // namespace

void rowsToHeadsHalf(const AttentionGeometry& g, const BFloat16* rows, Index rowStride, Index column0,
                     BFloat16* heads) {
  const Index S = g.seq, dh = g.headDim;
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < g.batch; ++n)
    for (Index h = 0; h < g.heads; ++h)
      for (Index s = 0; s < S; ++s) {
        const BFloat16* from = rows + (n * S + s) * rowStride + column0 + h * dh;
        std::copy(from, from + dh, heads + ((n * g.heads + h) * S + s) * dh);
      }
}

void headsToRowsHalf(const AttentionGeometry& g, const BFloat16* heads, BFloat16* rows, Index rowStride,
                     Index column0) {
  const Index S = g.seq, dh = g.headDim;
#pragma omp parallel for collapse(2) schedule(static)
  for (Index n = 0; n < g.batch; ++n)
    for (Index h = 0; h < g.heads; ++h)
      for (Index s = 0; s < S; ++s) {
        const BFloat16* from = heads + ((n * g.heads + h) * S + s) * dh;
        std::copy(from, from + dh, rows + (n * S + s) * rowStride + column0 + h * dh);
      }
}

Index halfAttentionThreadFloats(const AttentionGeometry& g) { return g.seq * g.seq + 3 * g.seq * g.headDim + g.seq; }

void mathAttentionForwardHalf(const AttentionGeometry& g, const BFloat16* q, const BFloat16* k, const BFloat16* v,
                              BFloat16* probs, BFloat16* out, float* threadScratch, const HalfAttentionDropout& drop) {
  const Index S = g.seq, dh = g.headDim, pairs = g.batch * g.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
#pragma omp parallel for schedule(static)
  for (Index pair = 0; pair < pairs; ++pair) {
    float* row = threadScratch + omp_get_thread_num() * halfAttentionThreadFloats(g);
    float* acc = row + S;
    const BFloat16 *qh = q + pair * S * dh, *kh = k + pair * S * dh, *vh = v + pair * S * dh;
    BFloat16* ph = probs + pair * S * S;
    for (Index i = 0; i < S; ++i) {
      const Index limit = g.causal ? i + 1 : S;
      softmaxRow(g, qh + i * dh, kh, limit, scale, row, ph + i * S);
      const BFloat16* used = ph + i * S;  // the probabilities P v reads: dropped ones with dropout
      if (drop.draw.active()) {
        const Index at = (pair * S + i) * S;
        for (Index j = 0; j < S; ++j) {
          const bool keep = drop.draw.keep(static_cast<std::uint64_t>(at + j));
          drop.mask[at + j] = keep ? 1 : 0;
          drop.dropped[at + j] = BFloat16(keep ? ph[i * S + j].value() * drop.draw.scale : 0.0f);
        }
        used = drop.dropped + at;
      }
      std::fill(acc, acc + dh, 0.0f);
      for (Index j = 0; j < limit; ++j) {
        const float p = used[j].value();
        for (Index c = 0; c < dh; ++c) acc[c] += p * vh[j * dh + c].value();
      }
      for (Index c = 0; c < dh; ++c) out[(pair * S + i) * dh + c] = BFloat16(acc[c]);
    }
  }
}

namespace {

// One head's backward: dS (the scores' gradient, scaled) into `ds` [S][S], then dq, dk, dv.
// With dropout `used` holds the dropped probabilities (dv's) and d(dropped) goes through the mask.
void headBackward(const AttentionGeometry& g, Index pair, const BFloat16* q, const BFloat16* k, const BFloat16* v,
                  const BFloat16* p, const BFloat16* used, const std::uint8_t* mask, float dropScale,
                  const BFloat16* dOut, BFloat16* dqkv, float* scratch) {
  const Index S = g.seq, dh = g.headDim, d = g.width(), n = pair / g.heads, h = pair % g.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  float *ds = scratch, *dq = ds + S * S, *dk = dq + S * dh, *dv = dk + S * dh;
  std::fill(dk, dk + 2 * S * dh, 0.0f);
  for (Index i = 0; i < S; ++i) {
    const Index limit = g.causal ? i + 1 : S;
    float rowDot = 0.0f;
    for (Index j = 0; j < limit; ++j) {
      ds[i * S + j] = bf(dotHalf(dOut + i * dh, v + j * dh, dh));  // dP = dO v^T, a bf16 matmul
      if (mask != nullptr) ds[i * S + j] = mask[i * S + j] ? bf(ds[i * S + j] * dropScale) : 0.0f;
      rowDot += p[i * S + j].value() * ds[i * S + j];
    }
    for (Index j = 0; j < limit; ++j) ds[i * S + j] = bf(bf(p[i * S + j].value() * (ds[i * S + j] - rowDot)) * scale);
    for (Index j = 0; j < limit; ++j) {
      const float pij = used[i * S + j].value(), sij = ds[i * S + j];
      for (Index c = 0; c < dh; ++c) {
        dv[j * dh + c] += pij * dOut[i * dh + c].value();
        dk[j * dh + c] += sij * q[i * dh + c].value();
      }
    }
    std::fill(dq, dq + dh, 0.0f);
    for (Index j = 0; j < limit; ++j)
      for (Index c = 0; c < dh; ++c) dq[c] += ds[i * S + j] * k[j * dh + c].value();
    BFloat16* rowOut = dqkv + (n * S + i) * 3 * d + h * dh;
    for (Index c = 0; c < dh; ++c) rowOut[c] = BFloat16(dq[c]);
  }
  for (Index j = 0; j < S; ++j) {
    BFloat16* rowOut = dqkv + (n * S + j) * 3 * d + h * dh;
    for (Index c = 0; c < dh; ++c) {
      rowOut[d + c] = BFloat16(dk[j * dh + c]);
      rowOut[2 * d + c] = BFloat16(dv[j * dh + c]);
    }
  }
}

}  // namespace

void mathAttentionBackwardHalf(const AttentionGeometry& g, const BFloat16* q, const BFloat16* k, const BFloat16* v,
                               const BFloat16* probs, const BFloat16* dOut, BFloat16* dqkv, float* threadScratch,
                               const HalfAttentionDropout& drop) {
  const Index S = g.seq, dh = g.headDim, pairs = g.batch * g.heads;
  const bool dropped = drop.draw.active();
#pragma omp parallel for schedule(static)
  for (Index pair = 0; pair < pairs; ++pair) {
    const Index at = pair * S * dh;
    const Index square = pair * S * S;
    headBackward(g, pair, q + at, k + at, v + at, probs + square, (dropped ? drop.dropped : probs) + square,
                 dropped ? drop.mask + square : nullptr, drop.draw.scale, dOut + at, dqkv,
                 threadScratch + omp_get_thread_num() * halfAttentionThreadFloats(g));
  }
}

}  // namespace remat::cpu

namespace remat::cpu {
namespace {

// Head h's q (or k, v: part 1, 2) of token row (n, s) inside qkv [N*S][3d].
const BFloat16* rowOf(const AttentionGeometry& g, const BFloat16* qkv, Index n, Index h, Index s, Index part) {
  const Index d = g.width();
  return qkv + (n * g.seq + s) * 3 * d + part * d + h * g.headDim;
}

// Query i's float32 scores against keys 0..limit-1, scaled.
void scoresOf(const AttentionGeometry& g, const BFloat16* qkv, Index n, Index h, Index i, Index limit, float scale,
              float* row) {
  const BFloat16* qi = rowOf(g, qkv, n, h, i, 0);
  for (Index j = 0; j < limit; ++j) row[j] = dotHalf(qi, rowOf(g, qkv, n, h, j, 1), g.headDim) * scale;
}

void fusedHeadForward(const AttentionGeometry& g, const BFloat16* qkv, Index pair, BFloat16* out, float* lse,
                      float* scratch, const DropoutDraw& drop) {
  const Index S = g.seq, dh = g.headDim, n = pair / g.heads, h = pair % g.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  float *row = scratch, *acc = row + S;
  for (Index i = 0; i < S; ++i) {
    const Index limit = g.causal ? i + 1 : S;
    scoresOf(g, qkv, n, h, i, limit, scale, row);
    const float top = *std::max_element(row, row + limit);
    float sum = 0.0f;
    std::fill(acc, acc + dh, 0.0f);
    for (Index j = 0; j < limit; ++j) {
      const float p = std::exp(row[j] - top);
      sum += p;  // the log-sum-exp of the probabilities before dropout
      const float w =
          drop.active() ? (drop.keep(static_cast<std::uint64_t>((pair * S + i) * S + j)) ? p * drop.scale : 0.0f) : p;
      const BFloat16* vj = rowOf(g, qkv, n, h, j, 2);
      for (Index c = 0; c < dh; ++c) acc[c] += w * vj[c].value();
    }
    for (Index c = 0; c < dh; ++c) out[(pair * S + i) * dh + c] = BFloat16(acc[c] / sum);
    lse[pair * S + i] = top + std::log(sum);
  }
}

void fusedHeadBackward(const AttentionGeometry& g, const BFloat16* qkv, Index pair, const BFloat16* out,
                       const float* lse, const BFloat16* dOut, BFloat16* dqkv, float* scratch,
                       const DropoutDraw& drop) {
  const Index S = g.seq, dh = g.headDim, n = pair / g.heads, h = pair % g.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  float *row = scratch, *dk = row + S, *dv = dk + S * dh, *dq = dv + S * dh;
  std::fill(dk, dk + 2 * S * dh, 0.0f);
  for (Index i = 0; i < S; ++i) {
    const Index limit = g.causal ? i + 1 : S;
    const BFloat16 *dOi = dOut + (pair * S + i) * dh, *qi = rowOf(g, qkv, n, h, i, 0);
    const float rowDot = dotHalf(dOi, out + (pair * S + i) * dh, dh);  // sum_j P dP = dO . O
    scoresOf(g, qkv, n, h, i, limit, scale, row);
    std::fill(dq, dq + dh, 0.0f);
    for (Index j = 0; j < limit; ++j) {
      const BFloat16 *kj = rowOf(g, qkv, n, h, j, 1), *vj = rowOf(g, qkv, n, h, j, 2);
      const float p = std::exp(row[j] - lse[pair * S + i]);
      const float kept =
          drop.active() ? (drop.keep(static_cast<std::uint64_t>((pair * S + i) * S + j)) ? drop.scale : 0.0f) : 1.0f;
      const float ds = p * (kept * dotHalf(dOi, vj, dh) - rowDot) * scale;
      for (Index c = 0; c < dh; ++c) {
        dq[c] += ds * kj[c].value();
        dk[j * dh + c] += ds * qi[c].value();
        dv[j * dh + c] += p * kept * dOi[c].value();
      }
    }
    BFloat16* rowOut = dqkv + (n * S + i) * 3 * g.width() + h * dh;
    for (Index c = 0; c < dh; ++c) rowOut[c] = BFloat16(dq[c]);
  }
  for (Index j = 0; j < S; ++j) {
    BFloat16* rowOut = dqkv + (n * S + j) * 3 * g.width() + h * dh;
    for (Index c = 0; c < dh; ++c) {
      rowOut[g.width() + c] = BFloat16(dk[j * dh + c]);
      rowOut[2 * g.width() + c] = BFloat16(dv[j * dh + c]);
    }
  }
}

}  // namespace

void fusedAttentionForwardHalf(const AttentionGeometry& g, const BFloat16* qkv, BFloat16* out, float* lse,
                               float* threadScratch, const DropoutDraw& drop) {
  const Index pairs = g.batch * g.heads;
#pragma omp parallel for schedule(static)
  for (Index pair = 0; pair < pairs; ++pair)
    fusedHeadForward(g, qkv, pair, out, lse, threadScratch + omp_get_thread_num() * halfAttentionThreadFloats(g), drop);
}

void fusedAttentionBackwardHalf(const AttentionGeometry& g, const BFloat16* qkv, const BFloat16* out, const float* lse,
                                const BFloat16* dOut, BFloat16* dqkv, float* threadScratch, const DropoutDraw& drop) {
  const Index pairs = g.batch * g.heads;
#pragma omp parallel for schedule(static)
  for (Index pair = 0; pair < pairs; ++pair)
    fusedHeadBackward(g, qkv, pair, out, lse, dOut, dqkv,
                      threadScratch + omp_get_thread_num() * halfAttentionThreadFloats(g), drop);
}

// GELU on bfloat16 tensors without a float32 copy in the workspace: each chunk of a thread is
// widened into a small array on its stack (PyTorch's bfloat16 kernel widens in registers), the
// float32 formula of geluForward / geluBackward applied and the result rounded once; the values
// are those of widening the whole tensor first.
namespace {
constexpr Index kGeluChunk = 2048;
}

void geluForwardHalf(Index count, bool tanhForm, const BFloat16* x, BFloat16* y) {
  const Index chunks = (count + kGeluChunk - 1) / kGeluChunk;
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < chunks; ++c) {
    float work[kGeluChunk];
    const Index start = c * kGeluChunk, n = std::min(kGeluChunk, count - start);
    for (Index i = 0; i < n; ++i) work[i] = x[start + i].value();
    geluForward(n, tanhForm, work, work);
    for (Index i = 0; i < n; ++i) y[start + i] = BFloat16(work[i]);
  }
}

void geluBackwardHalf(Index count, bool tanhForm, const BFloat16* x, BFloat16* dyDx) {
  const Index chunks = (count + kGeluChunk - 1) / kGeluChunk;
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < chunks; ++c) {
    float input[kGeluChunk], grad[kGeluChunk];
    const Index start = c * kGeluChunk, n = std::min(kGeluChunk, count - start);
    for (Index i = 0; i < n; ++i) {
      input[i] = x[start + i].value();
      grad[i] = dyDx[start + i].value();
    }
    geluBackward(n, tanhForm, input, grad, grad);
    for (Index i = 0; i < n; ++i) dyDx[start + i] = BFloat16(grad[i]);
  }
}

}  // namespace remat::cpu
