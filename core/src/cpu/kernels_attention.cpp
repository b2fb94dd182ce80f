// Flash attention, head copies and GELU on the CPU (attention.hpp; math attention runs on oneDNN's
// primitives, dnnl_attention.cpp). Plain loops: each (sample, head) pair, or each (sample, head,
// query tile) in the flash forward, is one task of the OpenMP team, and within a task every sum
// runs in one fixed order.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention.hpp"

namespace remat::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float dot(const float* a, const float* b, Index n) {
  float s = 0.0f;
  for (Index i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy(float alpha, const float* x, float* y, Index n) {
  for (Index i = 0; i < n; ++i) y[i] += alpha * x[i];
}

float scaleOf(const AttentionGeometry& g) { return 1.0f / std::sqrt(static_cast<float>(g.headDim)); }

// Head h of sample n in the token rows: row s starts at base + (n*S + s) * stride + h*dh.
struct HeadRows {
  const float* base;
  Index stride;
  const float* row(Index s) const { return base + s * stride; }
};

HeadRows headRows(const AttentionGeometry& g, const float* rows, Index rowStride, Index column0, Index n, Index h) {
  return {rows + n * g.seq * rowStride + column0 + h * g.headDim, rowStride};
}

// The keys query i sees: all, or j <= i under the causal mask.
Index keyEnd(const AttentionGeometry& g, Index i) { return g.causal ? i + 1 : g.seq; }

}  // namespace

Index attentionThreadFloats(const AttentionGeometry& g) {
  const Index tile = kAttentionTile;
  // forward: scores tile, accumulator, running max and sum; backward: probabilities and dS tiles
  return std::max(tile * tile + tile * g.headDim + 2 * tile, 2 * tile * tile);
}

void rowsToHeads(const AttentionGeometry& g, const float* rows, Index rowStride, Index column0, float* heads) {
  const Index dh = g.headDim;
#pragma omp parallel for schedule(static)
  for (Index nh = 0; nh < g.batch * g.heads; ++nh) {
    const HeadRows src = headRows(g, rows, rowStride, column0, nh / g.heads, nh % g.heads);
    for (Index s = 0; s < g.seq; ++s) std::copy_n(src.row(s), dh, heads + (nh * g.seq + s) * dh);
  }
}

void headsToRows(const AttentionGeometry& g, const float* heads, float* rows, Index rowStride, Index column0) {
  const Index dh = g.headDim;
#pragma omp parallel for schedule(static)
  for (Index nh = 0; nh < g.batch * g.heads; ++nh) {
    float* dst = rows + (nh / g.heads) * g.seq * rowStride + column0 + (nh % g.heads) * dh;
    for (Index s = 0; s < g.seq; ++s) std::copy_n(heads + (nh * g.seq + s) * dh, dh, dst + s * rowStride);
  }
}

void dropoutFlat(Index count, const DropoutDraw& draw, const float* x, float* y, std::uint8_t* mask) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) {
    const bool keep = draw.keep(static_cast<std::uint64_t>(i));
    y[i] = keep ? x[i] * draw.scale : 0.0f;
    if (mask != nullptr) mask[i] = keep ? 1 : 0;
  }
}

void dropoutFlatBackward(Index count, const DropoutDraw& draw, const std::uint8_t* mask, const float* dy, float* dx) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) dx[i] = mask[i] ? dy[i] * draw.scale : 0.0f;
}

