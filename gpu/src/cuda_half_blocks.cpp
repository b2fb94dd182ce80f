// bf16-mixed's residual blocks on the GPU (cuda_device_impl.hpp, docs/gpu.md): ResNet's basic
// blocks and bottlenecks, MobileNetV2's inverted residuals, EfficientNet's MBConv blocks with
// Squeeze-and-Excitation (global pool, broadcasting product), GoogLeNet's and Inception's
// branches (pools, concatenation), ShuffleNetV2's (channel slices read in place or gathered, the
// channel shuffle) and imported blocks of these ops, as
// torch.autocast runs them and the CPU's run_blocks.cpp does under bf16-mixed. The graph is laid
// out for bfloat16 (buildBlockGraph(..., BFloat16): arenas, saved tensors, float32 statistics);
// every inner convolution runs on cuDNN in bfloat16 with float32 accumulation from its weights'
// bfloat16 copy, which lies in E after the graph's saved tensors, one after the other (autocast
// saves it for the backward; memory-model.md 11.7); batch norms run on bfloat16 data with float32
// parameters and statistics; the residual add and the activations are kernels_half.cu's, the
// global pool and the product kernels_half_pool.cu's, the pool branches and the concatenation
// kernels_half_branches.cu's (a max pool's int64 argmax in E where a batch norm keeps statistics).
//
// Workspaces: the forward's arena, then at a 256-byte boundary a region for the largest inner
// weight copy (where a discard-mode forward makes each copy) and cuDNN's scratch after it; the
// backward's gradient arena, then a region for the largest bfloat16 weight gradient (then added
// into its float32 master) and cuDNN's scratch. cuDNN's algorithms are chosen to fit what the
// chain's wf / wb leave after those, as the float32 blocks do.
#include <algorithm>

#include "cuda_block_walk.hpp"
#include "cuda_device_impl.hpp"
#include "cuda_half.hpp"
#include "kernels_half_arith.hpp"
#include "kernels_half_conv.hpp"
#include "kernels_half_convnext.hpp"
#include "remat/exec/block_buffers.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"
#include "remat/model/operators.hpp"

