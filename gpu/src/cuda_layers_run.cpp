// Dispatch of the real layer kinds and of the residual blocks to cuDNN, cuBLAS and the own kernels.
// The buffers were checked by CudaDevice (sizes, presence per the model's in / out / e flags).
#include <algorithm>

#include "cuda_block_walk.hpp"
#include "cuda_device_impl.hpp"
#include "cuda_heads_half.hpp"
#include "cuda_patch_half.hpp"
#include "cuda_swin.hpp"
#include "cuda_swin_half.hpp"
#include "cuda_transformer.hpp"
#include "cuda_transformer_ends.hpp"
#include "cuda_transformer_half.hpp"
#include "cuda_vit.hpp"
#include "remat/exec/block_buffers.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"
#include "remat/model/operators.hpp"

namespace remat::gpu {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

// Row-major [rows][in] x [out][in]^T through column-major cuBLAS: in column-major terms
// y^T (out x rows) = W (out x in, i.e. the row-major [out][in] read as in x out, transposed) x^T.
Status linearForward(const LayerState& s, const LayerContext& c, const float* x, const float* w, float* y) {
  const int rows = static_cast<int>(s.rows), in = static_cast<int>(s.inFeatures), out = static_cast<int>(s.outFeatures);
  REMAT_CUBLAS_CHECK(
      cublasSgemm(c.cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &kOne, w, in, x, in, &kZero, y, out));
  if (s.bias) return kernels::addRowBias(c.stream, s.rows, s.outFeatures, w + s.biasOffset, y);
  return Status::ok();
}

// dx = dy W (written); dW += dy^T x; db += column sums of dy.
Status linearBackward(const LayerState& s, const LayerContext& c, const BackwardBuffers& p) {
  const int rows = static_cast<int>(s.rows), in = static_cast<int>(s.inFeatures), out = static_cast<int>(s.outFeatures);
  if (p.dx != nullptr)
    REMAT_CUBLAS_CHECK(cublasSgemm(c.cublas, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, &kOne, p.params, in, p.dy, out,
                                   &kZero, p.dx, in));
  REMAT_CUBLAS_CHECK(cublasSgemm(c.cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, &kOne, p.x, in, p.dy, out, &kOne,
                                 p.paramGrads, in));
  if (s.bias) return kernels::accumulateRowBiasGrad(c.stream, s.rows, s.outFeatures, p.dy, p.paramGrads + s.biasOffset);
  return Status::ok();
}

// The pointwise kinds: relu and relu6 run their own kernels, the others the generic ones.
std::optional<kernels::Pointwise> pointwiseOf(LayerKind kind) {
  switch (kind) {
    case LayerKind::Sigmoid: return kernels::Pointwise::Sigmoid;
    case LayerKind::Tanh: return kernels::Pointwise::Tanh;
    case LayerKind::Silu: return kernels::Pointwise::Silu;
    case LayerKind::HardSwish: return kernels::Pointwise::HardSwish;
    case LayerKind::HardSigmoid: return kernels::Pointwise::HardSigmoid;
    case LayerKind::Gelu: return kernels::Pointwise::Gelu;
    default: return std::nullopt;
  }
}

Status activationForward(LayerKind kind, cudaStream_t stream, Index count, const float* x, float* y) {
  if (kind == LayerKind::Relu) return kernels::reluForward(stream, count, x, y);
  if (kind == LayerKind::Relu6) return kernels::relu6Forward(stream, count, x, y);
  if (auto fn = pointwiseOf(kind)) return kernels::pointwiseForward(stream, *fn, count, x, y);
  return Status::internal("gpu: '" + std::string(kindName(kind)) + "' has no pointwise kernel");
}

// From y or x, whichever the kind's description says PyTorch's backward keeps (relu6 from x, as
// hardtanh: memory-model.md section 5.1).
Status activationBackward(LayerKind kind, cudaStream_t stream, Index count, const float* x, const float* y,
                          const float* dy, float* dx, bool accumulate) {
  if (dx == nullptr) return Status::ok();
  const float* saved = operatorInfo(kind).backwardReads == BackwardReads::Output ? y : x;
  if (kind == LayerKind::Relu) return kernels::reluBackward(stream, count, saved, dy, dx, accumulate);
  if (kind == LayerKind::Relu6) return kernels::relu6Backward(stream, count, saved, dy, dx, accumulate);
  if (auto fn = pointwiseOf(kind)) return kernels::pointwiseBackward(stream, *fn, count, saved, dy, dx, accumulate);
  return Status::internal("gpu: '" + std::string(kindName(kind)) + "' has no pointwise kernel");
}

// Input j of op as the contiguous tensor its kernel reads: a view the op cannot read in place
// (block.hpp's gather offsets) is first copied, sample by sample, to its slot in the workspace.
Status contiguousInput(const BlockGraph& graph, const BlockOp& op, std::size_t j, const float* values,
                       std::uint64_t slot, std::byte* workspace, const LayerContext& c, const float*& out) {
  out = values;
  if (slot == kBlockNoOffset || values == nullptr) return Status::ok();
  auto* copy = reinterpret_cast<float*>(workspace + slot);
  const std::size_t t = op.inputs[j];
  const Index width = perSample(graph, t);
  REMAT_RETURN_IF_ERROR(kernels::copyOrAddRows(c.stream, graph.tensors[t].shape[0], width, values,
                                               sampleStride(graph, t), copy, width, false));
  out = copy;
  return Status::ok();
}

// NCHW concatenation: input j is the slice [offset_j, offset_j + C_j * H * W) of every sample of the
// output; the backward copies (or adds) the slices back into d(input j).
Status concatForward(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                     const BlockForwardTensors& tensors, float* out) {
  Index offset = 0;
  for (std::size_t in : op.inputs) {
    const Index width = perSample(graph, in);
    REMAT_RETURN_IF_ERROR(kernels::copyOrAddRows(c.stream, o.batch, width, tensors.tensor(in), sampleStride(graph, in),
                                                 out + offset, o.outPerSample, false));
    offset += width;
  }
  return Status::ok();
}

Status concatBackward(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                      const BlockBackwardTensors& tensors, const float* dOut) {
  Index offset = 0;
  for (std::size_t j = 0; j < op.inputs.size(); ++j) {
    const Index width = static_cast<Index>(elementCount(graph.tensors[op.inputs[j]].shape)) / o.batch;
    float* d = tensors.grad(op.inputs[j]);
    if (d != nullptr)
      REMAT_RETURN_IF_ERROR(kernels::copyOrAddRows(c.stream, o.batch, width, dOut + offset, o.outPerSample, d, width,
                                                   op.gradAccumulate[j]));
    offset += width;
  }
  return Status::ok();
}

// A tensor's extents as the kernels' NCHW Dims4: [N, F] as [N, F, 1, 1] and [N, S, F] as
// [N, S, F, 1], whose NCHW order is their row-major one (a block of element-wise ops on them keeps
// x(l-1)'s layout; cuda_prepare.cpp admits ranks 2 to 4).
kernels::Dims4 dimsOf(const BlockGraph& graph, std::size_t tensor) {
  const Shape& s = graph.tensors[tensor].shape;
  if (s.size() == 2) return kernels::Dims4{s[0], s[1], 1, 1};
  if (s.size() == 3) return kernels::Dims4{s[0], s[1], s[2], 1};
  return kernels::Dims4{s[0], s[1], s[2], s[3]};
}

// Issue 22's broadcasting add (operands of different shapes), sub and div: kernels_arith.cu. An
// equal-shape add keeps the residual add's kernels.
bool broadcasts(const BlockGraph& graph, const BlockOp& op) {
  return graph.tensors[op.inputs[0]].shape != graph.tensors[op.inputs[1]].shape;
}

kernels::Arith arithOf(BlockOpKind kind) {
  return kind == BlockOpKind::Add   ? kernels::Arith::Add
         : kind == BlockOpKind::Sub ? kernels::Arith::Sub
                                    : kernels::Arith::Div;
}

Status arithForward(const BlockGraph& graph, const BlockOp& op, const LayerContext& c, const float* const in[2],
                    float* out) {
  return kernels::arithForward(c.stream, arithOf(op.kind), dimsOf(graph, op.output), dimsOf(graph, op.inputs[0]),
                               dimsOf(graph, op.inputs[1]), in[0], in[1], out);
}

// Div's backward reads both operands (saved[0], saved[1]); add's and sub's none (null).
Status arithBackward(const BlockGraph& graph, const BlockOp& op, const LayerContext& c,
                     const BlockBackwardTensors& tensors, const float* dOut, const float* const saved[2]) {
  const kernels::Dims4 o = dimsOf(graph, op.output), a = dimsOf(graph, op.inputs[0]), b = dimsOf(graph, op.inputs[1]);
  for (int j = 0; j < 2; ++j) {
    const auto jj = static_cast<std::size_t>(j);
    float* d = tensors.grad(op.inputs[jj]);
    if (d != nullptr)
      REMAT_RETURN_IF_ERROR(kernels::arithBackwardOperand(c.stream, arithOf(op.kind), j, o, a, b, dOut, saved[0],
                                                          saved[1], d, op.gradAccumulate[jj]));
  }
  return Status::ok();
}

// y = a * b: each operand's gradient is d(y) times the other (saved[1 - j]), summed where it was
// broadcast.
Status mulBackward(const BlockGraph& graph, const BlockOp& op, const LayerContext& c,
                   const BlockBackwardTensors& tensors, const float* dOut, const float* const saved[2]) {
  for (std::size_t j = 0; j < 2; ++j) {
    float* d = tensors.grad(op.inputs[j]);
    const std::size_t other = op.inputs[1 - j];
    if (d != nullptr)
      REMAT_RETURN_IF_ERROR(kernels::mulBackwardOperand(c.stream, dimsOf(graph, op.output), dimsOf(graph, op.inputs[j]),
                                                        dimsOf(graph, other), dOut, saved[1 - j], d,
                                                        op.gradAccumulate[j]));
  }
  return Status::ok();
}

// ShuffleNetV2's channel slice: forward only when it is the block's output (else a view, nothing to
// run); backward d(input) = its gradient in the slice's channels, zero elsewhere (or added).
Status sliceForward(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                    const float* in, float* out) {
  const std::size_t t = op.inputs[0];
  return kernels::copyOrAddRows(c.stream, o.batch, o.outPerSample, in + op.layer.channelBegin * planeOf(graph, t),
                                sampleStride(graph, t), out, o.outPerSample, false);
}

Status sliceBackward(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                     const float* dOut, float* dIn) {
  if (dIn == nullptr) return Status::ok();
  const std::size_t t = op.inputs[0];
  const bool accumulate = op.gradAccumulate[0];
  if (!accumulate)
    REMAT_CUDA_CHECK(cudaMemsetAsync(dIn, 0, elementCount(graph.tensors[t].shape) * sizeof(float), c.stream));
  return kernels::copyOrAddRows(c.stream, o.batch, o.outPerSample, dOut, o.outPerSample,
                                dIn + op.layer.channelBegin * planeOf(graph, t), perSample(graph, t), accumulate);
}

// ConvNeXt's inner ops on NCHW: the layer norm over the channels (N*H*W rows of C, H*W apart;
// kernels_layernorm.cu) and layer_scale, y = gamma * x with gamma [1, C, 1, 1] (the broadcasting
// product's kernels; gamma's gradient is added, as every parameter gradient).
Status convNextForward(const BlockGraph& graph, const BlockOp& op, const LayerContext& c, const float* in,
                       const float* w, float* out, float* stats) {
  const kernels::Dims4 x = dimsOf(graph, op.inputs[0]);
  if (op.kind == BlockOpKind::LayerScale)
    return kernels::mulForward(c.stream, dimsOf(graph, op.output), x, kernels::Dims4{1, x.c, 1, 1}, in, w, out);
  return kernels::layerNormForward(c.stream, x.n * x.h * x.w, x.c, static_cast<float>(op.layer.epsilon), in, w, out,
                                   stats, x.h * x.w);
}

Status convNextBackward(const BlockGraph& graph, const BlockOp& op, const LayerContext& c,
                        const BlockBackwardTensors& tensors, const float* dOut, const float* saved, const float* w,
                        float* dw) {
  const kernels::Dims4 x = dimsOf(graph, op.inputs[0]);
  float* dIn = tensors.grad(op.inputs[0]);
  if (op.kind == BlockOpKind::LayerNorm)
    return kernels::layerNormBackward(c.stream, x.n * x.h * x.w, x.c, saved, dOut, w, tensors.stats(op), dIn, dw,
                                      x.h * x.w, op.gradAccumulate[0]);
  const kernels::Dims4 y = dimsOf(graph, op.output), gamma{1, x.c, 1, 1};
  if (dIn != nullptr)
    REMAT_RETURN_IF_ERROR(kernels::mulBackwardOperand(c.stream, y, x, gamma, dOut, w, dIn, op.gradAccumulate[0]));
  return kernels::mulBackwardOperand(c.stream, y, gamma, x, dOut, saved, dw, true);
}

// One inner op's forward; in[j] is input j, contiguous unless the op reads views in place. An inner
// dropout draws on a stream of its own within the layer's (rng::at(dropoutKey, index of the op)), the
// CPU's run_blocks.cpp: each element's keep decision a function of its canonical (NCHW, row-major)
// index, which is the GPU's order, so both backends drop the same elements in every plan; keep mode
// writes the one-byte mask to E (stats), discard mode none.
Status forwardOp(const BlockGraph& graph, std::size_t index, const BlockOpState& o, const LayerContext& c,
                 const BlockForwardTensors& tensors, const ForwardBuffers& p, const float* const in[2], void* scratch,
                 std::uint64_t dropoutKey) {
  const BlockOp& op = graph.ops[index];
  float* out = tensors.tensor(op.output);
  const float* w = p.params + o.weightOffset;
  if (op.kind == BlockOpKind::Sub || op.kind == BlockOpKind::Div ||
      (op.kind == BlockOpKind::Add && broadcasts(graph, op)))
    return arithForward(graph, op, c, in, out);
  if (op.kind == BlockOpKind::Dropout)
    return kernels::dropoutForward(c.stream, o.count, op.layer.dropoutP, rng::at(dropoutKey, index), in[0], out,
                                   reinterpret_cast<std::uint8_t*>(tensors.stats(op)));
  switch (op.kind) {
    case BlockOpKind::Conv2d:
      return o.conv->forward(c.cudnn, in[0], w, o.conv->hasBias() ? p.params + o.biasOffset : nullptr, out, scratch);
    case BlockOpKind::BatchNorm: return o.bn->forward(c.cudnn, in[0], w, w + o.bn->channels(), out, tensors.stats(op));
    case BlockOpKind::Add: return kernels::add(c.stream, o.count, in[0], in[1], out);
    case BlockOpKind::Concat: return concatForward(graph, op, o, c, tensors, out);
    case BlockOpKind::GlobalAvgPool:
      return kernels::globalAvgPoolForward(c.stream, dimsOf(graph, op.inputs[0]), in[0], out);
    case BlockOpKind::Mul:
      return kernels::mulForward(c.stream, dimsOf(graph, op.output), dimsOf(graph, op.inputs[0]),
                                 dimsOf(graph, op.inputs[1]), in[0], in[1], out);
    case BlockOpKind::LayerNorm:
    case BlockOpKind::LayerScale: return convNextForward(graph, op, c, in[0], w, out, tensors.stats(op));
    case BlockOpKind::MaxPool:  // keep mode: the argmax its backward reads, in E
      return kernels::maxPoolForward(c.stream, o.pool, in[0], out, reinterpret_cast<std::int64_t*>(tensors.stats(op)));
    case BlockOpKind::AvgPool: return kernels::avgPoolForward(c.stream, o.pool, in[0], out);
    case BlockOpKind::Slice: return sliceForward(graph, op, o, c, in[0], out);
    case BlockOpKind::ChannelShuffle:
      return kernels::channelShuffleForward(c.stream, o.batch, graph.tensors[op.output].shape[1], op.layer.groups,
                                            planeOf(graph, op.output), in[0], sampleStride(graph, op.inputs[0]), out);
    default: return activationForward(op.layer.kind, c.stream, o.count, in[0], out);  // a pointwise activation
  }
}

// A block's forward: inner tensors in the ONE workspace at their arena offsets, or, in keep mode,
// saved ones in E at their extras offsets (block.hpp); cuDNN's scratch after the arena. Views are
// NCHW channel slices of their owner, read in place or gathered first.
Status forwardBlock(const LayerState& s, std::size_t l, ForwardMode mode, std::uint64_t seed, const LayerContext& c,
                    const ForwardBuffers& p) {
  const BlockState& block = *s.block;
  const BlockGraph& graph = block.graph;
  const BlockForwardTensors tensors(graph, mode, p, ViewLayout::Nchw);
  REMAT_RETURN_IF_ERROR(tensors.check("gpu: " + s.label));
  void* scratch = block.fwdScratchBytes > 0 ? p.workspace + block.fwdScratchOffset : nullptr;
  const std::uint64_t dropoutKey = rng::streamKey(seed, rng::Purpose::Dropout, l);  // the CPU's run_layers.cpp
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const BlockOp& op = graph.ops[i];
    if (graph.tensors[op.output].isView()) continue;  // a channel slice: its owner holds its values
    const float* in[2] = {nullptr, nullptr};
    for (std::size_t j = 0; j < std::min<std::size_t>(2, op.inputs.size()); ++j)
      REMAT_RETURN_IF_ERROR(
          contiguousInput(graph, op, j, tensors.tensor(op.inputs[j]), op.gatherOffset[j], p.workspace, c, in[j]));
    REMAT_RETURN_IF_ERROR(forwardOp(graph, i, block.ops[i], c, tensors, p, in, scratch, dropoutKey));
  }
  return Status::ok();
}

