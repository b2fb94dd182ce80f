#pragma once
// CudaDevice's state: the CUDA objects, the prepared chain and one LayerState per layer (the cuDNN
// ops with their chosen algorithms, kernel geometry, parameter offsets, workspace needs). Internal
// to gpu/.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuda_half.hpp"
#include "kernels.hpp"
#include "kernels_half.hpp"
#include "remat/exec/device_calls.hpp"
#include "remat/exec/layer_checks.hpp"
#include "remat/gpu/cuda_check.hpp"
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
// Swin under bf16-mixed (cuda_swin_half.hpp)
struct HalfSwinBlockState;
struct HalfSwinEndState;

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
  // bf16-mixed (cuda_half_blocks.cpp): a convolution's weight count and its bfloat16 copy's offset
  // in E (after the graph's saved tensors); an activation's bfloat16 kernel.
  Index halfWeights = 0;
  std::uint64_t halfCopyOffset = 0;
  kernels::HalfActivationFn halfActivation;
  kernels::Dims4 halfNorm;  // a batch norm's input (kernels_half_norm.cu)
};

struct BlockState {
  BlockGraph graph;
  std::vector<BlockOpState> ops;
  // cuDNN's scratch for the inner convolutions sits after the arenas, at an aligned offset.
  std::uint64_t fwdScratchOffset = 0, fwdScratchBytes = 0;
  std::uint64_t bwdScratchOffset = 0, bwdScratchBytes = 0;
  // bf16-mixed: the scratch starts with a region for the largest inner weight copy (a discard-mode
  // forward) or bfloat16 weight gradient (the backward), cuDNN's after it.
  std::uint64_t halfRegionBytes = 0;
  // A float32 x(l-1) (ConvNeXt's): the first conv reads its bfloat16 cast, in E at inputCastOffset
  // (keep mode; after the graph's saved tensors, before the weight copies) or, discard mode, in a
  // region of castRegionBytes after halfRegionBytes, where the backward puts that conv's bfloat16
  // d(input) before it is added into the float32 d(l-1).
  bool castsInput = false;
  std::uint64_t inputCastOffset = 0, castRegionBytes = 0;
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
  std::shared_ptr<const HalfSwinBlockState> halfSwin;   // swin_block under bf16-mixed (x(l) bfloat16)
  std::shared_ptr<const HalfSwinEndState> halfSwinEnd;  // the Swin ends under bf16-mixed (x(l) bfloat16)
  // bf16-mixed (cuda_half.hpp): x(l) is bfloat16; a bfloat16 layer reading a float32 input casts it.
  bool half = false;
  bool castsInput = false;
  bool castsFromHalf = false;  // a float32 layer norm reading a bfloat16 input: from its float32 copy
  bool floatOutput = false;    // a bfloat16 block whose output is float32 (ConvNeXt's type promotion)
  bool outputHalf() const { return half && !floatOutput; }
  // A bfloat16 conv2d's workspaces (cuda_half_conv.cpp): the forward's [input cast][weight copy]
  // (discard mode), the backward's [half dW][half d(input) at bwdInputGradOffset, when it casts];
  // cuDNN's scratch after them at these 256-byte-aligned offsets.
  std::uint64_t halfFwdScratchOffset = 0, halfBwdInputGradOffset = 0, halfBwdScratchOffset = 0;
  kernels::Dims4 halfNorm;  // a bfloat16 batch norm's input (kernels_half_norm.cu)
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

// bf16-mixed's CNN kinds (cuda_half_conv.cpp): conv2d on cuDNN in bfloat16 with float32
// accumulation, batch norm on bfloat16 data with float32 parameters and statistics, max and
// average pooling on cuDNN and the adaptive average pool's own kernel, in bfloat16.
bool runsHalfCnn(LayerKind kind);
// A bfloat16 conv2d's workspace offsets (the comment at halfFwdScratchOffset) from its castsInput,
// inCount and weight count; hasInputGradient is false for layer 1.
void setHalfConvOffsets(LayerState& state, std::uint64_t weights, bool hasInputGradient);
Status prepareHalfCnnLayer(const Chain& chain, std::size_t l, const LayerSpec& spec, const LayerContext& context,
                           const CudaDeviceOptions& options, const LayerChecks& check,
                           const PrimitiveParameters& params, LayerState& state);
Status forwardHalfCnnLayer(const LayerState& layer, ForwardMode mode, const LayerContext& context,
                           const ForwardBuffers& p);
Status backwardHalfCnnLayer(const LayerState& layer, const LayerContext& context, const BackwardBuffers& p);
// bf16-mixed's layer norm after a bfloat16 layer (cuda_half_run.cpp; autocast's fp32 list): the
// float32 kernels on a float32 copy of the input, saved in E after the statistics (a discard-mode
// forward makes it at the start of its workspace), d(input) made in float32 in the backward's
// workspace and cast to bfloat16.
Status prepareLayerNormFromHalf(const Chain& chain, std::size_t l, const LayerState& prev, const HalfMode& mode,
                                const LayerChecks& check, LayerState& state);
Status forwardLayerNormFromHalf(const LayerState& layer, ForwardMode mode, const LayerContext& context,
                                const ForwardBuffers& p);
Status backwardLayerNormFromHalf(const LayerState& layer, const LayerContext& context, const BackwardBuffers& p);

// The bfloat16 kernel of an activation kind (an internal error for others).
Result<kernels::HalfActivationFn> halfActivationOf(LayerKind kind);

// bf16-mixed's residual blocks (cuda_half_blocks.cpp): the bfloat16 graph's arenas, its inner
// convolutions on cuDNN in bfloat16 from their weight copies (in E after the graph's saved
// tensors), batch norms, the residual add and the activations in bfloat16.
Status prepareHalfBlock(const Chain& chain, std::size_t l, const LayerSpec& spec, const LayerContext& context,
                        const CudaDeviceOptions& options, const LayerChecks& check, LayerState& state);
Status forwardHalfBlock(const LayerState& layer, std::size_t l, std::uint64_t seed, ForwardMode mode,
                        const LayerContext& context, const ForwardBuffers& p);
Status backwardHalfBlock(const LayerState& layer, const LayerContext& context, const BackwardBuffers& p);

// --grads static in a block (memory-model.md 11.2): an inner op's `count` parameter gradients (at
// `first` floats into the block's) made by `body` in the zeroed fresh buffer (body's buffers index
// it as the block's), then added into the block's, as PyTorch's AccumulateGrad adds each op's
// before the next op's backward runs. Without a fresh buffer or parameters, body on p itself.
template <typename Body>
Status withFreshGradient(cudaStream_t stream, const BackwardBuffers& p, Index first, Index count, Body&& body) {
  if (p.freshParamGrads == nullptr || count == 0) return body(p);
  REMAT_CUDA_CHECK(cudaMemsetAsync(p.freshParamGrads, 0, static_cast<std::size_t>(count) * sizeof(float), stream));
  BackwardBuffers fresh = p;
  fresh.paramGrads = freshGradientBase(p.freshParamGrads, static_cast<std::uint64_t>(first), sizeof(float));
  REMAT_RETURN_IF_ERROR(body(fresh));
  return kernels::accumulateFloats(stream, count, p.paramGrads + first,
                                   reinterpret_cast<const float*>(p.freshParamGrads));
}

// --grads static for a kind whose backward makes its parameter gradients node by node (a
// transformer block's norms and linears; memory-model.md 11.2), as the CPU's NodeGradients:
// at(offset) is where parameter `offset`'s gradient is added. Without a fresh buffer that is G(l)
// itself; with one, the node holding `offset` gets the buffer, zeroed, once the node before has been
// added into G(l) (AccumulateGrad, before the next node's backward); close() adds the last and
// returns the first failed launch. A node's pointers are taken right before its kernels run.
class NodeGradients {
 public:
  // nodeStarts: each node's first parameter, ascending; end: the layer's parameter count.
  NodeGradients(cudaStream_t stream, std::vector<Index> nodeStarts, Index end, float* grads, std::byte* fresh)
      : stream_(stream), starts_(std::move(nodeStarts)), end_(end), grads_(grads), fresh_(fresh) {}
  NodeGradients(const NodeGradients&) = delete;
  NodeGradients& operator=(const NodeGradients&) = delete;

