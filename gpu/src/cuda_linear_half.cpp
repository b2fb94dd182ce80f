// bf16-mixed's bfloat16 products for the transformer kinds (cuda_linear_half.hpp), through the
// row-major trick of the float32 gemm (cuda_transformer.cpp): column-major cuBLAS computes
// C^T = op(B)^T op(A)^T.
#include "cuda_linear_half.hpp"

#include <string>

#include "half_type.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {

Status gemmHalfBatched(const LayerContext& c, const RowMajorGemm& g, const kernels::Bf16* a, const kernels::Bf16* b,
                       kernels::Bf16* out, const char* what) {
  for (Index extent : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch})
    if (extent > 0x7fffffff) return Status::invalid(std::string("gpu: ") + what + ": a dimension exceeds cuBLAS's int");
  const auto i = [](Index v) { return static_cast<int>(v); };
  const cublasStatus_t status = cublasGemmStridedBatchedEx(
      c.cublas, g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, i(g.n), i(g.m), i(g.k),
      &g.alpha, b, cublasHalfType(), i(g.ldb), g.strideB, a, cublasHalfType(), i(g.lda), g.strideA, &g.beta, out,
      cublasHalfType(), i(g.ldc), g.strideC, i(g.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  const Status checked = cublasStatus(status, "cublasGemmStridedBatchedEx (bf16)", __FILE__, __LINE__);
  return checked.isOk() ? checked : checked.withContext(std::string("gpu: ") + what);
}

Status halfLinearForward(const LayerContext& c, const Linear& op, const kernels::Bf16* x, const kernels::Bf16* w,
                         const float* bias, kernels::Bf16* y) {
  RowMajorGemm g;
  g.transB = true;
  g.m = op.rows, g.n = op.out, g.k = op.in, g.lda = op.in, g.ldb = op.in, g.ldc = op.out;
  REMAT_RETURN_IF_ERROR(gemmHalfBatched(c, g, x, w, y, op.name));
  return bias == nullptr ? Status::ok() : kernels::addRowBiasHalf(c.stream, op.rows, op.out, bias, y);
}

Status halfLinearBackward(const LayerContext& c, const Linear& op, const kernels::Bf16* x, const kernels::Bf16* dy,
                          const kernels::Bf16* w, kernels::Bf16* dx, kernels::Bf16* dwHalf, float* dw, float* db) {
  if (dx != nullptr) {
    RowMajorGemm g;
    g.m = op.rows, g.n = op.in, g.k = op.out, g.lda = op.out, g.ldb = op.in, g.ldc = op.in;
    REMAT_RETURN_IF_ERROR(gemmHalfBatched(c, g, dy, w, dx, op.name));
  }
  RowMajorGemm g;
  g.transA = true;
  g.m = op.out, g.n = op.in, g.k = op.rows, g.lda = op.out, g.ldb = op.in, g.ldc = op.in;
  REMAT_RETURN_IF_ERROR(gemmHalfBatched(c, g, dy, x, dwHalf, op.name));
  REMAT_RETURN_IF_ERROR(kernels::addHalfInto(c.stream, op.out * op.in, dwHalf, dw));
  return db == nullptr ? Status::ok() : kernels::addHalfBiasGradient(c.stream, op.rows, op.out, dy, db);
}

}  // namespace remat::gpu
