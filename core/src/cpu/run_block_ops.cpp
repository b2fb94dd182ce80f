// The inner ops of a block on the CPU, one at a time (run_blocks.cpp prepares them and runs the
// block's loop): oneDNN primitives for the inner convolutions, batch norms and relus and own kernels
// for the residual add, the channel concatenation (strided copies: a copy needs no primitive, and
// its backward is the same copies the other way), Squeeze-and-Excitation's global average pooling
// and broadcasting product (kernels_broadcast.cpp: oneDNN's reduction of d(y) * x would need a
// full-size temporary that the model does not count), issue 22's broadcasting add, sub and div
// (kernels_arith.cpp; an equal-shape add keeps the residual add's) and ShuffleNetV2's channel shuffle
// (kernels_channels.cpp, copies as well); ConvNeXt's layer norm over the channels is oneDNN's layer
// normalization on the channels-last rows (N*H*W rows of C) and its layer_scale the broadcasting
// product's kernels with a [1, C, 1, 1] parameter (both in bfloat16 under pure bf16); the pool
// branches' max and average pooling run kernels_pool.cpp (the own kernels add into a gradient that
// another branch wrote first). Concat, slice and shuffle read views row by row with the owner's
// stride, every other op reads a contiguous copy gathered into its arena slot first (PyTorch's
// convolution does the same: .contiguous()). In a half block (bf16-mixed) the float pointers carry
// bfloat16 and each op runs its kernels' bfloat16 overloads; a tensor's dtype is the graph's
// (BlockTensor::dtype), so ConvNeXt's layer_scale product and residual add stay float32.
#include "run_block_ops.hpp"

#include <algorithm>

#include "remat/exec/counter_rng.hpp"
#include "remat/model/operators.hpp"