  float* at(Index offset) {
    if (fresh_ == nullptr) return grads_ + offset;
    Index first = 0, next = end_;
    for (const Index start : starts_) {
      if (start <= offset) first = std::max(first, start);
      if (start > offset) next = std::min(next, start);
    }
    if (count_ == 0 || first != first_) {
      keep(close());
      first_ = first;
      count_ = next - first;
      keep(cudaMemsetAsync(fresh_, 0, static_cast<std::size_t>(count_) * sizeof(float), stream_) == cudaSuccess
               ? Status::ok()
               : Status::internal("gpu: clearing a fresh weight gradient failed"));
    }
    return reinterpret_cast<float*>(fresh_) + (offset - first_);
  }
  Status close() {
    if (fresh_ != nullptr && count_ > 0) {
      keep(kernels::accumulateFloats(stream_, count_, grads_ + first_, reinterpret_cast<const float*>(fresh_)));
      count_ = 0;
    }
    return status_;
  }

 private:
  void keep(Status status) {
    if (status_.isOk() && !status.isOk()) status_ = std::move(status);
  }
  cudaStream_t stream_;
  std::vector<Index> starts_;
  Index end_;
  float* grads_;
  std::byte* fresh_;
  Index first_ = 0, count_ = 0;
  Status status_ = Status::ok();
};

// A transformer block's nodes (ln_1, qkv, the output projection, ln_2, fc1, fc2) from its offsets.
template <typename Block>
NodeGradients transformerNodeGradients(cudaStream_t stream, const Block& t, const BackwardBuffers& b) {
  return NodeGradients(stream, {t.ln1P, t.qkvW, t.projW, t.ln2P, t.fc1W, t.fc2W}, t.fc2B + t.width, b.paramGrads,
                       b.freshParamGrads);
}

// cuda_prepare.cpp's helpers that bf16-mixed's layers share.
std::uint64_t alignUp(std::uint64_t value, std::uint64_t alignment);
Result<ConvGeometry> convGeometry(const LayerSpec& spec, const Shape& in);
// The workspace a convolution's algorithms may use: the chain's wf / wb past the offsets (policy
// Chain), or the cap (policy Profile).
AlgorithmPolicy convPolicy(const CudaDeviceOptions& options, std::uint64_t fwdBytes, std::uint64_t fwdOffset,
                           std::uint64_t bwdBytes, std::uint64_t bwdOffset);
Status preparePool(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state);

}  // namespace remat::gpu