namespace remat::gpu {
namespace {

using kernels::Bf16;

constexpr std::uint64_t kHalfBytes = 2;
constexpr float kEpsilon = static_cast<float>(BatchNormOp::kEpsilon);  // the float32 path's

const Bf16* halves(const void* data) { return static_cast<const Bf16*>(data); }
Bf16* halves(void* data) { return static_cast<Bf16*>(data); }

kernels::Dims4 dimsOf(const BlockGraph& graph, std::size_t tensor) {
  const Shape& s = graph.tensors[tensor].shape;
  return kernels::Dims4{s[0], s[1], s[2], s[3]};
}

// Input j of op as the contiguous tensor its kernel reads: a view the op cannot read in place
// (block.hpp's gather offsets, in bytes of the bfloat16 graph) is first copied, sample by sample,
// to its slot in the workspace (the float32 runner's contiguousInput).
Status contiguousInput(const BlockGraph& graph, const BlockOp& op, std::size_t j, const void* values,
                       std::uint64_t slot, std::byte* workspace, const LayerContext& c, const void*& out) {
  out = values;
  if (slot == kBlockNoOffset || values == nullptr) return Status::ok();
  Bf16* copy = halves(workspace + slot);
  const std::size_t t = op.inputs[j];
  const Index width = perSample(graph, t);
  REMAT_RETURN_IF_ERROR(kernels::copyOrAddRowsHalf(c.stream, graph.tensors[t].shape[0], width, halves(values),
                                                   sampleStride(graph, t), copy, width, false));
  out = copy;
  return Status::ok();
}

// ShuffleNetV2's channel slice (forward only when it is the block's output, else a view: nothing to
// run) and channel shuffle; backward: d(input) the gradient in the slice's channels, zero elsewhere
// (or added), and the inverse permutation.
Status channelOpForward(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                        const void* in, void* out) {
  const std::size_t t = op.inputs[0];
  if (op.kind == BlockOpKind::Slice)
    return kernels::copyOrAddRowsHalf(c.stream, o.batch, o.outPerSample,
                                      halves(in) + op.layer.channelBegin * planeOf(graph, t), sampleStride(graph, t),
                                      halves(out), o.outPerSample, false);
  return kernels::channelShuffleForwardHalf(c.stream, o.batch, graph.tensors[op.output].shape[1], op.layer.groups,
                                            planeOf(graph, op.output), halves(in), sampleStride(graph, t), halves(out));
}

Status channelOpBackward(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                         const void* dOut, void* dIn) {
  if (dIn == nullptr) return Status::ok();
  const std::size_t t = op.inputs[0];
  const bool accumulate = op.gradAccumulate[0];
  if (op.kind == BlockOpKind::ChannelShuffle)
    return kernels::channelShuffleBackwardHalf(c.stream, o.batch, graph.tensors[op.output].shape[1], op.layer.groups,
                                               planeOf(graph, op.output), halves(dOut), halves(dIn), accumulate);
  if (!accumulate)
    REMAT_CUDA_CHECK(cudaMemsetAsync(dIn, 0, elementCount(graph.tensors[t].shape) * kHalfBytes, c.stream));
  return kernels::copyOrAddRowsHalf(c.stream, o.batch, o.outPerSample, halves(dOut), o.outPerSample,
                                    halves(dIn) + op.layer.channelBegin * planeOf(graph, t), perSample(graph, t),
                                    accumulate);
}

// The state of an inner op other than a convolution or batch norm, and what cuda_half.cpp's layout
// check does not refuse by kind: a broadcasting add, an activation without a bfloat16 kernel.
Status checkHalfInnerOp(const BlockGraph& graph, const BlockOp& op, const LayerChecks& check, BlockOpState& state) {
  const Shape& out = graph.tensors[op.output].shape;
  state.batch = out[0];
  state.outPerSample = state.count / out[0];
  if (op.kind == BlockOpKind::GlobalAvgPool || op.kind == BlockOpKind::Mul || op.kind == BlockOpKind::Concat ||
      op.kind == BlockOpKind::Slice || op.kind == BlockOpKind::ChannelShuffle)
    return Status::ok();
  if (op.kind == BlockOpKind::MaxPool || op.kind == BlockOpKind::AvgPool) {
    const Shape& in = graph.tensors[op.inputs[0]].shape;
    state.pool = kernels::PoolWindowGeometry{in[0],  in[1],           in[2],           in[3],           out[2],
                                             out[3], op.layer.kernel, op.layer.stride, op.layer.padding};
    return Status::ok();
  }
  if (op.kind == BlockOpKind::LayerNorm) return check.innerLayerNorm(op, graph.tensors[op.inputs[0]].shape);
  if (op.kind == BlockOpKind::LayerScale)
    return check.innerLayerScale(op, static_cast<std::uint64_t>(graph.tensors[op.inputs[0]].shape[1]));
  if (op.kind == BlockOpKind::Add || op.kind == BlockOpKind::Sub || op.kind == BlockOpKind::Div) {
    if (op.inputs.size() != 2) return check.fail("inner op '" + op.layer.name + "' must have two operands");
    return Status::ok();
  }
  if (op.kind == BlockOpKind::Dropout) {  // its one-byte mask in E (keep mode), as float32's
    if (op.statsBytes != elementCount(graph.tensors[op.inputs[0]].shape))
      return check.fail("inner dropout '" + op.layer.name + "' has an unexpected mask size");
    return Status::ok();
  }
  const std::optional<LayerKind> kind = blockOpInfo(op.kind).layer;
  if (!kind || !isPointwise(*kind)) return check.fail("inner op '" + op.layer.name + "' has no bfloat16 GPU kernel");
  auto fn = halfActivationOf(*kind);
  if (!fn) return check.fail("mixed precision: inner op '" + op.layer.name + "': " + fn.status().message());
  state.halfActivation = *fn;
  return Status::ok();
}

struct HalfConvNeeds {
  std::uint64_t regionBytes = 0;  // the largest weight copy / bfloat16 weight gradient
  std::uint64_t copyOffset = 0;   // the next weight copy's offset in E
};

Status prepareInnerConv(const BlockOp& op, const Shape& in, const LayerContext& context, const AlgorithmPolicy& policy,
                        const LayerChecks& check, HalfConvNeeds& needs, BlockOpState& s, BlockState& block,
                        LayerState& state) {
  auto g = convGeometry(op.layer, in);
  if (!g) return check.fail("inner conv '" + op.layer.name + "': " + g.status().message());
  g->bfloat16 = true;
  s.halfWeights =
      static_cast<Index>(op.paramCount - (op.layer.bias ? static_cast<std::uint64_t>(op.layer.outChannels) : 0));
  s.biasOffset = s.weightOffset + s.halfWeights;
  s.halfCopyOffset = needs.copyOffset;
  needs.copyOffset += static_cast<std::uint64_t>(s.halfWeights) * kHalfBytes;
  auto conv = ConvOp::create(context.cudnn, *g, false, policy, op.layer.name);
  if (!conv) return conv.status().withContext("gpu: " + state.label + " (bfloat16)");
  block.fwdScratchBytes = std::max(block.fwdScratchBytes, conv->forwardWorkspaceBytes());
  block.bwdScratchBytes = std::max(block.bwdScratchBytes, conv->backwardWorkspaceBytes());
  if (!state.algorithms.empty()) state.algorithms += "; ";
  state.algorithms += op.layer.name + ": bf16 " + conv->describe();
  s.conv = std::move(*conv);
  return Status::ok();
}

// Whether op is the first conv reading a float32 x(l-1) through autocast's cast (ConvNeXt's).
bool castsBlockInput(const BlockState& block, const BlockOp& op) {
  return block.castsInput && op.kind == BlockOpKind::Conv2d && op.inputs[0] == 0;
}

Status forwardInnerConv(const BlockOp& op, const BlockOpState& o, const BlockState& block, ForwardMode mode,
                        const LayerContext& c, const ForwardBuffers& p, const void* in, void* out) {
  std::byte* region = p.workspace + block.fwdScratchOffset;
  const bool keep = mode == ForwardMode::Keep;
  if (castsBlockInput(block, op)) {  // in is the float32 x(l-1); the conv reads (and saves) its cast
    void* cast = keep ? static_cast<void*>(p.extra + block.inputCastOffset) : region + block.halfRegionBytes;
    REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, static_cast<Index>(elementCount(block.graph.tensors[0].shape)),
                                              static_cast<const float*>(in), halves(cast)));
    in = cast;
  }
  Bf16* copy = halves(keep ? p.extra + o.halfCopyOffset : region);
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, o.halfWeights, p.params + o.weightOffset, copy));
  REMAT_RETURN_IF_ERROR(
      o.conv->forwardHalf(c.cudnn, in, copy, out, region + block.halfRegionBytes + block.castRegionBytes));
  if (!op.layer.bias) return Status::ok();
  const Dims4 y = o.conv->outputDims();
  return kernels::addChannelBiasHalf(c.stream, y.n, y.c, static_cast<Index>(y.h) * y.w, p.params + o.biasOffset,
                                     halves(out));
}

