#pragma once
// ViT's ends on the GPU (cuda_vit.cpp): patch_embedding (conv_proj on cuDNN, the class token and the
// position table) and cls_head (ViT's LayerNorm + linear on token 0, BERT's pooler with tanh), the
// CPU backend's runners (core/src/cpu/run_vit.cpp) with the same E. Internal to gpu/.
#include "cuda_device_impl.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {

struct VitState;

Status preparePatchEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                             const LayerContext& context, const CudaDeviceOptions& options, LayerState& state);
Status forwardPatchEmbedding(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                             const LayerContext& c, const ForwardBuffers& b);
Status backwardPatchEmbedding(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

Status prepareClsHead(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state);
Status forwardClsHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b);
Status backwardClsHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b);

}  // namespace remat::gpu
