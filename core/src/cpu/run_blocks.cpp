// Blocks on the CPU: block.hpp's protocol (inner tensors at their arena offsets in the ONE
// forward workspace, saved ones and batch-norm statistics in E in keep mode; inner gradients in the
// ONE backward workspace), each inner op run by run_block_ops.cpp (its primitives and kernels). A
// channel slice inside a block is a view (block.hpp): it runs nothing. Each workspace holds, after
// its arena at a 256-byte boundary, the scratch of the inner op that needs the most (ops run one at
// a time), so a block's wf / wb are the arena plus that scratch.
// Under bf16-mixed the same runner runs a half block (PreparedLayer::half; memory-model.md 11.7):
// arenas laid out for bfloat16, the float pointers carrying bfloat16, the batch norms and
// activations on bf16 primitives, each convolution a HalfConvOp whose weight copy lies in E after
// the graph's saved tensors (PreparedBlockOp::weightCopyOffset), the add and Squeeze-and-Excitation's
// global pool and product, issue 22's add, sub, div and dropout, the pool branches' pools and the
// concat in bfloat16 (the kernels' bfloat16 overloads), ConvNeXt's layer norm on bf16 data;
// prepare.cpp admits only blocks of those inner ops. A tensor's dtype is the graph's
// (BlockTensor::dtype): in a bf16-mixed ConvNeXt block x(l-1), layer_scale's product and the
// residual add are float32 (type promotion), the first convolution casting x(l-1) as a chain-level
// conv does.
#include <algorithm>
#include <cstring>

#include "device_impl.hpp"
#include "remat/exec/block_buffers.hpp"
#include "remat/model/operators.hpp"
#include "run_block_ops.hpp"

namespace remat::cpu {
namespace {

std::uint64_t scratchStart(std::uint64_t arenaBytes) {
  return (arenaBytes + kBlockTensorAlignBytes - 1) / kBlockTensorAlignBytes * kBlockTensorAlignBytes;
}

// The primitives of one inner op; d(input) per its gradAccumulate flag (none for layer 1's x0);
// `half`: bfloat16 data (bf16-mixed), the convolution from autocast's copies (HalfConvOp); `pure`:
// pure bf16, bfloat16 parameters read in place (no copies).
Result<KindOp> innerOp(const DnnlContext& context, const BlockGraph& graph, const BlockOp& op, bool firstLayer,
                       bool half, bool pure, const std::string& label) {
  const Shape& in = graph.tensors[op.inputs[0]].shape;
  const Shape& out = graph.tensors[op.output].shape;
  const InputGrad grad =
      op.inputs[0] == 0 && firstLayer ? InputGrad::None : (op.gradAccumulate[0] ? InputGrad::Add : InputGrad::Write);
  const std::string where = label + ", inner op '" + op.layer.name + "'";
  auto wrap = [](auto made) -> Result<KindOp> {
    if (!made) return made.status();
    return KindOp(std::move(made).value());
  };
  const auto type = half ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
  switch (op.kind) {
    case BlockOpKind::Conv2d:
      if (half)  // a float32 x(l-1) (bf16-mixed, after a float32 layer): the conv casts it, as autocast
        return wrap(HalfConvOp::create(context, convGeometry(op.layer, in, out), op.layer.bias,
                                       graph.tensors[op.inputs[0]].dtype == DType::Float32, grad, where, pure));
      return wrap(ConvOp::create(context, convGeometry(op.layer, in, out), op.layer.bias, grad, where));
    case BlockOpKind::BatchNorm:
      return wrap(BatchNormOp::create(
          context, dnnl::memory::desc({in[0], in[1], in[2], in[3]}, type, dnnl::memory::format_tag::nhwc), in[1], grad,
          where, pure));
    case BlockOpKind::LayerNorm:  // over the channels: channels-last data is N*H*W rows of C
      return wrap(LayerNormOp::create(context, in[0] * in[2] * in[3], in[1], static_cast<float>(op.layer.epsilon), grad,
                                      where, type, pure));
    case BlockOpKind::LayerScale:
    case BlockOpKind::Add:
    case BlockOpKind::Concat:
    case BlockOpKind::GlobalAvgPool:
    case BlockOpKind::Mul:
    case BlockOpKind::Sub:
    case BlockOpKind::Div:
    case BlockOpKind::Slice:
    case BlockOpKind::ChannelShuffle:
    case BlockOpKind::MaxPool:
    case BlockOpKind::AvgPool:
    case BlockOpKind::Dropout: return KindOp{};
    default: break;
  }
  const std::optional<LayerKind> layer = blockOpInfo(op.kind).layer;
  if (layer && isPointwise(*layer))
    return wrap(EltwiseOp::create(context, static_cast<Index>(elementCount(out)), *layer, grad, where, type));
  return Status::internal(where + ": unknown inner op kind");
}

std::pair<std::uint64_t, std::uint64_t> scratchBytes(const KindOp& op) {
  return std::visit(
      [](const auto& o) -> std::pair<std::uint64_t, std::uint64_t> {
        if constexpr (std::is_same_v<std::decay_t<decltype(o)>, std::monostate>)
          return {0, 0};
        else
          return {o.forwardScratchBytes(), o.backwardScratchBytes()};
      },
      op);
}

}  // namespace

Status prepareBlockOps(const DnnlContext& context, const BlockGraph& graph, bool firstLayer, PreparedLayer& prepared) {
  Index offset = 0;
  std::uint64_t fwdScratch = 0, bwdScratch = 0;
  std::uint64_t copyOffset = graph.extraBytes;  // half: the weight copies follow the saved tensors in E
  for (const BlockOp& op : graph.ops) {
    PreparedBlockOp p;
    const Shape& out = graph.tensors[op.output].shape;
    p.count = static_cast<Index>(elementCount(out));
    p.weightOffset = offset;
    if (op.kind == BlockOpKind::Conv2d && op.layer.bias)
      p.biasOffset = offset + static_cast<Index>(op.paramCount) - static_cast<Index>(op.layer.outChannels);
    if (op.kind == BlockOpKind::Concat || op.kind == BlockOpKind::Slice || op.kind == BlockOpKind::ChannelShuffle) {
      p.rows = out[0] * out[2] * out[3];
      p.channels = out[1];
    }
    if (op.kind == BlockOpKind::MaxPool || op.kind == BlockOpKind::AvgPool)
      p.pool = poolGeometry(op.layer, graph.tensors[op.inputs[0]].shape, out);
    p.halfParams = prepared.halfParams;
    auto made =
        innerOp(context, graph, op, firstLayer, graph.dtype == DType::BFloat16, prepared.halfParams, prepared.label);
    if (!made) return made.status();
    p.op = std::move(made).value();
    if (const auto* conv = std::get_if<HalfConvOp>(&p.op)) {  // its copies: [input cast, when it casts][weights]
      p.weightCopyOffset = copyOffset;
      copyOffset += conv->copies().inputCastBytes() + conv->copies().weightCopyBytes();
    }
    const auto [fwd, bwd] = scratchBytes(p.op);
    fwdScratch = std::max(fwdScratch, fwd);
    bwdScratch = std::max(bwdScratch, bwd);
    offset += static_cast<Index>(op.paramCount);
    prepared.blockOps.push_back(std::move(p));
  }
  prepared.blockFwdScratchOffset = scratchStart(graph.fwdWorkspaceBytes);
  prepared.blockBwdScratchOffset = scratchStart(graph.bwdWorkspaceBytes);
  prepared.requiredFwdWorkspace =
      fwdScratch > 0 ? prepared.blockFwdScratchOffset + fwdScratch : graph.fwdWorkspaceBytes;
  prepared.requiredBwdWorkspace =
      bwdScratch > 0 ? prepared.blockBwdScratchOffset + bwdScratch : graph.bwdWorkspaceBytes;
  return Status::ok();
}

Status forwardBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                    std::uint64_t dropoutKey, const ForwardBuffers& b) {
  const BlockGraph& graph = *prepared.block;
  const BlockForwardTensors tensors(graph, mode, b);
  REMAT_RETURN_IF_ERROR(tensors.check("cpu: " + prepared.label));
  std::byte* scratch = b.workspace != nullptr ? b.workspace + prepared.blockFwdScratchOffset : nullptr;
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    if (graph.tensors[graph.ops[i].output].isView()) continue;  // a channel slice: its owner holds its values
    REMAT_RETURN_IF_ERROR(forwardInnerOp(context, prepared, i, mode, dropoutKey, tensors, b, scratch));
  }
  return Status::ok();
}

