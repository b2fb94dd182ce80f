#pragma once
// The bfloat16 products of bf16-mixed's transformer kinds on the GPU (cuda_linear_half.cpp): a
// row-major strided-batched GEMM on bfloat16 data with float32 accumulation
// (cublasGemmStridedBatchedEx, CUDA_R_16BF in and out, CUBLAS_COMPUTE_32F, no workspace), for the
// attention's q k^T, P v and their gradients over the N*h heads; and a linear over token rows as
// autocast runs it (the CPU's HalfLinearOp): y = bfloat16(x W^T) from the bfloat16 input and the
// weights' bfloat16 copy, the float32 bias added and rounded (kernels_half.cu's addRowBiasHalf, as
// the linear layer's bfloat16 path), dx = dy W in bfloat16, the bfloat16 weight gradient dy^T x in
// a scratch then added into the float32 master, the bias gradient rounded to bfloat16 first. Not
// yet called by a layer (docs/gpu.md). Internal to gpu/.
#include "cuda_transformer.hpp"
#include "kernels_half.hpp"

namespace remat::gpu {

// Row-major C = op(A) op(B) in bfloat16 (g.alpha, g.beta as float32 scalars), `what` naming the
// product in an error.
Status gemmHalfBatched(const LayerContext& c, const RowMajorGemm& g, const kernels::Bf16* a, const kernels::Bf16* b,
                       kernels::Bf16* out, const char* what);

// y = x W^T (+ b) over the token rows; x [rows][in], w [out][in] (the bfloat16 copy), y [rows][out].
Status halfLinearForward(const LayerContext& c, const Linear& op, const kernels::Bf16* x, const kernels::Bf16* w,
                         const float* bias, kernels::Bf16* y);
// dx = dy W (written, when dx is not null); dwHalf (scratch, out*in) = dy^T x, added into the
// float32 dw; db (when not null) += the rounded column sums of dy.
Status halfLinearBackward(const LayerContext& c, const Linear& op, const kernels::Bf16* x, const kernels::Bf16* dy,
                          const kernels::Bf16* w, kernels::Bf16* dx, kernels::Bf16* dwHalf, float* dw, float* db);

}  // namespace remat::gpu
