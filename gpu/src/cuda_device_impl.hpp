#pragma once
// CudaDevice's state: the CUDA objects, the prepared chain and one LayerState per layer (the cuDNN
// ops with their chosen algorithms, kernel geometry, parameter offsets, workspace needs). Internal
// to gpu/.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "remat/exec/device_calls.hpp"
#include "remat/gpu/cuda_device.hpp"
#include "remat/gpu/cudnn_ops.hpp"
#include "remat/model/block.hpp"

namespace remat::gpu {

using kernels::Index;

struct TransformerState;  // cuda_transformer.cpp
struct HalfBlockState;    // cuda_transformer_half.hpp
struct HalfLmHeadState;   // cuda_heads_half.cpp
struct HalfClsHeadState;  // cuda_heads_half.cpp
struct HalfPatchState;    // cuda_patch_half.cpp
struct EndsState;         // cuda_transformer_ends.cpp
struct VitState;          // cuda_vit.cpp
struct SwinState;         // cuda_swin.cpp
struct SwinEndsState;     // cuda_swin_ends.cpp

struct LayerContext {
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
};

struct BlockOpState {
  std::optional<ConvOp> conv;
  std::optional<BatchNormOp> bn;
  Index count = 0;         // elements of the output (Relu, Relu6, Add)
  Index weightOffset = 0;  // in floats inside the block's parameters (conv weight, bn gamma)
  Index biasOffset = 0;    // Conv2d with a bias: after its weights
  Index batch = 0;         // Concat: N, and C * H * W of the output
  Index outPerSample = 0;
  kernels::PoolWindowGeometry pool;  // MaxPool, AvgPool
};

struct BlockState {
  BlockGraph graph;
  std::vector<BlockOpState> ops;
  // cuDNN's scratch for the inner convolutions sits after the arenas, at an aligned offset.
  std::uint64_t fwdScratchOffset = 0, fwdScratchBytes = 0;
  std::uint64_t bwdScratchOffset = 0, bwdScratchBytes = 0;
};

struct LayerState {
  LayerKind kind = LayerKind::Abstract;
  std::string label;  // "layer 3 ('conv1', conv2d)"
  bool real = false;  // x(l) holds NCHW activations (float32; bfloat16 where `half`)
  Index inCount = 0, outCount = 0;
  Shape inShape, outShape;
  std::optional<ConvOp> conv;
  bool bias = false;  // conv2d, linear
  Index biasOffset = 0;
  std::optional<PoolOp> pool;
  kernels::AdaptivePoolGeometry adaptive;
  std::optional<BatchNormOp> bn;
  Index rows = 0, inFeatures = 0, outFeatures = 0;  // linear
  double dropoutP = 0.0;
  float epsilon = 0.0f;      // layernorm (rows and inFeatures: its [N, F], or N*H*W and C over NCHW's channels)
  Index layerNormInner = 1;  // layernorm over NCHW's channels: H*W, the stride of a row's features
  std::optional<BlockState> block;
  std::shared_ptr<const TransformerState> transformer;  // transformer_block
  std::shared_ptr<const HalfBlockState> halfBlock;      // transformer_block under bf16-mixed
  std::shared_ptr<const HalfLmHeadState> halfLmHead;    // lm_head under bf16-mixed
  std::shared_ptr<const HalfClsHeadState> halfClsHead;  // cls_head under bf16-mixed (x(l) bfloat16)
  std::shared_ptr<const HalfPatchState> halfPatch;      // patch_embedding under bf16-mixed
  std::shared_ptr<const EndsState> ends;                // token_embedding, lm_head
  std::shared_ptr<const VitState> vit;                  // patch_embedding, cls_head
  std::shared_ptr<const SwinState> swin;                // swin_block
  std::shared_ptr<const SwinEndsState> swinEnds;        // swin_embedding, patch_merging, swin_head
  // bf16-mixed (cuda_half.hpp): x(l) is bfloat16; a bfloat16 layer reading a float32 input casts it.
  bool half = false;
  bool castsInput = false;
  // Layer 1 batch norm: cuDNN always writes dx, so its backward puts it in the workspace.
  bool dxInWorkspace = false;
  std::uint64_t requiredFwdWorkspace = 0;
  std::uint64_t requiredBwdWorkspace = 0;
  std::string algorithms;  // describe() of the cuDNN choices, for reports
};

// Builds the state of layer l (layers[0] is the input x0) and appends it. Errors name the layer.
Status prepareLayer(const Chain& chain, std::size_t l, const LayerContext& context, const CudaDeviceOptions& options,
                    std::vector<LayerState>& layers);

// The real (non-abstract) kinds; the buffers were checked by CudaDevice (device_calls.hpp).
Status forwardLayer(const LayerState& layer, std::size_t l, ForwardMode mode, std::uint64_t seed,
                    const LayerContext& context, const ForwardBuffers& p);
Status backwardLayer(const LayerState& layer, std::size_t l, std::uint64_t seed, const LayerContext& context,
                     const BackwardBuffers& p);

// bf16-mixed's layers that run on the GPU (cuda_half_run.cpp): linear, dropout and the
// activations in bfloat16; their workspaces (a linear's copies in a discard-mode forward, its
// bfloat16 weight gradient and a cast input's bfloat16 d(input) in the backward).
bool runsHalf(LayerKind kind);
std::uint64_t halfForwardWorkspaceBytes(const LayerState& layer);
std::uint64_t halfBackwardWorkspaceBytes(const LayerState& layer, bool hasInputGradient);
Status forwardHalfLayer(const LayerState& layer, std::size_t l, ForwardMode mode, std::uint64_t seed,
                        const LayerContext& context, const ForwardBuffers& p);
Status backwardHalfLayer(const LayerState& layer, const LayerContext& context, const BackwardBuffers& p);

}  // namespace remat::gpu

namespace remat {

struct gpu::CudaDevice::Impl {
  CudaDeviceOptions options;
  CudaDeviceInfo info;
  // Declaration order is destruction order reversed: the allocator and the handles go before the
  // stream they use.
  Stream stream;
  CudnnHandle cudnn;
  CublasHandle cublas;
  std::unique_ptr<CudaAllocator> allocator;
  std::optional<Chain> chain;
  std::vector<LayerState> layers;  // [0] = the input x0

  LayerContext context() const { return {stream.get(), cudnn.get(), cublas.get()}; }
  // The whole of a buffer that upload, download or fill (`what`) is given.
  Result<std::byte*> memory(DeviceBuffer buffer, const char* what) const;
  Status requirePrepared(std::size_t layer) const;
};

}  // namespace remat