// A pool branch's backward adds into the gradient the block's other branches wrote.
Status poolBackward(const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                    const BlockBackwardTensors& tensors, const float* dOut) {
  float* dIn = tensors.grad(op.inputs[0]);
  if (dIn == nullptr) return Status::ok();
  const bool accumulate = op.gradAccumulate[0];
  if (op.kind == BlockOpKind::AvgPool) return kernels::avgPoolBackward(c.stream, o.pool, dOut, dIn, accumulate);
  const auto* indices = reinterpret_cast<const std::int64_t*>(tensors.stats(op));
  return kernels::maxPoolBackward(c.stream, o.pool, indices, dOut, dIn, accumulate);
}

Status convBackward(const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                    const BlockBackwardTensors& tensors, const BackwardBuffers& p, const float* dOut,
                    const float* saved, void* scratch) {
  float* dIn = tensors.grad(op.inputs[0]);
  const float* w = p.params + o.weightOffset;
  if (dIn != nullptr) REMAT_RETURN_IF_ERROR(o.conv->backwardData(c.cudnn, dOut, w, dIn, scratch, op.gradAccumulate[0]));
  return o.conv->backwardParams(c.cudnn, saved, dOut, p.paramGrads + o.weightOffset,
                                o.conv->hasBias() ? p.paramGrads + o.biasOffset : nullptr, scratch);
}

