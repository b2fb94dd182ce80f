// Dispatch of the primitive kinds and of the residual blocks to the CPU kernels. The buffers were
// checked by CpuDevice (sizes, presence per the model's in / out / e flags) before these run.
#include "device_impl.hpp"
#include "remat/exec/block_buffers.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::cpu {
namespace {

Index elements(const ActivationLayout& layout) { return layout.batch * layout.perSample(); }

}  // namespace

Status forwardLayer(const PreparedLayer& prepared, std::size_t l, ForwardMode mode, std::uint64_t seed,
                    const ForwardBuffers& b) {
  const bool keep = mode == ForwardMode::Keep;
  switch (prepared.kind) {
    case LayerKind::Conv2d: {
      const float* bias = prepared.bias ? b.params + prepared.params.back().offset : nullptr;
      conv2dForward(prepared.conv, b.x, b.params, bias, b.y);
      return Status::ok();
    }
    case LayerKind::Relu: reluForward(elements(prepared.out), b.x, b.y); return Status::ok();
    case LayerKind::Relu6: relu6Forward(elements(prepared.out), b.x, b.y); return Status::ok();
    case LayerKind::MaxPool: maxPoolForward(prepared.pool, b.x, b.y); return Status::ok();
    case LayerKind::AvgPool: avgPoolForward(prepared.pool, b.x, b.y); return Status::ok();
    case LayerKind::AdaptiveAvgPool: adaptiveAvgPoolForward(prepared.pool, b.x, b.y); return Status::ok();
    case LayerKind::BatchNorm:
      batchNormForward(prepared.bnRows, prepared.bnChannels, b.x, b.params, b.params + prepared.bnChannels, b.y,
                       keep ? reinterpret_cast<float*>(b.extra) : nullptr);
      return Status::ok();
    case LayerKind::Linear: {
      const float* bias = prepared.bias ? b.params + prepared.inFeatures * prepared.outFeatures : nullptr;
      linearForward(prepared.in.batch, prepared.inFeatures, prepared.outFeatures, b.x, b.params, bias, b.y);
      return Status::ok();
    }
    case LayerKind::Dropout:
      dropoutForward(prepared.in, prepared.dropoutP, rng::streamKey(seed, rng::Purpose::Dropout, l), b.x, b.y,
                     keep ? reinterpret_cast<std::uint8_t*>(b.extra) : nullptr);
      return Status::ok();
    case LayerKind::BasicBlock:
    case LayerKind::Bottleneck:
    case LayerKind::InvertedResidual: return forwardBlock(prepared, mode, b);
    default: break;
  }
  return Status::internal("cpu: " + prepared.label + ": no forward kernel");
}

Status backwardLayer(const PreparedLayer& prepared, const BackwardBuffers& b) {
  const Index count = elements(prepared.in);
  switch (prepared.kind) {
    case LayerKind::Conv2d: {
      if (b.dx != nullptr) conv2dBackwardData(prepared.conv, b.dy, b.params, b.dx);
      float* db = prepared.bias ? b.paramGrads + prepared.params.back().offset : nullptr;
      conv2dBackwardParams(prepared.conv, b.x, b.dy, b.paramGrads, db);
      return Status::ok();
    }
    case LayerKind::Relu:
      if (b.dx != nullptr) reluBackward(count, b.y, b.dy, b.dx);
      return Status::ok();
    case LayerKind::Relu6:
      if (b.dx != nullptr) relu6Backward(count, b.y, b.dy, b.dx);
      return Status::ok();
    case LayerKind::MaxPool:
      if (b.dx != nullptr) maxPoolBackward(prepared.pool, b.x, b.y, b.dy, b.dx);
      return Status::ok();
    case LayerKind::AvgPool:
      if (b.dx != nullptr) avgPoolBackward(prepared.pool, b.dy, b.dx);
      return Status::ok();
    case LayerKind::AdaptiveAvgPool:
      if (b.dx != nullptr) adaptiveAvgPoolBackward(prepared.pool, b.dy, b.dx);
      return Status::ok();
    case LayerKind::BatchNorm:
      batchNormBackward(prepared.bnRows, prepared.bnChannels, b.x, b.dy, b.params, reinterpret_cast<const float*>(b.extra),
                        b.dx, b.paramGrads, b.paramGrads + prepared.bnChannels);
      return Status::ok();
    case LayerKind::Linear: {
      float* db = prepared.bias ? b.paramGrads + prepared.inFeatures * prepared.outFeatures : nullptr;
      linearBackward(prepared.in.batch, prepared.inFeatures, prepared.outFeatures, b.x, b.params, b.dy, b.dx, b.paramGrads, db);
      return Status::ok();
    }
    case LayerKind::Dropout:
      if (b.dx != nullptr)
        dropoutBackward(count, prepared.dropoutP, reinterpret_cast<const std::uint8_t*>(b.extra), b.dy, b.dx);
      return Status::ok();
    case LayerKind::BasicBlock:
    case LayerKind::Bottleneck:
    case LayerKind::InvertedResidual: return backwardBlock(prepared, b);
    default: break;
  }
  return Status::internal("cpu: " + prepared.label + ": no backward kernel");
}

