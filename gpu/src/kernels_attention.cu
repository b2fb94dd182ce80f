// The transformer block's own kernels (kernels_attention.hpp). The flash kernels give each query
// row (forward, dq) or key row (dk, dv) one thread that streams over the other side in order: two
// passes over the keys (the row maximum and sum, then the output with the final normalisation), so
// nothing S x S is ever stored and no rescaling reorders the sums. The head split and merge are
// copies templated on the element type: bf16-mixed's (kernels_attention_half.hpp) move bfloat16; so
// are GELU and the row softmax and its backward, which Swin's bf16-mixed attention runs on bfloat16
// scores with float32 probabilities (kernels_window_half.hpp; half_io.cuh's load and store<T>).
#include <cmath>

#include "half_io.cuh"
#include "kernel_grid.cuh"
#include "kernels_attention.hpp"
#include "kernels_attention_half.hpp"
#include "kernels_window_half.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;
using half_io::load;
using half_io::store;

constexpr float kSqrtTwoOverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

template <typename T>
__global__ void rowsToHeadsKernel(AttentionShape g, const T* rows, Index rowStride, Index column0, T* heads) {
  const Index count = g.tokens() * g.width();
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index c = i % g.headDim, s = (i / g.headDim) % g.seq, h = (i / (g.headDim * g.seq)) % g.heads;
    const Index n = i / (g.headDim * g.seq * g.heads);
    heads[i] = rows[(n * g.seq + s) * rowStride + column0 + h * g.headDim + c];
  }
}

template <typename T>
__global__ void headsToRowsKernel(AttentionShape g, const T* heads, T* rows, Index rowStride, Index column0) {
  const Index count = g.tokens() * g.width();
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index c = i % g.headDim, s = (i / g.headDim) % g.seq, h = (i / (g.headDim * g.seq)) % g.heads;
    const Index n = i / (g.headDim * g.seq * g.heads);
    rows[(n * g.seq + s) * rowStride + column0 + h * g.headDim + c] = heads[i];
  }
}

template <typename T>
__global__ void geluForwardKernel(Index count, bool tanhForm, const T* x, T* y) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float v = load(x[i]);
    if (tanhForm)
      y[i] = store<T>(0.5f * v * (1.0f + tanhf(kSqrtTwoOverPi * (v + kGeluCubic * v * v * v))));
    else
      y[i] = store<T>(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
  }
}

template <typename T>
__global__ void geluBackwardKernel(Index count, bool tanhForm, const T* x, const T* dy, T* dx) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float v = load(x[i]);
    float slope;
    if (tanhForm) {
      const float t = tanhf(kSqrtTwoOverPi * (v + kGeluCubic * v * v * v));
      slope = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrtTwoOverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    } else {
      slope = 0.5f * (1.0f + erff(v * 0.70710678118654752f)) + v * expf(-0.5f * v * v) * 0.39894228040143268f;
    }
    dx[i] = store<T>(load(dy[i]) * slope);
  }
}

// Keys 0 .. keysFor(i) - 1 are visible to query i.
__device__ __forceinline__ Index keysFor(const AttentionShape& g, Index i) { return g.causal ? i + 1 : g.seq; }

// The scaled score of row r's key j plus the bias terms (the CPU's scoreBias); a bfloat16 score is
// widened first (the float32 bias promotes it).
template <typename Score>
__device__ __forceinline__ float biasedScore(const AttentionShape& g, const ScoreBias& bias, float scale,
                                             const Score* row, Index r, Index j) {
  const Index S = g.seq, i = r % S, nh = r / S;
  float b = 0.0f;
  if (bias.perHead != nullptr) b += bias.perHead[((nh % g.heads) * S + i) * S + j];
  if (bias.perWindow != nullptr) b += bias.perWindow[(((nh / g.heads) % bias.windows) * S + i) * S + j];
  return load(row[j]) * scale + b;
}

// probs32 (Swin under bf16-mixed): the float32 probabilities go there, their rounding over the scores.
template <typename Score>
__global__ void softmaxKernel(AttentionShape g, float scale, Score* scores, ScoreBias bias, float* probs32) {
  for (Index r = firstIndex(); r < g.rows(); r += gridStride()) {
    Score* row = scores + r * g.seq;
    const Index visible = keysFor(g, r % g.seq);
    float top = -INFINITY;
    for (Index j = 0; j < visible; ++j) top = fmaxf(top, biasedScore(g, bias, scale, row, r, j));
    float sum = 0.0f;
    for (Index j = 0; j < visible; ++j) sum += expf(biasedScore(g, bias, scale, row, r, j) - top);
    // Written in place: score j is read before it is overwritten, each only once in this pass.
    for (Index j = 0; j < g.seq; ++j) {
      const float p = j < visible ? expf(biasedScore(g, bias, scale, row, r, j) - top) / sum : 0.0f;
      if (probs32 != nullptr) probs32[r * g.seq + j] = p;
      row[j] = store<Score>(p);
    }
  }
}