Status backwardInnerConv(const BlockOp& op, const BlockOpState& o, const BlockState& block, const LayerContext& c,
                         const BackwardBuffers& p, const void* saved, const void* dOut, void* dIn) {
  std::byte* region = p.workspace + block.bwdScratchOffset;
  std::byte* scratch = region + block.halfRegionBytes + block.castRegionBytes;
  const Bf16* copy = halves(p.extra + o.halfCopyOffset);
  if (dIn != nullptr && castsBlockInput(block, op)) {  // bfloat16 d(cast), then into the float32 d(l-1)
    Bf16* dCast = halves(region + block.halfRegionBytes);
    const auto count = static_cast<Index>(elementCount(block.graph.tensors[0].shape));
    REMAT_RETURN_IF_ERROR(o.conv->backwardDataHalf(c.cudnn, dOut, copy, dCast, scratch, false));
    REMAT_RETURN_IF_ERROR(op.gradAccumulate[0]
                              ? kernels::addHalfInto(c.stream, count, dCast, static_cast<float*>(dIn))
                              : kernels::castToFloat(c.stream, count, dCast, static_cast<float*>(dIn)));
  } else if (dIn != nullptr) {
    REMAT_RETURN_IF_ERROR(o.conv->backwardDataHalf(c.cudnn, dOut, copy, dIn, scratch, op.gradAccumulate[0]));
  }
  Bf16* dw = halves(region);
  REMAT_RETURN_IF_ERROR(o.conv->backwardFilterHalf(c.cudnn, saved, dOut, dw, scratch));
  REMAT_RETURN_IF_ERROR(kernels::addHalfInto(c.stream, o.halfWeights, dw, p.paramGrads + o.weightOffset));
  if (!op.layer.bias) return Status::ok();
  const Dims4 y = o.conv->outputDims();
  return kernels::addHalfChannelBiasGradient(c.stream, y.n, y.c, static_cast<Index>(y.h) * y.w, halves(dOut),
                                             p.paramGrads + o.biasOffset);
}

