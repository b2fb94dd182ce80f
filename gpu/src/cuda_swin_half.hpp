#pragma once
// Swin's kinds under bf16-mixed on the GPU (docs/gpu.md; docs/memory-model.md 12.10, "Swin under
// autocast"): the CPU's run_swin_half.cpp and run_swin_ends_half.cpp op for op on the bfloat16
// stream, E as cuda_swin_half_layout.hpp lays it out (a discard-mode forward puts it at the start
// of its workspace). swin_block (cuda_swin_half.cpp): the norms on bfloat16 data with float32
// weights and statistics (kernels_layernorm.cu's bfloat16 instantiation), the four linears on
// bfloat16 inputs from the weights' bfloat16 copies made each forward (cuda_linear_half.cpp, cuBLAS
// GemmEx with float32 compute), q * scale rounded, q k^T in bfloat16, the float32 relative position
// bias (and shift mask) promoting the scores to float32, softmax in float32 (its result saved) and
// its bfloat16 cast times v; GELU, the residual adds and stochastic depth in bfloat16.
// swin_embedding, patch_merging, swin_head (cuda_swin_ends_half.cpp): the patch conv as ViT's
// bfloat16 GEMM over the patches from the image's cast, the 2x2 gather, the average pool, their
// norms and linears in bfloat16. Internal to gpu/.
#include "cuda_device_impl.hpp"
#include "cuda_transformer.hpp"
#include "kernels_half.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {

struct HalfSwinBlockState;
struct HalfSwinEndState;

// Check the chain's numbers against the layout (cuda_half.cpp did so for the whole chain) and set
// the layer's workspaces.
Status prepareHalfSwinBlock(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                            LayerState& state);
Status forwardHalfSwinBlock(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                            const LayerContext& c, const ForwardBuffers& b);
Status backwardHalfSwinBlock(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

// swin_embedding, patch_merging and swin_head.
Status prepareHalfSwinEnd(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state);
Status forwardHalfSwinEnd(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b);
Status backwardHalfSwinEnd(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

// y = x W^T + b on a bfloat16 input, from the weights' bfloat16 copy made into `copy` first (saved
// in E: autocast's copy of each linear's weight).
Status copyingHalfLinear(const LayerContext& c, const Linear& op, const kernels::Bf16* x, const float* w,
                         kernels::Bf16* copy, const float* bias, kernels::Bf16* y);

}  // namespace remat::gpu
