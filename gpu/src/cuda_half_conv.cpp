// bf16-mixed's CNN layers on the GPU (cuda_device_impl.hpp, docs/gpu.md): conv2d on cuDNN with
// bfloat16 tensors and float32 accumulation, batch norm on bfloat16 data with float32 parameters
// and statistics (an own kernel, kernels_half_norm.cu), max and average pooling on cuDNN and the adaptive average
// pool's own kernel, all on bfloat16 tensors, as torch.autocast runs them on CUDA (the CPU's run_half.cpp alike).
//
// A conv2d's E, keep mode: [the input's bfloat16 cast, when it reads a float32 input][the weight's
// bfloat16 copy] (autocastCastsOf); a discard-mode forward makes both at the start of its
// workspace. The backward's workspace: [the bfloat16 weight gradient, then added into the float32
// master][d(input) in bfloat16 before its float32 cast, when it casts]. cuDNN's scratch follows
// each at a 256-byte boundary, and its algorithms are chosen to fit what the chain's wf / wb leave
// after them, as the float32 path and the blocks' inner convolutions do. The bias is float32: added
// onto the bfloat16 output, its gradient summed from bfloat16 dy and rounded before its float32 add.
#include "cuda_device_impl.hpp"
#include "kernels_half_conv.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {
namespace {

using kernels::Bf16;

constexpr std::uint64_t kHalfBytes = 2;
constexpr std::uint64_t kScratchAlignBytes = 256;                      // cuDNN's workspaces, as the blocks' scratch
constexpr float kEpsilon = static_cast<float>(BatchNormOp::kEpsilon);  // the float32 path's

const Bf16* halves(const void* data) { return static_cast<const Bf16*>(data); }
Bf16* halves(void* data) { return static_cast<Bf16*>(data); }

std::uint64_t inputCastBytes(const LayerState& s) {
  return s.castsInput ? static_cast<std::uint64_t>(s.inCount) * kHalfBytes : 0;
}
// A conv2d's weights (its parameters before the bias), in elements.
Index convWeights(const LayerState& s) { return s.biasOffset; }
Index outPlane(const LayerState& s) { return s.outShape[2] * s.outShape[3]; }

Status prepareHalfConv(const Chain& chain, std::size_t l, const LayerSpec& spec, const LayerContext& context,
                       const CudaDeviceOptions& options, const LayerChecks& check, const PrimitiveParameters& params,
                       LayerState& state) {
  const ChainLayer& layer = chain.layers[l - 1];
  auto g = convGeometry(spec, layer.inputShape);
  if (!g) return check.fail(g.status().message());
  g->bfloat16 = true;
  state.bias = params.biases > 0;
  state.biasOffset = static_cast<Index>(params.weights);
  setHalfConvOffsets(state, params.weights, l > 1);
  const LayerNumbers& m = layer.numbers;
  AlgorithmPolicy policy = convPolicy(options, m.fwdWorkspaceBytes, state.halfFwdScratchOffset, m.bwdWorkspaceBytes,
                                      state.halfBwdScratchOffset);
  // bfloat16 tensor-core math multiplies bfloat16 exactly and sums in float32: nothing is rounded
  // that autocast did not round already (TF32 rounds float32 inputs, hence its switch).
  policy.allowTf32 = true;
  auto conv = ConvOp::create(context.cudnn, *g, false, policy, layer.name);
  if (!conv) return conv.status().withContext("gpu: " + state.label + " (bfloat16)");
  state.requiredFwdWorkspace = state.halfFwdScratchOffset + conv->forwardWorkspaceBytes();
  state.requiredBwdWorkspace = state.halfBwdScratchOffset + conv->backwardWorkspaceBytes();
  state.algorithms = "bf16 " + conv->describe();
  state.conv = std::move(*conv);
  return Status::ok();
}

Status convForwardHalf(const LayerState& s, ForwardMode mode, const LayerContext& c, const ForwardBuffers& p) {
  std::byte* copies = mode == ForwardMode::Keep ? p.extra : p.workspace;
  const void* x = p.x;
  if (s.castsInput) {
    REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, s.inCount, p.x, halves(copies)));
    x = copies;
  }
  Bf16* w = halves(copies + inputCastBytes(s));
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, convWeights(s), p.params, w));
  REMAT_RETURN_IF_ERROR(s.conv->forwardHalf(c.cudnn, x, w, p.y, p.workspace + s.halfFwdScratchOffset));
  if (!s.bias) return Status::ok();
  return kernels::addChannelBiasHalf(c.stream, s.outShape[0], s.outShape[1], outPlane(s), p.params + s.biasOffset,
                                     halves(p.y));
}

Status convBackwardHalf(const LayerState& s, const LayerContext& c, const BackwardBuffers& p) {
  const void* x = s.castsInput ? static_cast<const void*>(p.extra) : p.x;
  const Bf16* w = halves(p.extra + inputCastBytes(s));
  std::byte* scratch = p.workspace + s.halfBwdScratchOffset;
  if (p.dx != nullptr) {
    void* dx = s.castsInput ? static_cast<void*>(p.workspace + s.halfBwdInputGradOffset) : p.dx;
    REMAT_RETURN_IF_ERROR(s.conv->backwardDataHalf(c.cudnn, p.dy, w, dx, scratch));
    if (s.castsInput) REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, s.inCount, halves(dx), p.dx));
  }
  Bf16* dw = halves(p.workspace);
  REMAT_RETURN_IF_ERROR(s.conv->backwardFilterHalf(c.cudnn, x, p.dy, dw, scratch));
  REMAT_RETURN_IF_ERROR(kernels::addHalfInto(c.stream, convWeights(s), dw, p.paramGrads));
  if (!s.bias) return Status::ok();
  return kernels::addHalfChannelBiasGradient(c.stream, s.outShape[0], s.outShape[1], outPlane(s), halves(p.dy),
                                             p.paramGrads + s.biasOffset);
}

}  // namespace