// NCHW concatenation: input j is the slice [offset_j, offset_j + C_j * H * W) of every sample of the
// output (the float32 runner's rule, on bfloat16 rows); the backward copies (or adds) them back.
Status concatForwardHalf(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                         const BlockForwardTensors& tensors, void* out) {
  Index offset = 0;
  for (std::size_t in : op.inputs) {
    const Index width = perSample(graph, in);
    REMAT_RETURN_IF_ERROR(kernels::copyOrAddRowsHalf(c.stream, o.batch, width, halves(tensors.tensor(in)),
                                                     sampleStride(graph, in), halves(out) + offset, o.outPerSample,
                                                     false));
    offset += width;
  }
  return Status::ok();
}

Status concatBackwardHalf(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                          const BlockBackwardTensors& tensors, const void* dOut) {
  Index offset = 0;
  for (std::size_t j = 0; j < op.inputs.size(); ++j) {
    const Index width = static_cast<Index>(elementCount(graph.tensors[op.inputs[j]].shape)) / o.batch;
    void* d = tensors.grad(op.inputs[j]);
    if (d != nullptr)
      REMAT_RETURN_IF_ERROR(kernels::copyOrAddRowsHalf(c.stream, o.batch, width, halves(dOut) + offset, o.outPerSample,
                                                       halves(d), width, op.gradAccumulate[j]));
    offset += width;
  }
  return Status::ok();
}

// Issue 22's broadcasting add, sub and div in bfloat16 (kernels_half_arith.cu); an equal-shape add
// keeps the residual add's kernels.
bool isArith(const BlockGraph& graph, const BlockOp& op) {
  return op.kind == BlockOpKind::Sub || op.kind == BlockOpKind::Div ||
         (op.kind == BlockOpKind::Add && graph.tensors[op.inputs[0]].shape != graph.tensors[op.inputs[1]].shape);
}
kernels::Arith arithOf(BlockOpKind kind) {
  return kind == BlockOpKind::Add   ? kernels::Arith::Add
         : kind == BlockOpKind::Sub ? kernels::Arith::Sub
                                    : kernels::Arith::Div;
}

// Div's backward reads both operands (saved); add's and sub's none (null).
Status arithBackwardHalf(const BlockGraph& graph, const BlockOp& op, const LayerContext& c,
                         const BlockBackwardTensors& tensors, const void* dOut, const void* const saved[2]) {
  const kernels::Dims4 o = dimsOf(graph, op.output), a = dimsOf(graph, op.inputs[0]), b = dimsOf(graph, op.inputs[1]);
  for (int j = 0; j < 2; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    void* d = tensors.grad(op.inputs[jj]);
    if (d != nullptr)
      REMAT_RETURN_IF_ERROR(kernels::arithBackwardOperandHalf(c.stream, arithOf(op.kind), j, o, a, b, halves(dOut),
                                                              halves(saved[0]), halves(saved[1]), halves(d),
                                                              op.gradAccumulate[jj]));
  }
  return Status::ok();
}

// An inner dropout draws on a stream of its own within the layer's (rng::at(dropoutKey, index of
// the op)), the float32 runner's and the CPU's: the same elements dropped as under float32, in
// every plan; keep mode writes its one-byte mask to E (stats).
// ConvNeXt's inner ops (kernels_half_convnext.cu): the layer norm over the channels on bfloat16
// data (N*H*W rows of C, H*W apart; float32 statistics in E), layer_scale's bfloat16 x float32 gamma
// written in float32, and the residual add where an operand (and so its output) is float32.
bool isHalfTensor(const BlockGraph& graph, std::size_t t) { return graph.tensors[t].dtype == DType::BFloat16; }
bool isMixedAdd(const BlockGraph& graph, const BlockOp& op) {
  return op.kind == BlockOpKind::Add && !isHalfTensor(graph, op.output);
}

