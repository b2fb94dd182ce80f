// Math attention on the GPU (cuda_attention.hpp): the CPU's mathAttentionForward / Backward
// (core/src/cpu/kernels_attention.cpp) with cuBLAS batched GEMMs.
#include "cuda_attention.hpp"

#include <cmath>

namespace remat::gpu {
namespace {

// Row-major matmuls batched over the N*h heads of [m][k] x [k][n] matrices.
RowMajorGemm headGemm(const kernels::AttentionShape& g, bool transA, bool transB, Index m, Index n, Index k) {
  RowMajorGemm r;
  r.transA = transA, r.transB = transB, r.m = m, r.n = n, r.k = k;
  r.lda = transA ? m : k, r.ldb = transB ? k : n, r.ldc = n;
  r.strideA = m * k, r.strideB = k * n, r.strideC = m * n, r.batch = g.batch * g.heads;
  return r;
}

float scaleOf(const kernels::AttentionShape& g) { return 1.0f / std::sqrt(static_cast<float>(g.headDim)); }

}  // namespace

Status mathAttentionForward(const LayerContext& c, const kernels::AttentionShape& g, const MathAttention& m,
                            const kernels::ScoreBias& bias, float* out) {
  const Index S = g.seq, dh = g.headDim;
  REMAT_RETURN_IF_ERROR(gemm(c, headGemm(g, false, true, S, S, dh), m.q, m.k, m.probs, "q k^T"));
  REMAT_RETURN_IF_ERROR(kernels::attentionSoftmax(c.stream, g, scaleOf(g), m.probs, bias));
  const float* weights = m.probs;
  if (m.drop.p > 0.0) {
    REMAT_RETURN_IF_ERROR(
        kernels::dropoutForward(c.stream, g.rows() * S, m.drop.p, m.drop.key, m.probs, m.drop.dropped, m.drop.mask));
    weights = m.drop.dropped;
  }
  return gemm(c, headGemm(g, false, false, S, dh, S), weights, m.v, out, "P v");
}

Status mathAttentionBackward(const LayerContext& c, const kernels::AttentionShape& g, const MathAttention& m,
                             const float* dOut, float* square, float* grads, float* dqkv) {
  const Index S = g.seq, dh = g.headDim, d = g.width(), Td = g.tokens() * g.width();
  REMAT_RETURN_IF_ERROR(gemm(c, headGemm(g, false, true, S, S, dh), dOut, m.v, square, "dOut v^T"));
  const float* weights = m.probs;
  if (m.drop.p > 0.0) {  // d(probs) through the mask; dv from the dropped probabilities
    REMAT_RETURN_IF_ERROR(kernels::dropoutBackward(c.stream, g.rows() * S, m.drop.p, m.drop.mask, square, square));
    weights = m.drop.dropped;
  }
  REMAT_RETURN_IF_ERROR(gemm(c, headGemm(g, true, false, S, dh, S), weights, dOut, grads + 2 * Td, "P^T dOut"));
  REMAT_RETURN_IF_ERROR(kernels::attentionSoftmaxBackward(c.stream, g, m.probs, square));
  RowMajorGemm dq = headGemm(g, false, false, S, dh, S), dk = headGemm(g, true, false, S, dh, S);
  dq.alpha = dk.alpha = scaleOf(g);
  REMAT_RETURN_IF_ERROR(gemm(c, dq, square, m.k, grads, "dS k"));
  REMAT_RETURN_IF_ERROR(gemm(c, dk, square, m.q, grads + Td, "dS^T q"));
  for (Index j = 0; j < 3; ++j)
    REMAT_RETURN_IF_ERROR(kernels::headsToRows(c.stream, g, grads + j * Td, dqkv, 3 * d, j * d));
  return Status::ok();
}

}  // namespace remat::gpu