// dScores32 (Swin under bf16-mixed): the float32 d(scores) also goes there, its rounding over d(P).
template <typename D>
__global__ void softmaxBackwardKernel(AttentionShape g, const float* probs, D* dProbs, float* dScores32) {
  for (Index r = firstIndex(); r < g.rows(); r += gridStride()) {
    const float* p = probs + r * g.seq;
    D* d = dProbs + r * g.seq;
    float dot = 0.0f;
    for (Index j = 0; j < g.seq; ++j) dot += p[j] * load(d[j]);
    for (Index j = 0; j < g.seq; ++j) {
      const float value = p[j] * (load(d[j]) - dot);
      if (dScores32 != nullptr) dScores32[r * g.seq + j] = value;
      d[j] = store<D>(value);
    }
  }
}

// The pointers of one (n, h): q, k, v rows of the token matrix [N*S][3d] with stride 3d.
struct HeadView {
  const float *q, *k, *v;
  Index stride;
};

__device__ __forceinline__ HeadView headView(const AttentionShape& g, const float* qkv, Index n, Index h) {
  const Index d = g.width();
  const float* base = qkv + n * g.seq * 3 * d + h * g.headDim;
  return {base, base + d, base + 2 * d, 3 * d};
}

__device__ __forceinline__ float dotRows(const float* a, const float* b, Index count) {
  float sum = 0.0f;
  for (Index c = 0; c < count; ++c) sum += a[c] * b[c];
  return sum;
}

// The dropout factor of element (row r = (n*h + h)*S + i, key j): 0 or 1/(1-p); 1 when inactive.
__device__ __forceinline__ float dropFactor(std::uint64_t key, float p, float scale, Index r, Index seq, Index j) {
  if (p <= 0.0f) return 1.0f;
  const auto index = static_cast<std::uint64_t>(r * seq + j);
  return p < 1.0f && rng::uniform01(rng::at(key, index)) >= p ? scale : 0.0f;
}

struct DropConstants {
  std::uint64_t key;
  float p, scale;
};

DropConstants dropConstants(const AttentionDrop& drop) {
  if (!drop.active()) return {0, 0.0f, 1.0f};
  return {drop.key, static_cast<float>(drop.p), drop.p < 1.0 ? static_cast<float>(1.0 / (1.0 - drop.p)) : 0.0f};
}

__global__ void flashForwardKernel(AttentionShape g, DropConstants drop, float scale, const float* qkv, float* out,
                                   float* lse) {
  for (Index r = firstIndex(); r < g.rows(); r += gridStride()) {
    const Index i = r % g.seq, h = (r / g.seq) % g.heads, n = r / (g.seq * g.heads);
    const HeadView view = headView(g, qkv, n, h);
    const float* q = view.q + i * view.stride;
    const Index visible = keysFor(g, i);
    float top = -INFINITY;
    for (Index j = 0; j < visible; ++j) top = fmaxf(top, dotRows(q, view.k + j * view.stride, g.headDim) * scale);
    float sum = 0.0f;
    for (Index j = 0; j < visible; ++j) sum += expf(dotRows(q, view.k + j * view.stride, g.headDim) * scale - top);
    const float logSum = top + logf(sum);
    lse[r] = logSum;
    float* o = out + r * g.headDim;
    for (Index c = 0; c < g.headDim; ++c) o[c] = 0.0f;
    for (Index j = 0; j < visible; ++j) {
      const float w = expf(dotRows(q, view.k + j * view.stride, g.headDim) * scale - logSum) *
                      dropFactor(drop.key, drop.p, drop.scale, r, g.seq, j);
      if (w == 0.0f) continue;
      const float* v = view.v + j * view.stride;
      for (Index c = 0; c < g.headDim; ++c) o[c] += w * v[c];
    }
  }
}

