// Attention's half kernels (kernels_attention_half.hpp), the CPU's kernels_attention_half.cpp loop
// for loop: each thread reads half values as float32, accumulates in float32 in the CPU's order and
// rounds its results once (half_io.cuh's h: round to nearest even, to bfloat16 as the CPU's, or to
// float16 under fp16-mixed). The head split and merge are kernels_attention.cu's copies, templated
// on the element type.
#include <cmath>
#include <string>

#include "half_io.cuh"
#include "kernels_attention_half.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

// A thread's float32 accumulators for one row of a head live in its local memory.
constexpr Index kMaxHeadDim = 256;

__device__ __forceinline__ Index visibleKeys(const AttentionShape& g, Index i) { return g.causal ? i + 1 : g.seq; }

// Head h's q (part 0), k (1) or v (2) of token row (n, s) inside qkv [N*S][3d].
__device__ __forceinline__ const Bf16* rowOf(const AttentionShape& g, const Bf16* qkv, Index n, Index h, Index s,
                                             Index part) {
  const Index d = g.width();
  return qkv + (n * g.seq + s) * 3 * d + part * d + h * g.headDim;
}

__device__ __forceinline__ float dotHalf(const Bf16* a, const Bf16* b, Index count) {
  float sum = 0.0f;
  for (Index c = 0; c < count; ++c) sum += half_io::f(a[c]) * half_io::f(b[c]);
  return sum;
}

struct HalfDrop {
  std::uint64_t key;
  float p, scale;
};

HalfDrop halfDrop(const AttentionDrop& drop) {
  if (!drop.active()) return {0, 0.0f, 1.0f};
  return {drop.key, static_cast<float>(drop.p), drop.p < 1.0 ? static_cast<float>(1.0 / (1.0 - drop.p)) : 0.0f};
}

// Element (row r = (n*h + h)*S + i, key j) kept: the factor 1/(1-p), else 0; 1 when inactive.
__device__ __forceinline__ float keptFactor(const HalfDrop& drop, Index r, Index seq, Index j) {
  if (drop.p <= 0.0f) return 1.0f;
  const auto index = static_cast<std::uint64_t>(r * seq + j);
  return drop.p < 1.0f && rng::uniform01(rng::at(drop.key, index)) >= drop.p ? drop.scale : 0.0f;
}

__device__ __forceinline__ float roundHalf(float value) { return half_io::f(half_io::h(value)); }

// One thread per query row r: scores, probabilities and their dropout in place, as the CPU's
// softmaxRow and mathAttentionForwardHalf's dropout loop.
__global__ void softmaxHalfKernel(AttentionShape g, HalfDrop drop, float scale, Bf16* scores, std::uint8_t* mask,
                                  Bf16* dropped) {
  for (Index r = firstIndex(); r < g.rows(); r += gridStride()) {
    Bf16* row = scores + r * g.seq;
    const Index limit = visibleKeys(g, r % g.seq);
    float top = -INFINITY;
    for (Index j = 0; j < limit; ++j) top = fmaxf(top, roundHalf(half_io::f(row[j]) * scale));
    float sum = 0.0f;
    for (Index j = 0; j < limit; ++j) sum += expf(roundHalf(half_io::f(row[j]) * scale) - top);
    // Score j is read before it is overwritten, once, in this pass.
    for (Index j = 0; j < g.seq; ++j) {
      const float p = j < limit ? expf(roundHalf(half_io::f(row[j]) * scale) - top) / sum : 0.0f;
      row[j] = half_io::h(p);
      if (drop.p <= 0.0f) continue;
      const float kept = keptFactor(drop, r, g.seq, j);
      mask[r * g.seq + j] = kept != 0.0f ? 1 : 0;
      dropped[r * g.seq + j] = half_io::h(kept != 0.0f ? half_io::f(row[j]) * drop.scale : 0.0f);
    }
  }
}

__global__ void softmaxBackwardHalfKernel(AttentionShape g, HalfDrop drop, float scale, const Bf16* probs,
                                          const std::uint8_t* mask, Bf16* dProbs) {
  for (Index r = firstIndex(); r < g.rows(); r += gridStride()) {
    const Bf16* p = probs + r * g.seq;
    Bf16* ds = dProbs + r * g.seq;
    const Index limit = visibleKeys(g, r % g.seq);
    float rowDot = 0.0f;
    for (Index j = 0; j < limit; ++j) {
      float dp = half_io::f(ds[j]);
      if (drop.p > 0.0f) dp = mask[r * g.seq + j] ? roundHalf(dp * drop.scale) : 0.0f;
      ds[j] = half_io::h(dp);  // exact: dp is a half value
      rowDot += half_io::f(p[j]) * dp;
    }
    for (Index j = 0; j < g.seq; ++j)
      ds[j] = half_io::h(j < limit ? roundHalf(half_io::f(p[j]) * (half_io::f(ds[j]) - rowDot)) * scale : 0.0f);
  }
}