Status convNextForwardHalf(const BlockGraph& graph, const BlockOp& op, const LayerContext& c,
                           const BlockForwardTensors& tensors, const void* const in[2], const float* w, void* out) {
  const kernels::Dims4 x = dimsOf(graph, op.inputs[0]);
  if (op.kind == BlockOpKind::LayerScale)
    return kernels::layerScaleForwardHalf(c.stream, x, halves(in[0]), w, static_cast<float*>(out));
  if (op.kind == BlockOpKind::LayerNorm)
    return kernels::layerNormForwardHalf(c.stream, x.n * x.h * x.w, x.c, static_cast<float>(op.layer.epsilon),
                                         halves(in[0]), w, halves(out), tensors.stats(op), x.h * x.w);
  return kernels::addMixed(c.stream, static_cast<Index>(elementCount(graph.tensors[op.output].shape)), in[0],
                           isHalfTensor(graph, op.inputs[0]), in[1], isHalfTensor(graph, op.inputs[1]),
                           static_cast<float*>(out));
}

Status convNextBackwardHalf(const BlockGraph& graph, const BlockOp& op, const LayerContext& c,
                            const BlockBackwardTensors& tensors, const BackwardBuffers& p, const BlockOpState& o,
                            const void* const saved[2]) {
  const void* dOut = tensors.grad(op.output);
  const kernels::Dims4 x = dimsOf(graph, op.inputs[0]);
  const float* w = p.params + o.weightOffset;
  float* dw = p.paramGrads + o.weightOffset;
  const bool accumulate = op.gradAccumulate[0];
  if (op.kind == BlockOpKind::LayerNorm)
    return kernels::layerNormBackwardHalf(c.stream, x.n * x.h * x.w, x.c, halves(saved[0]), halves(dOut), w,
                                          tensors.stats(op), halves(tensors.grad(op.inputs[0])), dw, x.h * x.w,
                                          accumulate);
  if (op.kind == BlockOpKind::LayerScale)
    return kernels::layerScaleBackwardHalf(c.stream, x, static_cast<const float*>(dOut), halves(saved[0]), w,
                                           halves(tensors.grad(op.inputs[0])), accumulate, dw);
  const auto count = static_cast<Index>(elementCount(graph.tensors[op.output].shape));  // the float32 add
  for (std::size_t j = 0; j < 2; ++j) {
    void* d = tensors.grad(op.inputs[j]);
    if (d == nullptr) continue;
    const auto* g = static_cast<const float*>(dOut);
    REMAT_RETURN_IF_ERROR(isHalfTensor(graph, op.inputs[j])
                              ? kernels::copyOrAddFloatToHalf(c.stream, count, g, halves(d), op.gradAccumulate[j])
                              : kernels::copyOrAdd(c.stream, count, g, static_cast<float*>(d), op.gradAccumulate[j]));
  }
  return Status::ok();
}

struct InnerOpAt {
  std::size_t index = 0;
  std::uint64_t dropoutKey = 0;
};