namespace remat::cpu {
namespace {

// A view's values as one contiguous channels-last tensor, in the graph's dtype.
const float* gatherView(const BlockGraph& graph, std::size_t view, const float* values, std::byte* copy) {
  const Shape& s = graph.tensors[view].shape;
  auto* to = reinterpret_cast<float*>(copy);
  if (graph.dtype == DType::BFloat16)
    copyOrAddRows(s[0] * s[2] * s[3], s[1], reinterpret_cast<const BFloat16*>(values), graph.rowChannels(view),
                  reinterpret_cast<BFloat16*>(copy), s[1], false);
  else
    copyOrAddRows(s[0] * s[2] * s[3], s[1], values, graph.rowChannels(view), to, s[1], false);
  return to;
}

// Input j of an op as the op reads it: a view it needs contiguous is gathered into its slot first.
const float* forwardInput(const BlockGraph& graph, const BlockOp& op, std::size_t j, const BlockForwardTensors& tensors,
                          std::byte* workspace) {
  const float* values = tensors.tensor(op.inputs[j]);
  if (op.gatherOffset[j] == kBlockNoOffset) return values;
  return gatherView(graph, op.inputs[j], values, workspace + op.gatherOffset[j]);
}

// The same in the backward, for an input the op's backward reads (from x(l-1) or E).
const float* backwardInput(const BlockGraph& graph, const BlockOp& op, std::size_t j,
                           const BlockBackwardTensors& tensors, std::byte* workspace) {
  const float* values = tensors.value(op.inputs[j]);
  if (op.gatherGradOffset[j] == kBlockNoOffset) return values;
  return gatherView(graph, op.inputs[j], values, workspace + op.gatherGradOffset[j]);
}

// Channels-last concatenation: input j fills the output's channel columns [offset_j, offset_j + C_j)
// of every (n, h, w) row; the backward copies (or adds) those columns back into d(input j). An
// input that is a view is read with its owner's row stride. T: the block's element type (a half
// block's float pointers carry bfloat16).
template <typename T>
const T* as(const float* data) {
  return reinterpret_cast<const T*>(data);
}
template <typename T>
T* as(float* data) {
  return reinterpret_cast<T*>(data);
}

template <typename T>
void concatForward(const BlockGraph& graph, const BlockOp& op, const PreparedBlockOp& p,
                   const BlockForwardTensors& tensors, float* out) {
  Index offset = 0;
  for (std::size_t in : op.inputs) {
    const Index channels = graph.tensors[in].shape[1];
    copyOrAddRows(p.rows, channels, as<T>(tensors.tensor(in)), graph.rowChannels(in), as<T>(out) + offset, p.channels,
                  false);
    offset += channels;
  }
}

template <typename T>
void concatBackward(const BlockGraph& graph, const BlockOp& op, const PreparedBlockOp& p,
                    const BlockBackwardTensors& tensors, const float* dOut) {
  Index offset = 0;
  for (std::size_t j = 0; j < op.inputs.size(); ++j) {
    const Index channels = graph.tensors[op.inputs[j]].shape[1];
    float* d = tensors.grad(op.inputs[j]);
    if (d != nullptr)
      copyOrAddRows(p.rows, channels, as<T>(dOut) + offset, p.channels, as<T>(d), channels, op.gradAccumulate[j]);
    offset += channels;
  }
}

// A channel slice writing the block's output (a copy), and a slice's backward, in the block's dtype.
void sliceForward(bool half, const BlockGraph& graph, const BlockOp& op, const PreparedBlockOp& p, const float* in,
                  float* out) {
  const Index stride = graph.rowChannels(op.inputs[0]), begin = op.layer.channelBegin;
  if (half)
    copyOrAddRows(p.rows, p.channels, as<BFloat16>(in) + begin, stride, as<BFloat16>(out), p.channels, false);
  else
    copyOrAddRows(p.rows, p.channels, in + begin, stride, out, p.channels, false);
}

void sliceBackwardOp(bool half, const BlockGraph& graph, const BlockOp& op, const PreparedBlockOp& p, const float* dOut,
                     float* dIn) {
  const Index inChannels = graph.tensors[op.inputs[0]].shape[1], begin = op.layer.channelBegin;
  if (half)
    sliceBackward(p.rows, inChannels, begin, p.channels, as<BFloat16>(dOut), as<BFloat16>(dIn), op.gradAccumulate[0]);
  else
    sliceBackward(p.rows, inChannels, begin, p.channels, dOut, dIn, op.gradAccumulate[0]);
}

// The pool branches' pools, in the block's dtype; a keep-mode max pool also writes its argmax
// indices (int64, in E).
template <typename T>
void poolForward(const BlockOp& op, const PreparedBlockOp& p, const float* in, float* out, float* indices) {
  if (op.kind == BlockOpKind::AvgPool) return avgPoolForward(p.pool, as<T>(in), as<T>(out));
  maxPoolForward(p.pool, as<T>(in), as<T>(out));
  if (indices != nullptr) maxPoolIndices(p.pool, as<T>(in), as<T>(out), reinterpret_cast<std::int64_t*>(indices));
}

template <typename T>
void poolBackward(const BlockOp& op, const PreparedBlockOp& p, const float* indices, const float* dOut, float* dIn) {
  if (dIn == nullptr) return;
  if (op.kind == BlockOpKind::AvgPool) return avgPoolBackward(p.pool, as<T>(dOut), as<T>(dIn), op.gradAccumulate[0]);
  maxPoolBackward(p.pool, reinterpret_cast<const std::int64_t*>(indices), as<T>(dOut), as<T>(dIn),
                  op.gradAccumulate[0]);
}

// A tensor's extents as the kernels' Dims4, whose data is channels-last [N][H][W][C]: an NCHW tensor
// as it is, [N, F] as [N, F, 1, 1] and [N, S, F] as [N, F, S, 1], whose channels-last order is their
// row-major one (a block of element-wise ops on them keeps x(l-1)'s layout, prepare.cpp).
Dims4 dimsOf(const BlockGraph& graph, std::size_t tensor) {
  const Shape& s = graph.tensors[tensor].shape;
  if (s.size() == 2) return Dims4{s[0], s[1], 1, 1};
  if (s.size() == 3) return Dims4{s[0], s[2], s[1], 1};
  return Dims4{s[0], s[1], s[2], s[3]};
}

// Inner dropout op `index`: the chain-level dropout's kernel and draw on a stream of its own within
// the layer's (rng::at(dropoutKey, index)), each element's keep decision a function of its canonical
// index, so that a recomputation draws the same mask in any plan. Keep mode writes the bool mask to
// E (stats), which is all its backward reads; discard mode keeps none.
ActivationLayout dropoutLayout(const BlockGraph& graph, const BlockOp& op, const PreparedLayer& prepared) {
  const Shape& s = graph.tensors[op.inputs[0]].shape;
  if (s.size() != 4) return prepared.in;  // element-wise ops only: every tensor is x(l-1)'s shape and layout
  ActivationLayout layout;
  layout.batch = s[0];
  layout.channels = s[1];
  layout.height = s[2];
  layout.width = s[3];
  layout.channelsLast = true;
  return layout;
}

const BFloat16* halves(const float* data) { return reinterpret_cast<const BFloat16*>(data); }
BFloat16* halves(float* data) { return reinterpret_cast<BFloat16*>(data); }

// A half block's dropout draws the float32 kernel's mask (kernels_half.cpp): the same elements dropped.
void innerDropoutForward(const BlockGraph& graph, std::size_t index, const PreparedLayer& prepared,
                         std::uint64_t dropoutKey, const float* in, float* out, float* stats) {
  const BlockOp& op = graph.ops[index];
  const ActivationLayout layout = dropoutLayout(graph, op, prepared);
  auto* mask = reinterpret_cast<std::uint8_t*>(stats);
  if (prepared.half)
    dropoutForward(layout, op.layer.dropoutP, rng::at(dropoutKey, index), halves(in), halves(out), mask);
  else
    dropoutForward(layout, op.layer.dropoutP, rng::at(dropoutKey, index), in, out, mask);
}

void innerDropoutBackward(bool half, const BlockOp& op, const PreparedBlockOp& p, const float* stats, const float* dOut,
                          float* dIn) {
  if (dIn == nullptr) return;
  const auto* mask = reinterpret_cast<const std::uint8_t*>(stats);
  if (half)
    dropoutBackward(p.count, op.layer.dropoutP, mask, halves(dOut), halves(dIn), op.gradAccumulate[0]);
  else
    dropoutBackward(p.count, op.layer.dropoutP, mask, dOut, dIn, op.gradAccumulate[0]);
}

// Squeeze-and-Excitation's global pool, in the block's dtype (autocast runs mean and
// adaptive_avg_pool2d in their input's dtype: bfloat16 after a half convolution).
void globalPoolForwardOp(bool half, const Dims4& in, const float* x, float* y) {
  if (half)
    globalAvgPoolForward(in, halves(x), halves(y));
  else
    globalAvgPoolForward(in, x, y);
}

void globalPoolBackwardOp(bool half, const Dims4& in, const float* dy, float* dx, bool accumulate) {
  if (half)
    globalAvgPoolBackward(in, halves(dy), halves(dx), accumulate);
  else
    globalAvgPoolBackward(in, dy, dx, accumulate);
}

// y = a * b; its backward gives each operand d(y) times the other, summed where it was broadcast.
void mulForwardOp(bool half, const BlockGraph& graph, const BlockOp& op, const float* a, const float* b, float* out) {
  const Dims4 o = dimsOf(graph, op.output), da = dimsOf(graph, op.inputs[0]), db = dimsOf(graph, op.inputs[1]);
  if (half)
    mulForward(o, da, db, halves(a), halves(b), halves(out));
  else
    mulForward(o, da, db, a, b, out);
}

void mulBackwardOp(bool half, const BlockGraph& graph, const BlockOp& op, const BlockBackwardTensors& tensors,
                   const float* dOut, std::byte* workspace) {
  const float* values[2] = {backwardInput(graph, op, 0, tensors, workspace),
                            backwardInput(graph, op, 1, tensors, workspace)};
  for (std::size_t j = 0; j < 2; ++j) {
    float* d = tensors.grad(op.inputs[j]);
    if (d == nullptr) continue;
    const Dims4 o = dimsOf(graph, op.output), self = dimsOf(graph, op.inputs[j]),
                other = dimsOf(graph, op.inputs[1 - j]);
    if (half)
      mulBackwardOperand(o, self, other, halves(dOut), halves(values[1 - j]), halves(d), op.gradAccumulate[j]);
    else
      mulBackwardOperand(o, self, other, dOut, values[1 - j], d, op.gradAccumulate[j]);
  }
}

// ConvNeXt's layer_scale, y = gamma * x with gamma [1, C, 1, 1]: the broadcasting product's kernels.
Dims4 gammaDims(const BlockGraph& graph, const BlockOp& op) {
  return Dims4{1, graph.tensors[op.inputs[0]].shape[1], 1, 1};
}

// Pure bf16: gamma, x and their gradients all bfloat16. bf16-mixed: x bfloat16, gamma float32, the
// product float32 (type promotion, memory-model.md 11.7): kernels_half.cpp's mixed kernels.
bool mixedLayerScale(const BlockGraph& graph, const BlockOp& op) {
  return graph.tensors[op.inputs[0]].dtype == DType::BFloat16 && graph.tensors[op.output].dtype == DType::Float32;
}

void layerScaleForward(bool half, const BlockGraph& graph, const BlockOp& op, const float* x, const float* gamma,
                       float* out) {
  const Dims4 o = dimsOf(graph, op.output), in = dimsOf(graph, op.inputs[0]), g = gammaDims(graph, op);
  if (mixedLayerScale(graph, op))
    layerScaleMixedForward(o.n * o.h * o.w, o.c, halves(x), gamma, out);
  else if (half)
    mulForward(o, in, g, halves(x), halves(gamma), halves(out));
  else
    mulForward(o, in, g, x, gamma, out);
}

void layerScaleBackward(bool half, const BlockGraph& graph, const BlockOp& op, const float* x, const float* gamma,
                        const float* dOut, float* dIn, float* dGamma) {
  const Dims4 out = dimsOf(graph, op.output), in = dimsOf(graph, op.inputs[0]), g = gammaDims(graph, op);
  if (mixedLayerScale(graph, op)) {
    layerScaleMixedBackward(out.n * out.h * out.w, out.c, dOut, halves(x), gamma, halves(dIn), op.gradAccumulate[0],
                            dGamma);
    return;
  }
  if (half) {
    if (dIn != nullptr) mulBackwardOperand(out, in, g, halves(dOut), halves(gamma), halves(dIn), op.gradAccumulate[0]);
    mulBackwardOperand(out, g, in, halves(dOut), halves(x), halves(dGamma), true);  // parameter gradients are added
    return;
  }
  if (dIn != nullptr) mulBackwardOperand(out, in, g, dOut, gamma, dIn, op.gradAccumulate[0]);
  mulBackwardOperand(out, g, in, dOut, x, dGamma, true);  // parameter gradients are added
}

template <typename Op>
Result<const Op*> opAs(const PreparedBlockOp& prepared, const std::string& label) {
  const Op* op = std::get_if<Op>(&prepared.op);
  if (op == nullptr) return Status::internal(label + ": an inner op lacks its primitives");
  return op;
}

// Batch norm and layer norm: one call, from the saved input and statistics.
template <typename Norm>
Status normBackward(const DnnlContext& context, const BlockGraph& graph, const BlockOp& op, const PreparedBlockOp& p,
                    const BlockBackwardTensors& tensors, const BackwardBuffers& b, std::byte* scratch,
                    const std::string& label) {
  auto norm = opAs<Norm>(p, label);
  if (!norm) return norm.status();
  return (*norm)->backward(context, backwardInput(graph, op, 0, tensors, b.workspace), tensors.grad(op.output),
                           p.at(b.params, p.weightOffset), tensors.stats(op), tensors.grad(op.inputs[0]),
                           p.at(b.paramGrads, p.weightOffset), scratch);
}

// An inner convolution. In a half block (bf16-mixed) from autocast's copies: its weight copy goes
// to its place in E in keep mode (the backward reads it there) and into its own scratch otherwise.
Status forwardInnerConv(const DnnlContext& context, const PreparedBlockOp& p, ForwardMode mode, const float* in,
                        const ForwardBuffers& b, float* out, std::byte* scratch, const std::string& label) {
  const float* w = p.at(b.params, p.weightOffset);
  const float* bias = p.biasOffset >= 0 ? p.at(b.params, p.biasOffset) : nullptr;
  if (const auto* half = std::get_if<HalfConvOp>(&p.op)) {
    std::byte* copies = mode == ForwardMode::Keep ? b.extra + p.weightCopyOffset : nullptr;
    return half->forward(context, in, w, bias, out, copies, scratch);
  }
  auto conv = opAs<ConvOp>(p, label);
  return conv ? (*conv)->forward(context, in, w, bias, out, scratch) : conv.status();
}

Status backwardInnerConv(const DnnlContext& context, const BlockGraph& graph, const BlockOp& op,
                         const PreparedBlockOp& p, const BlockBackwardTensors& tensors, const BackwardBuffers& b,
                         std::byte* scratch, const std::string& label) {
  const float* x = backwardInput(graph, op, 0, tensors, b.workspace);
  const float* dOut = tensors.grad(op.output);
  float* dIn = tensors.grad(op.inputs[0]);
  float* dw = p.at(b.paramGrads, p.weightOffset);
  float* db = p.biasOffset >= 0 ? p.at(b.paramGrads, p.biasOffset) : nullptr;
  if (const auto* half = std::get_if<HalfConvOp>(&p.op))
    return half->backward(context, x, dOut, b.extra + p.weightCopyOffset, dIn, dw, db, scratch,
                          p.at(b.params, p.weightOffset));
  auto conv = opAs<ConvOp>(p, label);
  return conv ? (*conv)->backward(context, x, dOut, p.at(b.params, p.weightOffset), dIn, dw, db, scratch)
              : conv.status();
}

// The residual add and its backward, in its output's dtype (halves(): the float pointers carry
// bfloat16 in a half block; ConvNeXt's add after layer_scale is float32 under bf16-mixed).
bool isHalf(const BlockGraph& graph, std::size_t tensor) { return graph.tensors[tensor].dtype == DType::BFloat16; }

// A convolution casting a float32 x(l-1) reads its copy in E in the backward, not x(l-1) (in(l) is
// false, memory-model.md 11.7 rule 3).
bool readsCastCopy(const BlockGraph& graph, const BlockOp& op) {
  return op.kind == BlockOpKind::Conv2d && graph.dtype == DType::BFloat16 && op.inputs[0] == 0 &&
         graph.tensors[0].dtype == DType::Float32;
}

// A float32 add may take a bfloat16 operand (ConvNeXt's layer_scale product plus a bfloat16 x(l-1),
// type promotion); its gradient is d(y) rounded to bfloat16 (autograd casts a gradient to its
// input's dtype).
void addForward(const BlockGraph& graph, const BlockOp& op, Index count, const float* a, const float* b, float* out) {
  if (isHalf(graph, op.output)) return add(count, halves(a), halves(b), halves(out));
  const bool halfA = isHalf(graph, op.inputs[0]), halfB = isHalf(graph, op.inputs[1]);
  if (!halfA && !halfB) return add(count, a, b, out);
  addMixed(count, halfA ? b : a, halves(halfA ? a : b), out);
}

void addBackward(const BlockGraph& graph, const BlockOp& op, const PreparedBlockOp& p,
                 const BlockBackwardTensors& tensors, const float* dOut) {
  const bool halfOut = isHalf(graph, op.output);
  for (std::size_t j = 0; j < op.inputs.size(); ++j) {
    float* d = tensors.grad(op.inputs[j]);
    if (d == nullptr) continue;
    if (halfOut)
      copyOrAdd(p.count, halves(dOut), halves(d), op.gradAccumulate[j]);
    else if (!isHalf(graph, op.inputs[j]))
      copyOrAdd(p.count, dOut, d, op.gradAccumulate[j]);
    else if (op.gradAccumulate[j])
      addFloatIntoHalf(p.count, dOut, halves(d));
    else
      castToHalf(p.count, dOut, halves(d));
  }
}

// A broadcasting add (operands of different shapes), sub and div: kernels_arith.cpp, in the block's
// dtype. An equal-shape add keeps the residual add's kernels above.
bool broadcasts(const BlockGraph& graph, const BlockOp& op) {
  return graph.tensors[op.inputs[0]].shape != graph.tensors[op.inputs[1]].shape;
}

BroadcastOp broadcastOpOf(BlockOpKind kind) {
  return kind == BlockOpKind::Add ? BroadcastOp::Add : kind == BlockOpKind::Sub ? BroadcastOp::Sub : BroadcastOp::Div;
}

void broadcastForwardOp(bool half, const BlockGraph& graph, const BlockOp& op, const float* a, const float* b,
                        float* out) {
  const Dims4 o = dimsOf(graph, op.output), da = dimsOf(graph, op.inputs[0]), db = dimsOf(graph, op.inputs[1]);
  if (half)
    broadcastForward(broadcastOpOf(op.kind), o, da, db, halves(a), halves(b), halves(out));
  else
    broadcastForward(broadcastOpOf(op.kind), o, da, db, a, b, out);
}

// Div's backward reads both operands (from x(l-1) or E, gathered when a view); add's and sub's none.
void broadcastBackwardOp(bool half, const BlockGraph& graph, const BlockOp& op, const BlockBackwardTensors& tensors,
                         const float* dOut, std::byte* workspace) {
  const bool reads = op.readsInput && op.readsSecondInput;
  const float* a = reads ? backwardInput(graph, op, 0, tensors, workspace) : nullptr;
  const float* b = reads ? backwardInput(graph, op, 1, tensors, workspace) : nullptr;
  const Dims4 o = dimsOf(graph, op.output), da = dimsOf(graph, op.inputs[0]), db = dimsOf(graph, op.inputs[1]);
  for (int j = 0; j < 2; ++j) {
    float* d = tensors.grad(op.inputs[static_cast<std::size_t>(j)]);
    const bool accumulate = op.gradAccumulate[static_cast<std::size_t>(j)];
    if (d != nullptr && half)
      broadcastBackwardOperand(broadcastOpOf(op.kind), j, o, da, db, halves(dOut), halves(a), halves(b), halves(d),
                               accumulate);
    else if (d != nullptr)
      broadcastBackwardOperand(broadcastOpOf(op.kind), j, o, da, db, dOut, a, b, d, accumulate);
  }
}

}  // namespace

Status forwardInnerOp(const DnnlContext& context, const PreparedLayer& prepared, std::size_t index, ForwardMode mode,
                      std::uint64_t dropoutKey, const BlockForwardTensors& tensors, const ForwardBuffers& b,
                      std::byte* scratch) {
  const BlockGraph& graph = *prepared.block;
  const bool half = graph.dtype == DType::BFloat16;  // x(l) may be float32 all the same (prepare.cpp)
  const BlockOp& op = graph.ops[index];
  const PreparedBlockOp& p = prepared.blockOps[index];
  const float* in = forwardInput(graph, op, 0, tensors, b.workspace);
  float* out = tensors.tensor(op.output);
  const float* w = p.at(b.params, p.weightOffset);
  Status status;
  if (op.kind == BlockOpKind::Conv2d) {
    status = forwardInnerConv(context, p, mode, in, b, out, scratch, prepared.label);
  } else if (op.kind == BlockOpKind::BatchNorm) {
    auto norm = opAs<BatchNormOp>(p, prepared.label);
    status = norm ? (*norm)->forward(context, in, w, out, tensors.stats(op), scratch) : norm.status();
  } else if (op.kind == BlockOpKind::LayerNorm) {
    auto norm = opAs<LayerNormOp>(p, prepared.label);
    status = norm ? (*norm)->forward(context, in, w, out, tensors.stats(op), scratch) : norm.status();
  } else if (op.kind == BlockOpKind::LayerScale) {
    layerScaleForward(half, graph, op, in, w, out);
  } else if (op.kind == BlockOpKind::Add && !broadcasts(graph, op)) {
    addForward(graph, op, p.count, in, forwardInput(graph, op, 1, tensors, b.workspace), out);
  } else if (op.kind == BlockOpKind::Add || op.kind == BlockOpKind::Sub || op.kind == BlockOpKind::Div) {
    broadcastForwardOp(prepared.half, graph, op, in, forwardInput(graph, op, 1, tensors, b.workspace), out);
  } else if (op.kind == BlockOpKind::Concat) {
    half ? concatForward<BFloat16>(graph, op, p, tensors, out) : concatForward<float>(graph, op, p, tensors, out);
  } else if (op.kind == BlockOpKind::GlobalAvgPool) {
    globalPoolForwardOp(half, dimsOf(graph, op.inputs[0]), in, out);
  } else if (op.kind == BlockOpKind::Mul) {
    mulForwardOp(half, graph, op, in, forwardInput(graph, op, 1, tensors, b.workspace), out);
  } else if (op.kind == BlockOpKind::Slice) {  // the block's output: a copy
    sliceForward(half, graph, op, p, in, out);
  } else if (op.kind == BlockOpKind::ChannelShuffle) {
    if (half)
      channelShuffleForward(p.rows, p.channels, op.layer.groups, as<BFloat16>(in), graph.rowChannels(op.inputs[0]),
                            as<BFloat16>(out));
    else
      channelShuffleForward(p.rows, p.channels, op.layer.groups, in, graph.rowChannels(op.inputs[0]), out);
  } else if (op.kind == BlockOpKind::MaxPool || op.kind == BlockOpKind::AvgPool) {
    // keep mode: a max pool's argmax, which its backward reads, in E (null otherwise)
    half ? poolForward<BFloat16>(op, p, in, out, tensors.stats(op))
         : poolForward<float>(op, p, in, out, tensors.stats(op));
  } else if (op.kind == BlockOpKind::Dropout) {
    innerDropoutForward(graph, index, prepared, dropoutKey, in, out, tensors.stats(op));
  } else {  // a pointwise activation
    auto eltwise = opAs<EltwiseOp>(p, prepared.label);
    status = eltwise ? (*eltwise)->forward(context, in, out, scratch) : eltwise.status();
  }
  return status;
}

Status backwardInnerOp(const DnnlContext& context, const PreparedLayer& prepared, std::size_t index,
                       const BlockBackwardTensors& tensors, const BackwardBuffers& b, std::byte* scratch) {
  const BlockGraph& graph = *prepared.block;
  const bool half = graph.dtype == DType::BFloat16;
  const BlockOp& op = graph.ops[index];
  const PreparedBlockOp& p = prepared.blockOps[index];
  const float* dOut = tensors.grad(op.output);
  float* dIn = tensors.grad(op.inputs[0]);
  if (!readsCastCopy(graph, op)) REMAT_RETURN_IF_ERROR(tensors.checkReads(op, "cpu: " + prepared.label));
  Status status;
  if (op.kind == BlockOpKind::Conv2d) {
    status = backwardInnerConv(context, graph, op, p, tensors, b, scratch, prepared.label);
  } else if (op.kind == BlockOpKind::BatchNorm) {
    status = normBackward<BatchNormOp>(context, graph, op, p, tensors, b, scratch, prepared.label);
  } else if (op.kind == BlockOpKind::LayerNorm) {
    status = normBackward<LayerNormOp>(context, graph, op, p, tensors, b, scratch, prepared.label);
  } else if (op.kind == BlockOpKind::LayerScale) {
    layerScaleBackward(half, graph, op, backwardInput(graph, op, 0, tensors, b.workspace),
                       p.at(b.params, p.weightOffset), dOut, dIn, p.at(b.paramGrads, p.weightOffset));
  } else if (op.kind == BlockOpKind::Add && !broadcasts(graph, op)) {
    addBackward(graph, op, p, tensors, dOut);
  } else if (op.kind == BlockOpKind::Add || op.kind == BlockOpKind::Sub || op.kind == BlockOpKind::Div) {
    broadcastBackwardOp(prepared.half, graph, op, tensors, dOut, b.workspace);
  } else if (op.kind == BlockOpKind::Concat) {
    half ? concatBackward<BFloat16>(graph, op, p, tensors, dOut) : concatBackward<float>(graph, op, p, tensors, dOut);
  } else if (op.kind == BlockOpKind::GlobalAvgPool) {
    if (dIn != nullptr) globalPoolBackwardOp(half, dimsOf(graph, op.inputs[0]), dOut, dIn, op.gradAccumulate[0]);
  } else if (op.kind == BlockOpKind::Mul) {
    mulBackwardOp(half, graph, op, tensors, dOut, b.workspace);
  } else if (op.kind == BlockOpKind::Slice) {
    if (dIn != nullptr) sliceBackwardOp(half, graph, op, p, dOut, dIn);
  } else if (op.kind == BlockOpKind::ChannelShuffle) {
    if (dIn != nullptr && half)
      channelShuffleBackward(p.rows, p.channels, op.layer.groups, as<BFloat16>(dOut), as<BFloat16>(dIn),
                             op.gradAccumulate[0]);
    else if (dIn != nullptr)
      channelShuffleBackward(p.rows, p.channels, op.layer.groups, dOut, dIn, op.gradAccumulate[0]);
  } else if (op.kind == BlockOpKind::MaxPool || op.kind == BlockOpKind::AvgPool) {
    half ? poolBackward<BFloat16>(op, p, tensors.stats(op), dOut, dIn)
         : poolBackward<float>(op, p, tensors.stats(op), dOut, dIn);
  } else if (op.kind == BlockOpKind::Dropout) {
    innerDropoutBackward(prepared.half, op, p, tensors.stats(op), dOut, dIn);
  } else {  // a pointwise activation, from its output or input as its description says
    auto eltwise = opAs<EltwiseOp>(p, prepared.label);
    if (!eltwise) return eltwise.status();
    const float* saved =
        (*eltwise)->savedIsOutput() ? tensors.value(op.output) : backwardInput(graph, op, 0, tensors, b.workspace);
    status = (*eltwise)->backward(context, saved, dOut, dIn, scratch);
  }
  return status;
}

}  // namespace remat::cpu
