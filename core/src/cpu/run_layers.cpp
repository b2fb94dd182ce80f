// Dispatch of the primitive kinds to their oneDNN primitives or own kernels. The buffers were
// checked by CpuDevice (sizes, presence per the model's in / out / e flags) before these run; the
// workspace holds at least the layer's required scratch. Under bf16-mixed the kinds whose
// bfloat16 kernels differ go to run_half.cpp; batch norm, the activations and blocks run here in
// either dtype (the pointers carry bfloat16 for a half layer).
#include "device_impl.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/model/operators.hpp"

namespace remat::cpu {
namespace {

Index elements(const ActivationLayout& layout) { return layout.batch * layout.perSample(); }

template <typename Op>
Result<const Op*> opOf(const PreparedLayer& prepared) {
  const Op* op = std::get_if<Op>(&prepared.op);
  if (op == nullptr) return Status::internal("cpu: " + prepared.label + ": the layer lacks its primitives");
  return op;
}

const float* biasOf(const PreparedLayer& prepared, const float* params) {
  return prepared.biasOffset >= 0 ? params + prepared.biasOffset : nullptr;
}
float* biasOf(const PreparedLayer& prepared, float* params) {
  return prepared.biasOffset >= 0 ? params + prepared.biasOffset : nullptr;
}

// A keep-mode max pooling also writes its argmax indices into E (int64, memory-model.md 5.1).
Status forwardPool(const DnnlContext& context, const PreparedLayer& prepared, bool keep, const ForwardBuffers& b) {
  if (prepared.kind == LayerKind::AdaptiveAvgPool) {
    adaptiveAvgPoolForward(prepared.pool, b.x, b.y);
    return Status::ok();
  }
  if (prepared.ownAvgPool) {
    avgPoolForward(prepared.pool, b.x, b.y);
    return Status::ok();
  }
  auto pool = opOf<PoolOp>(prepared);
  if (!pool) return pool.status();
  REMAT_RETURN_IF_ERROR((*pool)->forward(context, b.x, b.y, b.workspace));
  if (prepared.kind == LayerKind::MaxPool && keep)
    maxPoolIndices(prepared.pool, b.x, b.y, reinterpret_cast<std::int64_t*>(b.extra));
  return Status::ok();
}

Status backwardPool(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  if (b.dx == nullptr) return Status::ok();
  switch (prepared.kind) {
    case LayerKind::MaxPool:
      maxPoolBackward(prepared.pool, reinterpret_cast<const std::int64_t*>(b.extra), b.dy, b.dx);
      return Status::ok();
    case LayerKind::AdaptiveAvgPool: adaptiveAvgPoolBackward(prepared.pool, b.dy, b.dx); return Status::ok();
    default: break;
  }
  if (prepared.ownAvgPool) {
    avgPoolBackward(prepared.pool, b.dy, b.dx);
    return Status::ok();
  }
  auto pool = opOf<PoolOp>(prepared);
  if (!pool) return pool.status();
  return (*pool)->backward(context, b.dy, b.dx, b.workspace);
}

}  // namespace

Status forwardLayer(const DnnlContext& context, const PreparedLayer& prepared, std::size_t l, ForwardMode mode,
                    std::uint64_t seed, const ForwardBuffers& b) {
  if (prepared.half && hasOwnHalfDispatch(prepared.kind)) return forwardHalfLayer(context, prepared, l, mode, seed, b);
  const bool keep = mode == ForwardMode::Keep;
  const std::uint64_t dropoutKey = rng::streamKey(seed, rng::Purpose::Dropout, l);
  switch (prepared.kind) {
    case LayerKind::Conv2d: {
      auto conv = opOf<ConvOp>(prepared);
      return conv ? (*conv)->forward(context, b.x, b.params, biasOf(prepared, b.params), b.y, b.workspace)
                  : conv.status();
    }
    case LayerKind::Linear: {
      auto linear = opOf<LinearOp>(prepared);
      return linear ? (*linear)->forward(context, b.x, b.params, biasOf(prepared, b.params), b.y, b.workspace)
                    : linear.status();
    }
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool: return forwardPool(context, prepared, keep, b);
    case LayerKind::BatchNorm: {
      auto norm = opOf<BatchNormOp>(prepared);
      float* stats = keep ? reinterpret_cast<float*>(b.extra) : nullptr;
      return norm ? (*norm)->forward(context, b.x, b.params, b.y, stats, b.workspace) : norm.status();
    }
    case LayerKind::LayerNorm: {
      if (prepared.castsFromHalf) return forwardCastLayerNorm(context, prepared, mode, b);
      auto norm = opOf<LayerNormOp>(prepared);
      float* stats = keep ? reinterpret_cast<float*>(b.extra) : nullptr;
      return norm ? (*norm)->forward(context, b.x, b.params, b.y, stats, b.workspace) : norm.status();
    }
    case LayerKind::Dropout:
      dropoutForward(prepared.in, prepared.dropoutP, dropoutKey, b.x, b.y,
                     keep ? reinterpret_cast<std::uint8_t*>(b.extra) : nullptr);
      return Status::ok();
    case LayerKind::BasicBlock:
    case LayerKind::Bottleneck:
    case LayerKind::InvertedResidual:
    case LayerKind::Block: return forwardBlock(context, prepared, mode, dropoutKey, b);
    case LayerKind::TransformerBlock: return forwardTransformerBlock(context, prepared, mode, dropoutKey, b);
    case LayerKind::TokenEmbedding: return forwardTokenEmbedding(context, prepared, mode, dropoutKey, b);
    case LayerKind::LmHead: return forwardLmHead(context, prepared, mode, b);
    case LayerKind::PatchEmbedding: return forwardPatchEmbedding(context, prepared, mode, dropoutKey, b);
    case LayerKind::ClsHead: return forwardClsHead(context, prepared, mode, b);
    case LayerKind::SwinEmbedding: return forwardSwinEmbedding(context, prepared, mode, b);
    case LayerKind::SwinBlock: return forwardSwinBlock(context, prepared, mode, dropoutKey, b);
    case LayerKind::PatchMerging: return forwardPatchMerging(context, prepared, mode, b);
    case LayerKind::SwinHead: return forwardSwinHead(context, prepared, mode, b);
    default: break;
  }
  if (isPointwise(prepared.kind)) {
    auto eltwise = opOf<EltwiseOp>(prepared);
    return eltwise ? (*eltwise)->forward(context, b.x, b.y, b.workspace) : eltwise.status();
  }
  return Status::internal("cpu: " + prepared.label + ": no forward kernel");
}

Status backwardLayer(const DnnlContext& context, const PreparedLayer& prepared, std::uint64_t dropoutKey,
                     const BackwardBuffers& b) {
  if (prepared.half && hasOwnHalfDispatch(prepared.kind)) return backwardHalfLayer(context, prepared, b);
  switch (prepared.kind) {
    case LayerKind::Conv2d: {
      auto conv = opOf<ConvOp>(prepared);
      return conv ? (*conv)->backward(context, b.x, b.dy, b.params, b.dx, b.paramGrads, biasOf(prepared, b.paramGrads),
                                      b.workspace)
                  : conv.status();
    }
    case LayerKind::Linear: {
      auto linear = opOf<LinearOp>(prepared);
      return linear ? (*linear)->backward(context, b.x, b.dy, b.params, b.dx, b.paramGrads,
                                          biasOf(prepared, b.paramGrads), b.workspace)
                    : linear.status();
    }
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool: return backwardPool(context, prepared, b);
    case LayerKind::BatchNorm: {
      auto norm = opOf<BatchNormOp>(prepared);
      return norm ? (*norm)->backward(context, b.x, b.dy, b.params, reinterpret_cast<const float*>(b.extra), b.dx,
                                      b.paramGrads, b.workspace)
                  : norm.status();
    }
    case LayerKind::LayerNorm: {
      if (prepared.castsFromHalf) return backwardCastLayerNorm(context, prepared, b);
      auto norm = opOf<LayerNormOp>(prepared);
      return norm ? (*norm)->backward(context, b.x, b.dy, b.params, reinterpret_cast<const float*>(b.extra), b.dx,
                                      b.paramGrads, b.workspace)
                  : norm.status();
    }
    case LayerKind::Dropout:
      if (b.dx != nullptr)
        dropoutBackward(elements(prepared.in), prepared.dropoutP, reinterpret_cast<const std::uint8_t*>(b.extra), b.dy,
                        b.dx);
      return Status::ok();
    case LayerKind::BasicBlock:
    case LayerKind::Bottleneck:
    case LayerKind::InvertedResidual:
    case LayerKind::Block: return backwardBlock(context, prepared, b);
    case LayerKind::TransformerBlock: return backwardTransformerBlock(context, prepared, dropoutKey, b);
    case LayerKind::TokenEmbedding: return backwardTokenEmbedding(context, prepared, b);
    case LayerKind::LmHead: return backwardLmHead(context, prepared, b);
    case LayerKind::PatchEmbedding: return backwardPatchEmbedding(context, prepared, b);
    case LayerKind::ClsHead: return backwardClsHead(context, prepared, b);
    case LayerKind::SwinEmbedding: return backwardSwinEmbedding(context, prepared, b);
    case LayerKind::SwinBlock: return backwardSwinBlock(context, prepared, b);
    case LayerKind::PatchMerging: return backwardPatchMerging(context, prepared, b);
    case LayerKind::SwinHead: return backwardSwinHead(context, prepared, b);
    default: break;
  }
  if (isPointwise(prepared.kind)) {  // from y or x, whichever the kind's description says PyTorch keeps
    auto eltwise = opOf<EltwiseOp>(prepared);
    if (!eltwise) return eltwise.status();
    return (*eltwise)->backward(context, (*eltwise)->savedIsOutput() ? b.y : b.x, b.dy, b.dx, b.workspace);
  }
  return Status::internal("cpu: " + prepared.label + ": no backward kernel");
}

}  // namespace remat::cpu