namespace remat {

// torch.cuda.amp.GradScaler's defaults.
inline constexpr float kGradScalerInitScale = 65536.0f;  // 2**16
inline constexpr float kGradScalerGrowth = 2.0f;
inline constexpr float kGradScalerBackoff = 0.5f;
inline constexpr int kGradScalerGrowthInterval = 2000;

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
  // fp16-mixed's GradScaler (torch.cuda.amp.GradScaler's defaults): [0] the scale, [1] found_inf,
  // device float32 scalars. They sit outside the counted pool: the model leaves these 8 bytes out
  // (memory-model.md 11.7), so the measured bytes stay the model's. Null for other precisions.
  struct CudaFree {
    void operator()(float* p) const { (void)cudaFree(p); }
  };
  std::unique_ptr<float, CudaFree> scaler;
  int scalerGrowthTracker = 0;  // steps since the last inf/NaN (PyTorch's _growth_tracker)

  LayerContext context() const { return {stream.get(), cudnn.get(), cublas.get()}; }
  // The whole of a buffer that upload, download or fill (`what`) is given.
  Result<std::byte*> memory(DeviceBuffer buffer, const char* what) const;
  Status requirePrepared(std::size_t layer) const;
  // Under a mixed precision, the chain's half type for the launches that follow (half_type.hpp).
  Status useChainHalfType() const;
  // fp16-mixed: the scaler at torch.cuda.amp.GradScaler's initial state (scale 2^16).
  Status resetScaler();
  // A float32 loss seed (`bytes`) times the scale under fp16-mixed; untouched otherwise.
  Status scaleFloatSeed(std::byte* grad, std::uint64_t bytes) const;
};

}  // namespace remat
