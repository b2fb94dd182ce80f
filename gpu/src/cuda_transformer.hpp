#pragma once
// transformer_block on the GPU (cuda_transformer.cpp): the CPU backend's runner
// (core/src/cpu/run_transformer.cpp) with cuBLAS for the linears and the attention matmuls and
// kernels_attention.cu / kernels_layernorm.cu for the rest. Internal to gpu/.
#include <memory>

#include "cuda_device_impl.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {

struct TransformerState;

// Checks the chain's numbers against E's layout (docs/memory-model.md 12.1) and sets the layer's
// workspaces; errors name the layer.
Status prepareTransformerBlock(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                               LayerState& state);
Status forwardTransformerBlock(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                               const LayerContext& c, const ForwardBuffers& b);
Status backwardTransformerBlock(const LayerState& state, std::size_t l, std::uint64_t seed, const LayerContext& c,
                                const BackwardBuffers& b);

// Row-major C = op(A) op(B) (+ beta C), `batch` matrices `stride*` floats apart, through
// cublasGemmStridedBatchedEx in float32 (no TF32): column-major cuBLAS computes C^T = op(B)^T op(A)^T.
struct RowMajorGemm {
  bool transA = false, transB = false;
  Index m = 0, n = 0, k = 0;  // C is m x n, the inner extent k
  Index lda = 0, ldb = 0, ldc = 0;
  Index strideA = 0, strideB = 0, strideC = 0, batch = 1;
  float alpha = 1.0f, beta = 0.0f;
};
Status gemm(const LayerContext& c, const RowMajorGemm& g, const float* a, const float* b, float* out, const char* what);

// A linear over token rows, y = x W^T + b (PyTorch's [out, in] weight), its name for messages.
struct Linear {
  Index rows = 0, in = 0, out = 0;
  const char* name = "";
};
Status linearForward(const LayerContext& c, const Linear& op, const float* x, const float* w, const float* bias,
                     float* y);
// dx = dy W (written, when dx is not null); dW += dy^T x; db += the column sums of dy.
Status linearBackward(const LayerContext& c, const Linear& op, const float* x, const float* dy, const float* w,
                      float* dx, float* dw, float* db);

}  // namespace remat::gpu