Status forwardInnerOp(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const BlockState& block,
                      ForwardMode mode, const LayerContext& c, const BlockForwardTensors& tensors,
                      const ForwardBuffers& p, const void* const inputs[2], InnerOpAt at) {
  void* out = tensors.tensor(op.output);
  const void* in = inputs[0];
  const float* w = p.params + o.weightOffset;
  if (isArith(graph, op))
    return kernels::arithForwardHalf(c.stream, arithOf(op.kind), dimsOf(graph, op.output), dimsOf(graph, op.inputs[0]),
                                     dimsOf(graph, op.inputs[1]), halves(in), halves(inputs[1]), halves(out));
  if (op.kind == BlockOpKind::LayerNorm || op.kind == BlockOpKind::LayerScale || isMixedAdd(graph, op))
    return convNextForwardHalf(graph, op, c, tensors, inputs, w, out);
  if (op.kind == BlockOpKind::Dropout)
    return kernels::dropoutForwardHalf(c.stream, o.count, op.layer.dropoutP, rng::at(at.dropoutKey, at.index),
                                       halves(in), halves(out), reinterpret_cast<std::uint8_t*>(tensors.stats(op)));
  switch (op.kind) {
    case BlockOpKind::Conv2d: return forwardInnerConv(op, o, block, mode, c, p, in, out);
    case BlockOpKind::BatchNorm:
      return kernels::batchNormForwardHalf(c.stream, o.halfNorm, kEpsilon, halves(in), w, w + o.halfNorm.c, halves(out),
                                           tensors.stats(op));
    case BlockOpKind::Add: return kernels::addHalf(c.stream, o.count, halves(in), halves(inputs[1]), halves(out));
    case BlockOpKind::GlobalAvgPool:
      return kernels::globalAvgPoolForwardHalf(c.stream, dimsOf(graph, op.inputs[0]), halves(in), halves(out));
    case BlockOpKind::MaxPool:  // keep mode: the argmax its backward reads, in E
      return kernels::maxPoolForwardHalf(c.stream, o.pool, halves(in), halves(out),
                                         reinterpret_cast<std::int64_t*>(tensors.stats(op)));
    case BlockOpKind::AvgPool: return kernels::avgPoolForwardHalf(c.stream, o.pool, halves(in), halves(out));
    case BlockOpKind::Concat: return concatForwardHalf(graph, op, o, c, tensors, out);
    case BlockOpKind::Slice:
    case BlockOpKind::ChannelShuffle: return channelOpForward(graph, op, o, c, in, out);
    case BlockOpKind::Mul:
      return kernels::mulForwardHalf(c.stream, dimsOf(graph, op.output), dimsOf(graph, op.inputs[0]),
                                     dimsOf(graph, op.inputs[1]), halves(in), halves(inputs[1]), halves(out));
    default: return kernels::activationForwardHalf(c.stream, o.halfActivation, o.count, halves(in), halves(out));
  }
}

// y = a * b: each operand's gradient is d(y) times the other, summed where it was broadcast.
Status mulBackwardHalf(const BlockGraph& graph, const BlockOp& op, const LayerContext& c,
                       const BlockBackwardTensors& tensors, const void* dOut, const void* const saved[2]) {
  for (std::size_t j = 0; j < 2; ++j) {
    void* d = tensors.grad(op.inputs[j]);
    if (d == nullptr) continue;
    const std::size_t other = op.inputs[1 - j];
    REMAT_RETURN_IF_ERROR(kernels::mulBackwardOperandHalf(
        c.stream, dimsOf(graph, op.output), dimsOf(graph, op.inputs[j]), dimsOf(graph, other), halves(dOut),
        halves(saved[1 - j]), halves(d), op.gradAccumulate[j]));
  }
  return Status::ok();
}