// One inner op's backward; saved[j] is input j as its backward reads it (contiguous), or null.
Status backwardOp(const BlockGraph& graph, const BlockOp& op, const BlockOpState& o, const LayerContext& c,
                  const BlockBackwardTensors& tensors, const BackwardBuffers& p, const float* const saved[2],
                  void* scratch) {
  const float* dOut = tensors.grad(op.output);
  float* dIn = tensors.grad(op.inputs[0]);
  const bool accumulate = op.gradAccumulate[0];
  const float* w = p.params + o.weightOffset;
  float* dw = p.paramGrads + o.weightOffset;
  if (op.kind == BlockOpKind::Sub || op.kind == BlockOpKind::Div ||
      (op.kind == BlockOpKind::Add && broadcasts(graph, op)))
    return arithBackward(graph, op, c, tensors, dOut, saved);
  if (op.kind == BlockOpKind::Dropout) {  // from its mask alone
    if (dIn == nullptr) return Status::ok();
    return kernels::dropoutBackward(c.stream, o.count, op.layer.dropoutP,
                                    reinterpret_cast<const std::uint8_t*>(tensors.stats(op)), dOut, dIn, accumulate);
  }
  switch (op.kind) {
    case BlockOpKind::Conv2d: return convBackward(op, o, c, tensors, p, dOut, saved[0], scratch);
    case BlockOpKind::BatchNorm:
      // cuDNN always writes dx; only a block at layer 1 whose batch norm reads x0 has nowhere for it.
      if (dIn == nullptr)
        return Status::invalid("inner batch norm '" + op.layer.name +
                               "' reads the chain's input x0, and cuDNN's backward must write its gradient; "
                               "put a layer before the block");
      return o.bn->backward(c.cudnn, saved[0], dOut, w, tensors.stats(op), dIn, dw, dw + o.bn->channels(), accumulate);
    case BlockOpKind::Add:
      for (std::size_t j = 0; j < op.inputs.size(); ++j) {
        float* d = tensors.grad(op.inputs[j]);
        if (d != nullptr) REMAT_RETURN_IF_ERROR(kernels::copyOrAdd(c.stream, o.count, dOut, d, op.gradAccumulate[j]));
      }
      return Status::ok();
    case BlockOpKind::Concat: return concatBackward(graph, op, o, c, tensors, dOut);
    case BlockOpKind::GlobalAvgPool:
      if (dIn == nullptr) return Status::ok();
      return kernels::globalAvgPoolBackward(c.stream, dimsOf(graph, op.inputs[0]), dOut, dIn, accumulate);
    case BlockOpKind::Mul: return mulBackward(graph, op, c, tensors, dOut, saved);
    case BlockOpKind::LayerNorm:
    case BlockOpKind::LayerScale: return convNextBackward(graph, op, c, tensors, dOut, saved[0], w, dw);
    case BlockOpKind::MaxPool:
    case BlockOpKind::AvgPool: return poolBackward(op, o, c, tensors, dOut);
    case BlockOpKind::Slice: return sliceBackward(graph, op, o, c, dOut, dIn);
    case BlockOpKind::ChannelShuffle:
      if (dIn == nullptr) return Status::ok();
      return kernels::channelShuffleBackward(c.stream, o.batch, graph.tensors[op.output].shape[1], op.layer.groups,
                                             planeOf(graph, op.output), dOut, dIn, accumulate);
    default: {  // a pointwise activation: only the tensor its backward reads is there
      const bool fromOutput = operatorInfo(op.layer.kind).backwardReads == BackwardReads::Output;
      const float* y = fromOutput ? tensors.value(op.output) : nullptr;
      return activationBackward(op.layer.kind, c.stream, o.count, fromOutput ? nullptr : saved[0], y, dOut, dIn,
                                accumulate);
    }
  }
}