// Per query row: rowDot = dOut . out, then dq = scale * sum_j P (dP_dropped - rowDot) k_j.
__global__ void flashBackwardQueryKernel(AttentionShape g, DropConstants drop, float scale, const float* qkv,
                                         const float* out, const float* lse, const float* dOut, float* dqkv,
                                         float* rowDot) {
  for (Index r = firstIndex(); r < g.rows(); r += gridStride()) {
    const Index i = r % g.seq, h = (r / g.seq) % g.heads, n = r / (g.seq * g.heads);
    const HeadView view = headView(g, qkv, n, h);
    const float* q = view.q + i * view.stride;
    const float* dO = dOut + r * g.headDim;
    const float D = dotRows(dO, out + r * g.headDim, g.headDim);
    rowDot[r] = D;
    float* dq = dqkv + (n * g.seq + i) * view.stride + h * g.headDim;
    for (Index c = 0; c < g.headDim; ++c) dq[c] = 0.0f;
    for (Index j = 0; j < keysFor(g, i); ++j) {
      const float* k = view.k + j * view.stride;
      const float P = expf(dotRows(q, k, g.headDim) * scale - lse[r]);
      const float dP =
          dropFactor(drop.key, drop.p, drop.scale, r, g.seq, j) * dotRows(dO, view.v + j * view.stride, g.headDim);
      const float dS = P * (dP - D) * scale;
      for (Index c = 0; c < g.headDim; ++c) dq[c] += dS * k[c];
    }
  }
}

// Per key row j of (n, h): dv = sum_i P_dropped dOut_i, dk = scale * sum_i P (dP_dropped - rowDot) q_i.
__global__ void flashBackwardKeyKernel(AttentionShape g, DropConstants drop, float scale, const float* qkv,
                                       const float* lse, const float* dOut, const float* rowDot, float* dqkv) {
  for (Index kr = firstIndex(); kr < g.rows(); kr += gridStride()) {
    const Index j = kr % g.seq, h = (kr / g.seq) % g.heads, n = kr / (g.seq * g.heads);
    const HeadView view = headView(g, qkv, n, h);
    const float* k = view.k + j * view.stride;
    const float* v = view.v + j * view.stride;
    const Index d = g.width();
    float* dk = dqkv + (n * g.seq + j) * view.stride + d + h * g.headDim;
    float* dv = dk + d;
    for (Index c = 0; c < g.headDim; ++c) dk[c] = dv[c] = 0.0f;
    const Index rowBase = (n * g.heads + h) * g.seq;
    for (Index i = g.causal ? j : 0; i < g.seq; ++i) {
      const Index r = rowBase + i;
      const float* q = view.q + i * view.stride;
      const float* dO = dOut + r * g.headDim;
      const float P = expf(dotRows(q, k, g.headDim) * scale - lse[r]);
      const float factor = dropFactor(drop.key, drop.p, drop.scale, r, g.seq, j);
      const float dS = P * (factor * dotRows(dO, v, g.headDim) - rowDot[r]) * scale;
      for (Index c = 0; c < g.headDim; ++c) {
        dv[c] += P * factor * dO[c];
        dk[c] += dS * q[c];
      }
    }
  }
}

float softmaxScale(const AttentionShape& g) { return 1.0f / std::sqrt(static_cast<float>(g.headDim)); }

// Each launches nothing for an empty tensor and checks the launch under the public launcher's kernel
// name (`launchName`: "launch of <kernel>", float32 and bfloat16 apart).
template <typename T>
Status launchRowsToHeads(cudaStream_t stream, const AttentionShape& g, const T* rows, Index rowStride, Index column0,
                         T* heads, const char* launchName) {
  const Index count = g.tokens() * g.width();
  if (count == 0) return Status::ok();
  rowsToHeadsKernel<T><<<blocksFor(count), kThreads, 0, stream>>>(g, rows, rowStride, column0, heads);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

template <typename T>
Status launchHeadsToRows(cudaStream_t stream, const AttentionShape& g, const T* heads, T* rows, Index rowStride,
                         Index column0, const char* launchName) {
  const Index count = g.tokens() * g.width();
  if (count == 0) return Status::ok();
  headsToRowsKernel<T><<<blocksFor(count), kThreads, 0, stream>>>(g, heads, rows, rowStride, column0);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

}  // namespace

Status rowsToHeads(cudaStream_t stream, const AttentionShape& g, const float* rows, Index rowStride, Index column0,
                   float* heads) {
  return launchRowsToHeads(stream, g, rows, rowStride, column0, heads, "launch of rowsToHeadsKernel");
}

Status headsToRows(cudaStream_t stream, const AttentionShape& g, const float* heads, float* rows, Index rowStride,
                   Index column0) {
  return launchHeadsToRows(stream, g, heads, rows, rowStride, column0, "launch of headsToRowsKernel");
}

Status rowsToHeadsHalf(cudaStream_t stream, const AttentionShape& g, const Bf16* rows, Index rowStride, Index column0,
                       Bf16* heads) {
  return launchRowsToHeads(stream, g, rows, rowStride, column0, heads, "launch of rowsToHeadsHalfKernel");
}

Status headsToRowsHalf(cudaStream_t stream, const AttentionShape& g, const Bf16* heads, Bf16* rows, Index rowStride,
                       Index column0) {
  return launchHeadsToRows(stream, g, heads, rows, rowStride, column0, "launch of headsToRowsHalfKernel");
}

Status geluForward(cudaStream_t stream, Index count, bool tanhForm, const float* x, float* y) {
  if (count == 0) return Status::ok();
  geluForwardKernel<float><<<blocksFor(count), kThreads, 0, stream>>>(count, tanhForm, x, y);
  REMAT_CUDA_CHECK_LAUNCH("geluForwardKernel");
  return Status::ok();
}

Status geluBackward(cudaStream_t stream, Index count, bool tanhForm, const float* x, const float* dy, float* dx) {
  if (count == 0) return Status::ok();
  geluBackwardKernel<float><<<blocksFor(count), kThreads, 0, stream>>>(count, tanhForm, x, dy, dx);
  REMAT_CUDA_CHECK_LAUNCH("geluBackwardKernel");
  return Status::ok();
}

Status attentionSoftmax(cudaStream_t stream, const AttentionShape& g, float scale, float* scores,
                        const ScoreBias& bias) {
  if (g.rows() == 0) return Status::ok();
  softmaxKernel<float><<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, scale, scores, bias, nullptr);
  REMAT_CUDA_CHECK_LAUNCH("softmaxKernel");
  return Status::ok();
}