// One inner op's backward; saved[j] is input j as its backward reads it (contiguous), or null.
Status backwardInnerOp(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const BlockState& block,
                       const LayerContext& c, const BlockBackwardTensors& tensors, const BackwardBuffers& p,
                       const void* const saved[2]) {
  const void* dOut = tensors.grad(op.output);
  void* dIn = tensors.grad(op.inputs[0]);
  const bool accumulate = op.gradAccumulate[0];
  if (isArith(graph, op)) return arithBackwardHalf(graph, op, c, tensors, dOut, saved);
  if (op.kind == BlockOpKind::LayerNorm || op.kind == BlockOpKind::LayerScale || isMixedAdd(graph, op))
    return convNextBackwardHalf(graph, op, c, tensors, p, o, saved);
  if (op.kind == BlockOpKind::Dropout) {  // from its mask alone
    if (dIn == nullptr) return Status::ok();
    return kernels::dropoutBackwardHalfInto(c.stream, o.count, op.layer.dropoutP,
                                            reinterpret_cast<const std::uint8_t*>(tensors.stats(op)), halves(dOut),
                                            halves(dIn), accumulate);
  }
  switch (op.kind) {
    case BlockOpKind::Conv2d: return backwardInnerConv(op, o, block, c, p, saved[0], dOut, dIn);
    case BlockOpKind::BatchNorm: {
      if (dIn == nullptr) return Status::internal("inner batch norm '" + op.layer.name + "' without d(input)");
      const float* w = p.params + o.weightOffset;
      float* dw = p.paramGrads + o.weightOffset;
      return kernels::batchNormBackwardHalf(c.stream, o.halfNorm, halves(saved[0]), halves(dOut), w, tensors.stats(op),
                                            halves(dIn), dw, dw + o.halfNorm.c, accumulate);
    }
    case BlockOpKind::Add:
      for (std::size_t j = 0; j < op.inputs.size(); ++j) {
        void* d = tensors.grad(op.inputs[j]);
        if (d != nullptr)
          REMAT_RETURN_IF_ERROR(
              kernels::copyOrAddHalf(c.stream, o.count, halves(dOut), halves(d), op.gradAccumulate[j]));
      }
      return Status::ok();
    case BlockOpKind::GlobalAvgPool:
      if (dIn == nullptr) return Status::ok();
      return kernels::globalAvgPoolBackwardHalf(c.stream, dimsOf(graph, op.inputs[0]), halves(dOut), halves(dIn),
                                                accumulate);
    case BlockOpKind::Mul: return mulBackwardHalf(graph, op, c, tensors, dOut, saved);
    case BlockOpKind::Slice:
    case BlockOpKind::ChannelShuffle: return channelOpBackward(graph, op, o, c, dOut, dIn);
    case BlockOpKind::MaxPool:
      if (dIn == nullptr) return Status::ok();
      return kernels::maxPoolBackwardHalf(c.stream, o.pool, reinterpret_cast<const std::int64_t*>(tensors.stats(op)),
                                          halves(dOut), halves(dIn), accumulate);
    case BlockOpKind::AvgPool:
      if (dIn == nullptr) return Status::ok();
      return kernels::avgPoolBackwardHalf(c.stream, o.pool, halves(dOut), halves(dIn), accumulate);
    case BlockOpKind::Concat: return concatBackwardHalf(graph, op, o, c, tensors, dOut);
    default: {  // an activation: only the tensor its backward reads is there
      if (dIn == nullptr) return Status::ok();
      const bool fromOutput = operatorInfo(op.layer.kind).backwardReads == BackwardReads::Output;
      const void* read = fromOutput ? tensors.value(op.output) : saved[0];
      return kernels::activationBackwardHalf(c.stream, o.halfActivation, o.count, halves(read), halves(dOut),
                                             halves(dIn), accumulate);
    }
  }
}

}  // namespace

Status prepareHalfBlock(const Chain& chain, std::size_t l, const LayerSpec& spec, const LayerContext& context,
                        const CudaDeviceOptions& options, const LayerChecks& check, LayerState& state) {
  const ChainLayer& layer = chain.layers[l - 1];
  // The model's numbers against the bfloat16 graph and its weight copies (cuda_half.cpp), which
  // also refuses a block reading a float32 input and the inner ops without a bfloat16 layout.
  REMAT_RETURN_IF_ERROR(checkHalfLayer(chain, l, HalfMode{true, state.castsInput, false, state.floatOutput}, check));
  if (layer.inputShape.size() != 4)  // as the float32 blocks: NCHW
    return check.fail("the GPU runs blocks on NCHW tensors only, not on " + shapeToString(layer.inputShape) +
                      " yet; plan and simulate it, or run it on the CPU");
  auto graph = halfBlockGraph(spec, layer.inputShape, state.castsInput);
  if (!graph) return check.fail(graph.status().message());
  BlockState block;
  // A float32 x(l-1): the first conv's bfloat16 cast in E before the weight copies (cuda_half.cpp).
  const std::uint64_t castBytes = state.castsInput ? static_cast<std::uint64_t>(state.inCount) * kHalfBytes : 0;
  block.castsInput = state.castsInput;
  block.inputCastOffset = graph->extraBytes;
  block.castRegionBytes = alignUp(castBytes, kBlockTensorAlignBytes);
  HalfConvNeeds needs{0, graph->extraBytes + castBytes};
  for (const BlockOp& op : graph->ops)
    if (op.kind == BlockOpKind::Conv2d) needs.regionBytes = std::max(needs.regionBytes, (op.paramCount) * kHalfBytes);
  block.halfRegionBytes = alignUp(needs.regionBytes, kBlockTensorAlignBytes);
  block.fwdScratchOffset = alignUp(graph->fwdWorkspaceBytes, kBlockTensorAlignBytes);
  block.bwdScratchOffset = alignUp(graph->bwdWorkspaceBytes, kBlockTensorAlignBytes);
  const LayerNumbers& m = layer.numbers;
  const std::uint64_t regions = block.halfRegionBytes + block.castRegionBytes;
  AlgorithmPolicy policy = convPolicy(options, m.fwdWorkspaceBytes, block.fwdScratchOffset + regions,
                                      m.bwdWorkspaceBytes, block.bwdScratchOffset + regions);
  policy.allowTf32 = true;  // bfloat16 tensor-core math rounds nothing autocast did not (cuda_half_conv.cpp)
  Index offset = 0;
  for (const BlockOp& op : graph->ops) {
    BlockOpState s;
    const Shape& in = graph->tensors[op.inputs[0]].shape;
    s.count = static_cast<Index>(elementCount(graph->tensors[op.output].shape));
    s.weightOffset = offset;
    if (op.kind == BlockOpKind::Conv2d) {
      REMAT_RETURN_IF_ERROR(prepareInnerConv(op, in, context, policy, check, needs, s, block, state));
    } else if (op.kind == BlockOpKind::BatchNorm) {
      auto dims = toDims4(in);
      if (!dims) return check.fail("inner batch norm '" + op.layer.name + "': " + dims.status().message());
      s.halfNorm = kernels::Dims4{dims->n, dims->c, dims->h, dims->w};
    } else {
      REMAT_RETURN_IF_ERROR(checkHalfInnerOp(*graph, op, check, s));
    }
    offset += static_cast<Index>(op.paramCount);
    block.ops.push_back(std::move(s));
  }
  state.requiredFwdWorkspace = block.fwdScratchOffset + regions + block.fwdScratchBytes;
  state.requiredBwdWorkspace = block.bwdScratchOffset + regions + block.bwdScratchBytes;
  block.graph = std::move(graph).value();
  state.block = std::move(block);
  return Status::ok();
}