// A block's forward: inner tensors live in the ONE workspace at their arena offsets, or, in keep
// mode, saved ones in E at their extras offsets (block.hpp's protocol).
Status forwardBlock(const PreparedLayer& prepared, ForwardMode mode, const ForwardBuffers& b) {
  const BlockGraph& graph = *prepared.block;
  const BlockForwardTensors tensors(graph, mode, b);
  REMAT_RETURN_IF_ERROR(tensors.check("cpu: " + prepared.label));
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const BlockOp& op = graph.ops[i];
    const BlockOpPlan& p = prepared.blockOps[i];
    const float* in = tensors.tensor(op.inputs[0]);
    float* out = tensors.tensor(op.output);
    const float* w = b.params + p.weightOffset;
    switch (op.kind) {
      case BlockOpKind::Conv2d: conv2dForward(p.conv, in, w, nullptr, out); break;
      case BlockOpKind::BatchNorm:
        batchNormForward(p.rows, p.channels, in, w, w + p.channels, out, tensors.stats(op));
        break;
      case BlockOpKind::Relu: reluForward(p.count, in, out); break;
      case BlockOpKind::Relu6: relu6Forward(p.count, in, out); break;
      case BlockOpKind::Add: add(p.count, in, tensors.tensor(op.inputs[1]), out); break;
    }
  }
  return Status::ok();
}

// A block's backward: ops in reverse; inner gradients in the ONE backward workspace at their
// gradient offsets; saved tensors and statistics read from E (written in keep mode).
Status backwardBlock(const PreparedLayer& prepared, const BackwardBuffers& b) {
  const BlockGraph& graph = *prepared.block;
  const BlockBackwardTensors tensors(graph, b);
  const std::string where = "cpu: " + prepared.label;
  REMAT_RETURN_IF_ERROR(tensors.check(where));
  for (std::size_t i = graph.ops.size(); i-- > 0;) {
    const BlockOp& op = graph.ops[i];
    const BlockOpPlan& p = prepared.blockOps[i];
    const float* dOut = tensors.grad(op.output);
    float* dIn = tensors.grad(op.inputs[0]);
    const bool accumulate = op.gradAccumulate[0];
    const float* w = b.params + p.weightOffset;
    float* dw = b.paramGrads + p.weightOffset;
    REMAT_RETURN_IF_ERROR(tensors.checkReads(op, where));
    switch (op.kind) {
      case BlockOpKind::Conv2d:
        if (dIn != nullptr) conv2dBackwardData(p.conv, dOut, w, dIn, accumulate);
        conv2dBackwardParams(p.conv, tensors.value(op.inputs[0]), dOut, dw, nullptr);
        break;
      case BlockOpKind::BatchNorm:
        batchNormBackward(p.rows, p.channels, tensors.value(op.inputs[0]), dOut, w, tensors.stats(op), dIn, dw,
                          dw + p.channels, accumulate);
        break;
      case BlockOpKind::Relu:
        if (dIn != nullptr) reluBackward(p.count, tensors.value(op.output), dOut, dIn, accumulate);
        break;
      case BlockOpKind::Relu6:
        if (dIn != nullptr) relu6Backward(p.count, tensors.value(op.output), dOut, dIn, accumulate);
        break;
      case BlockOpKind::Add:
        for (std::size_t j = 0; j < op.inputs.size(); ++j) {
          float* d = tensors.grad(op.inputs[j]);
          if (d != nullptr) copyOrAdd(p.count, dOut, d, op.gradAccumulate[j]);
        }
        break;
    }
  }
  return Status::ok();
}

}  // namespace remat::cpu