namespace {

// --grads static (memory-model.md 11.2): inner op i's parameter gradients made in the fresh buffer,
// then added into the layer's, as PyTorch's AccumulateGrad adds each op's before the next op's
// backward runs. In the parameters' dtype: float32, or bfloat16 under pure bf16.
Status backwardWithFreshGradient(const DnnlContext& context, const PreparedLayer& prepared, std::size_t i,
                                 const BlockBackwardTensors& tensors, const BackwardBuffers& b, std::byte* scratch) {
  const PreparedBlockOp& p = prepared.blockOps[i];
  const auto count = static_cast<Index>(prepared.block->ops[i].paramCount);
  const std::uint64_t elementBytes = p.halfParams ? sizeof(BFloat16) : sizeof(float);
  std::memset(b.freshParamGrads, 0, static_cast<std::size_t>(count) * elementBytes);
  BackwardBuffers fresh = b;
  fresh.paramGrads = freshGradientBase(b.freshParamGrads, static_cast<std::uint64_t>(p.weightOffset), elementBytes);
  REMAT_RETURN_IF_ERROR(backwardInnerOp(context, prepared, i, tensors, fresh, scratch));
  if (p.halfParams)
    addHalfIntoHalf(count, reinterpret_cast<const BFloat16*>(b.freshParamGrads),
                    p.at(reinterpret_cast<BFloat16*>(b.paramGrads), p.weightOffset));
  else
    addInto(count, reinterpret_cast<const float*>(b.freshParamGrads), b.paramGrads + p.weightOffset);
  return Status::ok();
}

}  // namespace

// Ops in reverse; the inner gradients in the ONE backward workspace at their gradient offsets;
// saved tensors and statistics read from E (written in keep mode).
Status backwardBlock(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const BlockGraph& graph = *prepared.block;
  const BlockBackwardTensors tensors(graph, b);
  REMAT_RETURN_IF_ERROR(tensors.check("cpu: " + prepared.label));
  std::byte* scratch = b.workspace != nullptr ? b.workspace + prepared.blockBwdScratchOffset : nullptr;
  for (std::size_t i = graph.ops.size(); i-- > 0;) {
    if (b.freshParamGrads != nullptr && graph.ops[i].paramCount > 0)
      REMAT_RETURN_IF_ERROR(backwardWithFreshGradient(context, prepared, i, tensors, b, scratch));
    else
      REMAT_RETURN_IF_ERROR(backwardInnerOp(context, prepared, i, tensors, b, scratch));
  }
  return Status::ok();
}

}  // namespace remat::cpu