void setHalfConvOffsets(LayerState& state, std::uint64_t weights, bool hasInputGradient) {
  const std::uint64_t weightBytes = weights * kHalfBytes;
  state.halfFwdScratchOffset = alignUp(inputCastBytes(state) + weightBytes, kScratchAlignBytes);
  state.halfBwdInputGradOffset = alignUp(weightBytes, kScratchAlignBytes);
  state.halfBwdScratchOffset = state.castsInput && hasInputGradient  // layer 1 has no d(input)
                                   ? alignUp(state.halfBwdInputGradOffset + inputCastBytes(state), kScratchAlignBytes)
                                   : state.halfBwdInputGradOffset;
}

bool runsHalfCnn(LayerKind kind) {
  switch (kind) {
    case LayerKind::Conv2d:
    case LayerKind::BatchNorm:
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool: return true;
    default: return false;
  }
}

Status prepareHalfCnnLayer(const Chain& chain, std::size_t l, const LayerSpec& spec, const LayerContext& context,
                           const CudaDeviceOptions& options, const LayerChecks& check,
                           const PrimitiveParameters& params, LayerState& state) {
  const ChainLayer& layer = chain.layers[l - 1];
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  switch (layer.kind) {
    case LayerKind::Conv2d: return prepareHalfConv(chain, l, spec, context, options, check, params, state);
    case LayerKind::BatchNorm: {
      auto dims = toDims4(in);
      if (!dims) return check.fail(dims.status().message());
      state.halfNorm = kernels::Dims4{dims->n, dims->c, dims->h, dims->w};
      return Status::ok();
    }
    case LayerKind::MaxPool:
    case LayerKind::AvgPool: return preparePool(layer, spec, check, state);
    case LayerKind::AdaptiveAvgPool:
      if (in.size() != 4 || out.size() != 4) return check.fail("the adaptive average pool needs NCHW tensors");
      state.adaptive = {in[0], in[1], in[2], in[3], out[2], out[3]};
      return Status::ok();
    default: return check.noKernel();
  }
}

Status forwardHalfCnnLayer(const LayerState& s, ForwardMode mode, const LayerContext& c, const ForwardBuffers& p) {
  const bool keep = mode == ForwardMode::Keep;
  switch (s.kind) {
    case LayerKind::Conv2d: return convForwardHalf(s, mode, c, p);
    case LayerKind::BatchNorm:
      return kernels::batchNormForwardHalf(c.stream, s.halfNorm, kEpsilon, halves(p.x), p.params,
                                           p.params + s.halfNorm.c, halves(p.y),
                                           keep ? reinterpret_cast<float*>(p.extra) : nullptr);
    case LayerKind::MaxPool:
      // As float32's: the model keeps x and E (PyTorch's int64 indices, 8 bytes per output), not y,
      // which cuDNN's backward reads; a keep-mode forward copies the bfloat16 y into E.
      REMAT_RETURN_IF_ERROR(s.pool->forwardHalf(c.cudnn, p.x, p.y));
      if (keep)
        REMAT_CUDA_CHECK(cudaMemcpyAsync(p.extra, p.y, static_cast<std::size_t>(s.outCount) * kHalfBytes,
                                         cudaMemcpyDeviceToDevice, c.stream));
      return Status::ok();
    case LayerKind::AvgPool: return s.pool->forwardHalf(c.cudnn, p.x, p.y);
    case LayerKind::AdaptiveAvgPool:
      return kernels::adaptiveAvgPoolForwardHalf(c.stream, s.adaptive, halves(p.x), halves(p.y));
    default: return Status::internal("gpu: " + s.label + ": no bfloat16 forward kernel");
  }
}

Status backwardHalfCnnLayer(const LayerState& s, const LayerContext& c, const BackwardBuffers& p) {
  if (s.kind == LayerKind::Conv2d) return convBackwardHalf(s, c, p);
  if (s.kind == LayerKind::BatchNorm) {
    // A bfloat16 batch norm reads a bfloat16 activation, never the float32 input x0: it has a d(input).
    if (p.dx == nullptr) return Status::internal("gpu: " + s.label + ": bfloat16 batch norm backward without dx");
    return kernels::batchNormBackwardHalf(c.stream, s.halfNorm, halves(p.x), halves(p.dy), p.params,
                                          reinterpret_cast<const float*>(p.extra), halves(p.dx), p.paramGrads,
                                          p.paramGrads + s.halfNorm.c, false);
  }
  if (p.dx == nullptr) return Status::ok();
  switch (s.kind) {
    case LayerKind::MaxPool: return s.pool->backwardHalf(c.cudnn, p.x, p.extra, p.dy, p.dx);
    case LayerKind::AvgPool: return s.pool->backwardHalf(c.cudnn, p.x, p.y, p.dy, p.dx);
    case LayerKind::AdaptiveAvgPool:
      return kernels::adaptiveAvgPoolBackwardHalf(c.stream, s.adaptive, halves(p.dy), halves(p.dx));
    default: return Status::internal("gpu: " + s.label + ": no bfloat16 backward kernel");
  }
}

}  // namespace remat::gpu