// A block's backward: ops in reverse; inner gradients in the ONE backward workspace at their
// gradient offsets (cuDNN's scratch after them); saved tensors and statistics read from E, a saved
// view gathered first where its op needs it contiguous.
Status backwardBlock(const LayerState& s, const LayerContext& c, const BackwardBuffers& p) {
  const BlockState& block = *s.block;
  void* scratch = block.bwdScratchBytes > 0 ? p.workspace + block.bwdScratchOffset : nullptr;
  return walkBlockBackward<const float*>(
      s, p, c.stream,
      [&](const BlockOp& op, std::size_t j, const float* values, std::uint64_t slot, const float*& out) {
        return contiguousInput(block.graph, op, j, values, slot, p.workspace, c, out);
      },
      [&](const BlockOp& op, const BlockOpState& o, const BlockBackwardTensors& tensors, const BackwardBuffers& q,
          const float*(&saved)[2]) { return backwardOp(block.graph, op, o, c, tensors, q, saved, scratch); });
}

}  // namespace

Status forwardLayer(const LayerState& s, std::size_t l, ForwardMode mode, std::uint64_t seed, const LayerContext& c,
                    const ForwardBuffers& p) {
  if (s.halfBlock) return forwardHalfTransformerBlock(s, l, mode, seed, c, p);
  if (s.halfLmHead) return forwardHalfLmHead(s, mode, c, p);
  if (s.halfClsHead) return forwardHalfClsHead(s, mode, c, p);
  if (s.halfPatch) return forwardHalfPatchEmbedding(s, l, mode, seed, c, p);
  if (s.halfSwin) return forwardHalfSwinBlock(s, l, mode, seed, c, p);
  if (s.halfSwinEnd) return forwardHalfSwinEnd(s, mode, c, p);
  if (s.half) return forwardHalfLayer(s, l, mode, seed, c, p);
  if (s.castsFromHalf) return forwardLayerNormFromHalf(s, mode, c, p);
  const bool keep = mode == ForwardMode::Keep;
  switch (s.kind) {
    case LayerKind::Conv2d:
      return s.conv->forward(c.cudnn, p.x, p.params, s.bias ? p.params + s.biasOffset : nullptr, p.y, p.workspace);
    case LayerKind::MaxPool:
      // The model keeps x and E (8 bytes per output element, PyTorch's int64 indices) but not y;
      // cuDNN's backward wants y, so a keep-mode forward copies it into E.
      REMAT_RETURN_IF_ERROR(s.pool->forward(c.cudnn, p.x, p.y));
      if (keep) return kernels::copyOrAdd(c.stream, s.outCount, p.y, reinterpret_cast<float*>(p.extra), false);
      return Status::ok();
    case LayerKind::AvgPool: return s.pool->forward(c.cudnn, p.x, p.y);
    case LayerKind::AdaptiveAvgPool: return kernels::adaptiveAvgPoolForward(c.stream, s.adaptive, p.x, p.y);
    case LayerKind::BatchNorm:
      return s.bn->forward(c.cudnn, p.x, p.params, p.params + s.bn->channels(), p.y,
                           keep ? reinterpret_cast<float*>(p.extra) : nullptr);
    case LayerKind::Linear: return linearForward(s, c, p.x, p.params, p.y);
    case LayerKind::LayerNorm:
      return kernels::layerNormForward(c.stream, s.rows, s.inFeatures, s.epsilon, p.x, p.params, p.y,
                                       keep ? reinterpret_cast<float*>(p.extra) : nullptr, s.layerNormInner);
    case LayerKind::Dropout:
      return kernels::dropoutForward(c.stream, s.outCount, s.dropoutP, rng::streamKey(seed, rng::Purpose::Dropout, l),
                                     p.x, p.y, keep ? reinterpret_cast<std::uint8_t*>(p.extra) : nullptr);
    case LayerKind::BasicBlock:
    case LayerKind::Bottleneck:
    case LayerKind::InvertedResidual:
    case LayerKind::Block: return forwardBlock(s, l, mode, seed, c, p);
    case LayerKind::TransformerBlock: return forwardTransformerBlock(s, l, mode, seed, c, p);
    case LayerKind::TokenEmbedding: return forwardTokenEmbedding(s, l, mode, seed, c, p);
    case LayerKind::LmHead: return forwardLmHead(s, mode, c, p);
    case LayerKind::PatchEmbedding: return forwardPatchEmbedding(s, l, mode, seed, c, p);
    case LayerKind::ClsHead: return forwardClsHead(s, mode, c, p);
    case LayerKind::SwinBlock: return forwardSwinBlock(s, l, mode, seed, c, p);
    case LayerKind::SwinEmbedding: return forwardSwinEmbedding(s, mode, c, p);
    case LayerKind::PatchMerging: return forwardPatchMerging(s, mode, c, p);
    case LayerKind::SwinHead: return forwardSwinHead(s, mode, c, p);
    default: break;
  }
  if (isPointwise(s.kind)) return activationForward(s.kind, c.stream, s.outCount, p.x, p.y);
  return Status::internal("gpu: " + s.label + ": no forward kernel");
}