Status forwardHalfBlock(const LayerState& s, std::size_t l, std::uint64_t seed, ForwardMode mode, const LayerContext& c,
                        const ForwardBuffers& p) {
  const BlockState& block = *s.block;
  const BlockGraph& graph = block.graph;
  const BlockForwardTensors tensors(graph, mode, p, ViewLayout::Nchw);
  const std::string where = "gpu: " + s.label;
  REMAT_RETURN_IF_ERROR(tensors.check(where));
  const std::uint64_t dropoutKey = rng::streamKey(seed, rng::Purpose::Dropout, l);  // the CPU's run_layers.cpp
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const BlockOp& op = graph.ops[i];
    if (graph.tensors[op.output].isView()) continue;  // a channel slice: its owner holds its values
    const void* in[2] = {nullptr, nullptr};
    for (std::size_t j = 0; j < std::min<std::size_t>(2, op.inputs.size()); ++j)
      REMAT_RETURN_IF_ERROR(
          contiguousInput(graph, op, j, tensors.tensor(op.inputs[j]), op.gatherOffset[j], p.workspace, c, in[j]));
    REMAT_RETURN_IF_ERROR(
        forwardInnerOp(graph, op, block.ops[i], block, mode, c, tensors, p, in, InnerOpAt{i, dropoutKey})
            .withContext(where + ", inner op '" + op.layer.name + "'"));
  }
  return Status::ok();
}

Status backwardHalfBlock(const LayerState& s, const LayerContext& c, const BackwardBuffers& p) {
  const BlockState& block = *s.block;
  return walkBlockBackward<const void*>(
      s, p, c.stream,
      [&](const BlockOp& op, std::size_t j, const void* values, std::uint64_t slot, const void*& out) {
        return contiguousInput(block.graph, op, j, values, slot, p.workspace, c, out);
      },
      [&](const BlockOp& op, const BlockOpState& o, const BlockBackwardTensors& tensors, const BackwardBuffers& q,
          const void*(&saved)[2]) { return backwardInnerOp(block.graph, op, o, block, c, tensors, q, saved); },
      [&](const BlockOp& op, const void*(&saved)[2]) {
        if (!castsBlockInput(block, op)) return false;
        saved[0] = p.extra + block.inputCastOffset;  // it saved x(l-1)'s cast in E, not x(l-1)
        return true;
      });
}

}  // namespace remat::gpu
