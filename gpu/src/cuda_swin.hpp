#pragma once
// Swin on the GPU (cuda_swin.cpp, cuda_swin_ends.cpp): swin_block, and the ends swin_embedding,
// patch_merging and swin_head, the CPU backend's runners (core/src/cpu/run_swin.cpp,
// run_swin_ends.cpp) with the same E. Internal to gpu/.
#include "cuda_device_impl.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {

struct SwinState;

// swin_block's parameter offsets (floats), PyTorch's order: norm1, the table [(2M-1)^2, h], qkv,
// proj, norm2, fc1, fc2 (float32's and bf16-mixed's master weights alike).
struct SwinParams {
  Index ln1P = 0, table = 0, qkvW = 0, qkvB = 0, projW = 0, projB = 0, ln2P = 0, fc1W = 0, fc1B = 0, fc2W = 0, fc2B = 0;
  Index count = 0;  // all of them
};
SwinParams swinParams(Index channels, Index hidden, Index side, Index heads);

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