// Per query row (the CPU's fusedHeadForward): the row maximum, then exp(score - max) summed and
// (dropped) weighted into the float32 accumulator, out = bfloat16(acc / sum), lse = max + log(sum).
// The scores are recomputed rather than kept, so the thread holds no S-long row.
__global__ void flashForwardHalfKernel(AttentionShape g, HalfDrop drop, float scale, const Bf16* qkv, Bf16* out,
                                       float* lse) {
  for (Index r = firstIndex(); r < g.rows(); r += gridStride()) {
    const Index i = r % g.seq, h = (r / g.seq) % g.heads, n = r / (g.seq * g.heads);
    const Bf16* q = rowOf(g, qkv, n, h, i, 0);
    const Index limit = visibleKeys(g, i);
    float top = -INFINITY;
    for (Index j = 0; j < limit; ++j) top = fmaxf(top, dotHalf(q, rowOf(g, qkv, n, h, j, 1), g.headDim) * scale);
    float acc[kMaxHeadDim];
    for (Index c = 0; c < g.headDim; ++c) acc[c] = 0.0f;
    float sum = 0.0f;
    for (Index j = 0; j < limit; ++j) {
      const float p = expf(dotHalf(q, rowOf(g, qkv, n, h, j, 1), g.headDim) * scale - top);
      sum += p;  // the log-sum-exp of the probabilities before dropout
      const float w = p * keptFactor(drop, r, g.seq, j);
      const Bf16* v = rowOf(g, qkv, n, h, j, 2);
      for (Index c = 0; c < g.headDim; ++c) acc[c] += w * half_io::f(v[c]);
    }
    Bf16* o = out + r * g.headDim;
    for (Index c = 0; c < g.headDim; ++c) o[c] = half_io::h(acc[c] / sum);
    lse[r] = top + logf(sum);
  }
}

// Per query row (the CPU's dq loop): rowDot = dO . O, dS = P (kept * dO . v_j - rowDot) * scale,
// dq = bfloat16(sum_j dS k_j).
__global__ void flashBackwardQueryHalfKernel(AttentionShape g, HalfDrop drop, float scale, const Bf16* qkv,
                                             const Bf16* out, const float* lse, const Bf16* dOut, Bf16* dqkv) {
  for (Index r = firstIndex(); r < g.rows(); r += gridStride()) {
    const Index i = r % g.seq, h = (r / g.seq) % g.heads, n = r / (g.seq * g.heads);
    const Bf16* q = rowOf(g, qkv, n, h, i, 0);
    const Bf16* dO = dOut + r * g.headDim;
    const float rowDot = dotHalf(dO, out + r * g.headDim, g.headDim);
    float acc[kMaxHeadDim];
    for (Index c = 0; c < g.headDim; ++c) acc[c] = 0.0f;
    for (Index j = 0; j < visibleKeys(g, i); ++j) {
      const Bf16* k = rowOf(g, qkv, n, h, j, 1);
      const float p = expf(dotHalf(q, k, g.headDim) * scale - lse[r]);
      const float dS =
          p * (keptFactor(drop, r, g.seq, j) * dotHalf(dO, rowOf(g, qkv, n, h, j, 2), g.headDim) - rowDot) * scale;
      for (Index c = 0; c < g.headDim; ++c) acc[c] += dS * half_io::f(k[c]);
    }
    Bf16* dq = dqkv + (n * g.seq + i) * 3 * g.width() + h * g.headDim;
    for (Index c = 0; c < g.headDim; ++c) dq[c] = half_io::h(acc[c]);
  }
}