namespace {

// One query tile [i0, i1) of head (n, h): online softmax over the key tiles it sees.
// drop: the head's dropout, drawn at index headBase + i*S + j (the softmax's sum is the undropped one).
void flashForwardTile(const AttentionGeometry& g, const HeadRows& q, const HeadRows& k, const HeadRows& v, Index i0,
                      Index i1, const DropoutDraw& drop, std::uint64_t headBase, float* out, float* lse,
                      float* scratch) {
  const Index tile = kAttentionTile, dh = g.headDim, rows = i1 - i0;
  const float scale = scaleOf(g);
  float *scores = scratch, *acc = scratch + tile * tile, *top = acc + tile * dh, *sum = top + tile;
  std::fill_n(acc, rows * dh, 0.0f);
  std::fill_n(top, rows, kNegInf);
  std::fill_n(sum, rows, 0.0f);
  const Index keysEnd = g.causal ? i1 : g.seq;
  for (Index j0 = 0; j0 < keysEnd; j0 += tile) {
    const Index j1 = std::min(j0 + tile, keysEnd);
    for (Index r = 0; r < rows; ++r) {
      const Index i = i0 + r, end = std::min(j1, keyEnd(g, i));
      float* s = scores + r * tile;
      float blockTop = kNegInf;
      for (Index j = j0; j < end; ++j) blockTop = std::max(blockTop, s[j - j0] = scale * dot(q.row(i), k.row(j), dh));
      if (end <= j0) continue;  // every key of this tile is masked for this query
      const float newTop = std::max(top[r], blockTop), correction = std::exp(top[r] - newTop);
      float* a = acc + r * dh;
      for (Index c = 0; c < dh; ++c) a[c] *= correction;
      sum[r] *= correction;
      for (Index j = j0; j < end; ++j) {
        const float p = std::exp(s[j - j0] - newTop);
        sum[r] += p;
        if (!drop.active())
          axpy(p, v.row(j), a, dh);
        else if (drop.keep(headBase + static_cast<std::uint64_t>(i * g.seq + j)))
          axpy(p * drop.scale, v.row(j), a, dh);
      }
      top[r] = newTop;
    }
  }
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < dh; ++c) out[(i0 + r) * dh + c] = acc[r * dh + c] / sum[r];
    lse[i0 + r] = top[r] + std::log(sum[r]);
  }
}

}  // namespace

void flashAttentionForward(const AttentionGeometry& g, const DropoutDraw& drop, const float* qkv, float* out,
                           float* lse, float* threadScratch) {
  const Index tiles = (g.seq + kAttentionTile - 1) / kAttentionTile, stride = 3 * g.width();
  const Index perThread = attentionThreadFloats(g);
#pragma omp parallel for schedule(static) num_threads(g.threads)
  for (Index task = 0; task < g.batch * g.heads * tiles; ++task) {
    const Index nh = task / tiles, t = task % tiles, n = nh / g.heads, h = nh % g.heads;
    const HeadRows q = headRows(g, qkv, stride, 0, n, h), k = headRows(g, qkv, stride, g.width(), n, h),
                   v = headRows(g, qkv, stride, 2 * g.width(), n, h);
    const Index i0 = t * kAttentionTile, i1 = std::min(i0 + kAttentionTile, g.seq);
    flashForwardTile(g, q, k, v, i0, i1, drop, static_cast<std::uint64_t>(nh * g.seq * g.seq),
                     out + nh * g.seq * g.headDim, lse + nh * g.seq, threadScratch + omp_get_thread_num() * perThread);
  }
}

namespace {

// Key tile [j0, j1) against query tile [i0, i1) of one head: P from the log-sum-exp, then dV, dS,
// dQ and dK (the gradients' rows in the token layout).
// With dropout p holds the dropped probabilities Z (what dV reads) and dS = P (mask * dZ * scale - D).
struct FlashBackwardHead {
  const AttentionGeometry& g;
  const DropoutDraw& drop;
  std::uint64_t headBase;  // the dropout index of (i, j) is headBase + i*S + j
  HeadRows q, k, v;
  const float *dO, *lse, *rowDot;
  float *dq, *dk, *dv;
  Index stride;