Status attentionSoftmaxBackward(cudaStream_t stream, const AttentionShape& g, const float* probs, float* dProbs) {
  if (g.rows() == 0) return Status::ok();
  softmaxBackwardKernel<float><<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, probs, dProbs, nullptr);
  REMAT_CUDA_CHECK_LAUNCH("softmaxBackwardKernel");
  return Status::ok();
}

Status flashAttentionForward(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop, const float* qkv,
                             float* out, float* lse) {
  if (g.rows() == 0) return Status::ok();
  flashForwardKernel<<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, dropConstants(drop), softmaxScale(g), qkv, out,
                                                                   lse);
  REMAT_CUDA_CHECK_LAUNCH("flashForwardKernel");
  return Status::ok();
}

Status flashAttentionBackward(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop, const float* qkv,
                              const float* out, const float* lse, const float* dOut, float* dqkv, float* rowDot) {
  if (g.rows() == 0) return Status::ok();
  const DropConstants constants = dropConstants(drop);
  flashBackwardQueryKernel<<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, constants, softmaxScale(g), qkv, out, lse,
                                                                         dOut, dqkv, rowDot);
  REMAT_CUDA_CHECK_LAUNCH("flashBackwardQueryKernel");
  flashBackwardKeyKernel<<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, constants, softmaxScale(g), qkv, lse, dOut,
                                                                       rowDot, dqkv);
  REMAT_CUDA_CHECK_LAUNCH("flashBackwardKeyKernel");
  return Status::ok();
}

// bf16-mixed's instantiations for Swin (kernels_window_half.hpp).
Status geluForwardHalf(cudaStream_t stream, Index count, bool tanhForm, const Bf16* x, Bf16* y) {
  if (count == 0) return Status::ok();
  geluForwardKernel<Bf16><<<blocksFor(count), kThreads, 0, stream>>>(count, tanhForm, x, y);
  return cudaStatus(cudaGetLastError(), "launch of geluForwardHalfKernel", __FILE__, __LINE__);
}

Status geluBackwardHalf(cudaStream_t stream, Index count, bool tanhForm, const Bf16* x, const Bf16* dy, Bf16* dx) {
  if (count == 0) return Status::ok();
  geluBackwardKernel<Bf16><<<blocksFor(count), kThreads, 0, stream>>>(count, tanhForm, x, dy, dx);
  return cudaStatus(cudaGetLastError(), "launch of geluBackwardHalfKernel", __FILE__, __LINE__);
}

Status swinSoftmaxHalf(cudaStream_t stream, const AttentionShape& g, const ScoreBias& bias, Bf16* scores,
                       float* probs32) {
  if (g.rows() == 0) return Status::ok();
  // q was scaled (and rounded) before q k^T: the scale here is 1, and x * 1 is exact.
  softmaxKernel<Bf16><<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, 1.0f, scores, bias, probs32);
  return cudaStatus(cudaGetLastError(), "launch of softmaxHalfKernel", __FILE__, __LINE__);
}

Status swinSoftmaxBackwardHalf(cudaStream_t stream, const AttentionShape& g, const float* probs32, Bf16* dProbs,
                               float* dScores32) {
  if (g.rows() == 0) return Status::ok();
  softmaxBackwardKernel<Bf16><<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, probs32, dProbs, dScores32);
  return cudaStatus(cudaGetLastError(), "launch of softmaxBackwardHalfKernel", __FILE__, __LINE__);
}

}  // namespace remat::gpu::kernels