// Per key row j (the CPU's dk, dv sums over the queries i in order): dv = sum_i P kept dO_i,
// dk = sum_i dS q_i, each rounded once.
__global__ void flashBackwardKeyHalfKernel(AttentionShape g, HalfDrop drop, float scale, const Bf16* qkv,
                                           const Bf16* out, const float* lse, const Bf16* dOut, Bf16* dqkv) {
  for (Index kr = firstIndex(); kr < g.rows(); kr += gridStride()) {
    const Index j = kr % g.seq, h = (kr / g.seq) % g.heads, n = kr / (g.seq * g.heads);
    const Bf16* k = rowOf(g, qkv, n, h, j, 1);
    const Bf16* v = rowOf(g, qkv, n, h, j, 2);
    const Index d = g.width(), rowBase = (n * g.heads + h) * g.seq;
    Bf16* dk = dqkv + (n * g.seq + j) * 3 * d + d + h * g.headDim;
    Bf16* dv = dk + d;
    float dkAcc[kMaxHeadDim], dvAcc[kMaxHeadDim];
    for (Index c = 0; c < g.headDim; ++c) dkAcc[c] = dvAcc[c] = 0.0f;
    for (Index i = g.causal ? j : 0; i < g.seq; ++i) {
      const Index r = rowBase + i;
      const Bf16* q = rowOf(g, qkv, n, h, i, 0);
      const Bf16* dO = dOut + r * g.headDim;
      const float p = expf(dotHalf(q, k, g.headDim) * scale - lse[r]);
      const float kept = keptFactor(drop, r, g.seq, j);
      const float rowDot = dotHalf(dO, out + r * g.headDim, g.headDim);
      const float dS = p * (kept * dotHalf(dO, v, g.headDim) - rowDot) * scale;
      for (Index c = 0; c < g.headDim; ++c) {
        dkAcc[c] += dS * half_io::f(q[c]);
        dvAcc[c] += p * kept * half_io::f(dO[c]);
      }
    }
    for (Index c = 0; c < g.headDim; ++c) {
      dk[c] = half_io::h(dkAcc[c]);
      dv[c] = half_io::h(dvAcc[c]);
    }
  }
}

float softmaxScale(const AttentionShape& g) { return 1.0f / std::sqrt(static_cast<float>(g.headDim)); }

Status checkHeadDim(const AttentionShape& g, const char* kernel) {
  if (g.headDim <= kMaxHeadDim) return Status::ok();
  return Status::invalid(std::string(kernel) + ": head dimension " + std::to_string(g.headDim) +
                         " exceeds the bfloat16 flash kernels' " + std::to_string(kMaxHeadDim));
}

}  // namespace

Status attentionSoftmaxHalf(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop, Bf16* scores,
                            std::uint8_t* mask, Bf16* dropped) {
  if (g.rows() == 0) return Status::ok();
  if (drop.active() && (mask == nullptr || dropped == nullptr))
    return Status::internal("softmaxHalfKernel: dropout needs the mask and the dropped probabilities");
  softmaxHalfKernel<<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, halfDrop(drop), softmaxScale(g), scores, mask,
                                                                  dropped);
  REMAT_CUDA_CHECK_LAUNCH("softmaxHalfKernel");
  return Status::ok();
}

Status attentionSoftmaxBackwardHalf(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop,
                                    const Bf16* probs, const std::uint8_t* mask, Bf16* dProbs) {
  if (g.rows() == 0) return Status::ok();
  if (drop.active() && mask == nullptr) return Status::internal("softmaxBackwardHalfKernel: dropout needs the mask");
  softmaxBackwardHalfKernel<<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, halfDrop(drop), softmaxScale(g), probs,
                                                                          mask, dProbs);
  REMAT_CUDA_CHECK_LAUNCH("softmaxBackwardHalfKernel");
  return Status::ok();
}

Status flashAttentionForwardHalf(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop,
                                 const Bf16* qkv, Bf16* out, float* lse) {
  if (g.rows() == 0) return Status::ok();
  REMAT_RETURN_IF_ERROR(checkHeadDim(g, "flashForwardHalfKernel"));
  flashForwardHalfKernel<<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, halfDrop(drop), softmaxScale(g), qkv, out,
                                                                       lse);
  REMAT_CUDA_CHECK_LAUNCH("flashForwardHalfKernel");
  return Status::ok();
}

Status flashAttentionBackwardHalf(cudaStream_t stream, const AttentionShape& g, const AttentionDrop& drop,
                                  const Bf16* qkv, const Bf16* out, const float* lse, const Bf16* dOut, Bf16* dqkv) {
  if (g.rows() == 0) return Status::ok();
  REMAT_RETURN_IF_ERROR(checkHeadDim(g, "flashBackwardHalfKernel"));
  const HalfDrop constants = halfDrop(drop);
  flashBackwardQueryHalfKernel<<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, constants, softmaxScale(g), qkv, out,
                                                                             lse, dOut, dqkv);
  REMAT_CUDA_CHECK_LAUNCH("flashBackwardQueryHalfKernel");
  flashBackwardKeyHalfKernel<<<blocksFor(g.rows()), kThreads, 0, stream>>>(g, constants, softmaxScale(g), qkv, out, lse,
                                                                           dOut, dqkv);
  REMAT_CUDA_CHECK_LAUNCH("flashBackwardKeyHalfKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