  void tile(Index i0, Index i1, Index j0, Index j1, float* p, float* dS) const {
    const Index dh = g.headDim, width = j1 - j0;
    const float scale = scaleOf(g);
    for (Index i = i0; i < i1; ++i) {
      const Index end = std::min(j1, keyEnd(g, i));
      float *pr = p + (i - i0) * width, *dr = dS + (i - i0) * width;
      for (Index j = j0; j < j1; ++j) {
        const float prob = j < end ? std::exp(scale * dot(q.row(i), k.row(j), dh) - lse[i]) : 0.0f;
        float dProb = dot(dO + i * dh, v.row(j), dh);
        pr[j - j0] = prob;
        if (drop.active()) {
          const bool keep = drop.keep(headBase + static_cast<std::uint64_t>(i * g.seq + j));
          pr[j - j0] = keep ? prob * drop.scale : 0.0f;
          dProb = keep ? dProb * drop.scale : 0.0f;
        }
        dr[j - j0] = prob * (dProb - rowDot[i]) * scale;
      }
    }
    for (Index j = j0; j < j1; ++j)
      for (Index i = i0; i < i1; ++i) {
        axpy(p[(i - i0) * width + j - j0], dO + i * dh, dv + j * stride, dh);
        axpy(dS[(i - i0) * width + j - j0], q.row(i), dk + j * stride, dh);
      }
    for (Index i = i0; i < i1; ++i)
      for (Index j = j0; j < j1; ++j) axpy(dS[(i - i0) * width + j - j0], k.row(j), dq + i * stride, dh);
  }
};

}  // namespace

void flashAttentionBackward(const AttentionGeometry& g, const DropoutDraw& drop, const float* qkv, const float* out,
                            const float* lse, const float* dOut, float* dqkv, float* rowDot, float* threadScratch) {
  const Index S = g.seq, dh = g.headDim, stride = 3 * g.width(), tile = kAttentionTile;
  const Index perThread = attentionThreadFloats(g);
#pragma omp parallel for schedule(static) num_threads(g.threads)
  for (Index nh = 0; nh < g.batch * g.heads; ++nh) {
    const Index n = nh / g.heads, h = nh % g.heads;
    const float *o = out + nh * S * dh, *dO = dOut + nh * S * dh;
    float* dot_ = rowDot + nh * S;
    for (Index i = 0; i < S; ++i) dot_[i] = dot(dO + i * dh, o + i * dh, dh);
    float* dq = dqkv + n * S * stride + h * dh;
    const FlashBackwardHead head{g,
                                 drop,
                                 static_cast<std::uint64_t>(nh * S * S),
                                 headRows(g, qkv, stride, 0, n, h),
                                 headRows(g, qkv, stride, g.width(), n, h),
                                 headRows(g, qkv, stride, 2 * g.width(), n, h),
                                 dO,
                                 lse + nh * S,
                                 dot_,
                                 dq,
                                 dq + g.width(),
                                 dq + 2 * g.width(),
                                 stride};
    for (Index s = 0; s < S; ++s)
      for (float* d : {head.dq, head.dk, head.dv}) std::fill_n(d + s * stride, dh, 0.0f);
    float* p = threadScratch + omp_get_thread_num() * perThread;
    for (Index j0 = 0; j0 < S; j0 += tile)
      for (Index i0 = g.causal ? j0 : 0; i0 < S; i0 += tile)
        head.tile(i0, std::min(i0 + tile, S), j0, std::min(j0 + tile, S), p, p + tile * tile);
  }
}

void geluForward(Index count, bool tanhForm, const float* x, float* y) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f, kInvSqrt2 = 0.7071067811865476f;
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) {
    const float v = x[i];
    y[i] = tanhForm ? 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v)))
                    : 0.5f * v * (1.0f + std::erf(v * kInvSqrt2));
  }
}

void geluBackward(Index count, bool tanhForm, const float* x, const float* dy, float* dx) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f, kInvSqrt2 = 0.7071067811865476f;
  constexpr float kInvSqrt2Pi = 0.3989422804014327f;
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) {
    const float v = x[i];
    float slope;
    if (tanhForm) {
      const float t = std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
      slope = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    } else {
      slope = 0.5f * (1.0f + std::erf(v * kInvSqrt2)) + v * std::exp(-0.5f * v * v) * kInvSqrt2Pi;
    }
    dx[i] = dy[i] * slope;
  }
}

}  // namespace remat::cpu
