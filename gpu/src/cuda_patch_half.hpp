#pragma once
// patch_embedding under bf16-mixed on the GPU (cuda_patch_half.cpp): the CPU's run_patch_half.cpp.
// conv_proj in bfloat16 from the image's bfloat16 cast and the kernel's bfloat16 copy (both saved
// in E, cuda_transformer_half_layout.hpp's HalfPatchLayout), as a GEMM over the non-overlapping
// patches (kernels_patch_half.cu; float32 accumulation, the float32 bias added and rounded); its
// bfloat16 patch rows promoted to float32 by the concatenation with the class token, the position
// table added and dropout on x(l) as in float32 (the mask in E after the copies). The backward sums
// d(x) into the position table and the class token as in float32, casts d(patches) to bfloat16 and
// runs the GEMM's backward from the saved copies (the kernel's and bias's bfloat16 gradients into
// the float32 masters; d(image) folded back when there is one). Internal to gpu/.
#include "cuda_device_impl.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {

struct HalfPatchState;

Status prepareHalfPatchEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                                 LayerState& state);
Status forwardHalfPatchEmbedding(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                                 const LayerContext& c, const ForwardBuffers& b);
Status backwardHalfPatchEmbedding(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

}  // namespace remat::gpu