Status backwardLayer(const LayerState& s, std::size_t l, std::uint64_t seed, const LayerContext& c,
                     const BackwardBuffers& p) {
  if (s.halfBlock) return backwardHalfTransformerBlock(s, l, seed, c, p);
  if (s.halfLmHead) return backwardHalfLmHead(s, c, p);
  if (s.halfClsHead) return backwardHalfClsHead(s, c, p);
  if (s.halfPatch) return backwardHalfPatchEmbedding(s, c, p);
  if (s.halfSwin) return backwardHalfSwinBlock(s, c, p);
  if (s.halfSwinEnd) return backwardHalfSwinEnd(s, c, p);
  if (s.half) return backwardHalfLayer(s, c, p);
  if (s.castsFromHalf) return backwardLayerNormFromHalf(s, c, p);
  switch (s.kind) {
    case LayerKind::Conv2d:
      if (p.dx != nullptr) REMAT_RETURN_IF_ERROR(s.conv->backwardData(c.cudnn, p.dy, p.params, p.dx, p.workspace));
      return s.conv->backwardParams(c.cudnn, p.x, p.dy, p.paramGrads, s.bias ? p.paramGrads + s.biasOffset : nullptr,
                                    p.workspace);
    case LayerKind::MaxPool:
      if (p.dx != nullptr) return s.pool->backward(c.cudnn, p.x, reinterpret_cast<const float*>(p.extra), p.dy, p.dx);
      return Status::ok();
    case LayerKind::AvgPool:
      if (p.dx != nullptr) return s.pool->backward(c.cudnn, p.x, p.y, p.dy, p.dx);
      return Status::ok();
    case LayerKind::AdaptiveAvgPool:
      if (p.dx != nullptr) return kernels::adaptiveAvgPoolBackward(c.stream, s.adaptive, p.dy, p.dx);
      return Status::ok();
    case LayerKind::BatchNorm: {
      float* dx = s.dxInWorkspace ? reinterpret_cast<float*>(p.workspace) : p.dx;
      if (dx == nullptr) return Status::internal("gpu: " + s.label + ": batch norm backward without a place for dx");
      return s.bn->backward(c.cudnn, p.x, p.dy, p.params, reinterpret_cast<const float*>(p.extra), dx, p.paramGrads,
                            p.paramGrads + s.bn->channels());
    }
    case LayerKind::Linear: return linearBackward(s, c, p);
    case LayerKind::LayerNorm:
      return kernels::layerNormBackward(c.stream, s.rows, s.inFeatures, p.x, p.dy, p.params,
                                        reinterpret_cast<const float*>(p.extra), p.dx, p.paramGrads, s.layerNormInner);
    case LayerKind::Dropout:
      if (p.dx != nullptr)
        return kernels::dropoutBackward(c.stream, s.inCount, s.dropoutP, reinterpret_cast<const std::uint8_t*>(p.extra),
                                        p.dy, p.dx);
      return Status::ok();
    case LayerKind::BasicBlock:
    case LayerKind::Bottleneck:
    case LayerKind::InvertedResidual:
    case LayerKind::Block: return backwardBlock(s, c, p);
    case LayerKind::TransformerBlock: return backwardTransformerBlock(s, l, seed, c, p);
    case LayerKind::TokenEmbedding: return backwardTokenEmbedding(s, c, p);
    case LayerKind::LmHead: return backwardLmHead(s, c, p);
    case LayerKind::PatchEmbedding: return backwardPatchEmbedding(s, c, p);
    case LayerKind::ClsHead: return backwardClsHead(s, c, p);
    case LayerKind::SwinBlock: return backwardSwinBlock(s, c, p);
    case LayerKind::SwinEmbedding: return backwardSwinEmbedding(s, c, p);
    case LayerKind::PatchMerging: return backwardPatchMerging(s, c, p);
    case LayerKind::SwinHead: return backwardSwinHead(s, c, p);
    default: break;
  }
  if (isPointwise(s.kind)) return activationBackward(s.kind, c.stream, s.inCount, p.x, p.y, p.dy, p.dx, false);
  return Status::internal("gpu: " + s.label + ": no backward kernel");
}

}  // namespace remat::gpu
