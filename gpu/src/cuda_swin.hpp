#pragma once
// Swin on the GPU (cuda_swin.cpp, cuda_swin_ends.cpp): swin_block, and the ends swin_embedding,
// patch_merging and swin_head, the CPU backend's runners (core/src/cpu/run_swin.cpp,
// run_swin_ends.cpp) with the same E. Internal to gpu/.
#include "cuda_device_impl.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {

struct SwinState;

Status prepareSwinBlock(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state);
Status forwardSwinBlock(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                        const LayerContext& c, const ForwardBuffers& b);
Status backwardSwinBlock(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

}  // namespace remat::gpu

namespace remat::gpu {

Status prepareSwinEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                            const LayerContext& context, const CudaDeviceOptions& options, LayerState& state);
Status forwardSwinEmbedding(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b);
Status backwardSwinEmbedding(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

Status preparePatchMerging(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state);
Status forwardPatchMerging(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b);
Status backwardPatchMerging(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

Status prepareSwinHead(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state);
Status forwardSwinHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b);
Status backwardSwinHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

}  // namespace remat::gpu
