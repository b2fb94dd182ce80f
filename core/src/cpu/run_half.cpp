// Dispatch of the layers whose bfloat16 kernels differ from float32's under bf16-mixed
// (docs/memory-model.md section 11.7): conv2d and linear with autocast's casts (dnnl_half.hpp),
// the pools (max pooling's indices and backward are own kernels in bfloat16) and dropout, and the
// layer norm's float32 cast. Batch norm, the activations and residual blocks take either dtype
// through the same calls and stay in run_layers.cpp's dispatch (their primitives were made for
// bf16 data; blocks run run_blocks.cpp's one runner on bfloat16 arenas). prepare.cpp admits only
// the kinds with bfloat16 kernels in half.
#include "device_impl.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/model/operators.hpp"

namespace remat::cpu {
namespace {

template <typename Op>
Result<const Op*> opOf(const PreparedLayer& prepared) {
  const Op* op = std::get_if<Op>(&prepared.op);
  if (op == nullptr) return Status::internal("cpu: " + prepared.label + ": the layer lacks its bf16 primitives");
  return op;
}

// The bias's place in the parameters: in floats, or in bfloat16 elements under pure bf16.
float* biasOf(const PreparedLayer& prepared, float* params) {
  if (prepared.biasOffset < 0) return nullptr;
  if (prepared.halfParams) return reinterpret_cast<float*>(reinterpret_cast<BFloat16*>(params) + prepared.biasOffset);
  return params + prepared.biasOffset;
}
const float* biasOf(const PreparedLayer& prepared, const float* params) {
  return biasOf(prepared, const_cast<float*>(params));
}

const BFloat16* halves(const float* data) { return reinterpret_cast<const BFloat16*>(data); }
BFloat16* halves(float* data) { return reinterpret_cast<BFloat16*>(data); }

// A pool without a oneDNN primitive (an adaptive pool whose windows do not tile its input, VGG's
// and AlexNet's 7x7 of a smaller map; an average pool whose ceil-mode windows reach past the
// padding) runs the own bfloat16 kernels.
bool ownHalfPool(const PreparedLayer& prepared) {
  return prepared.ownAvgPool ||
         (prepared.kind == LayerKind::AdaptiveAvgPool && std::holds_alternative<std::monostate>(prepared.op));
}

Status forwardPool(const DnnlContext& context, const PreparedLayer& prepared, bool keep, const ForwardBuffers& b) {
  if (ownHalfPool(prepared)) {
    if (prepared.kind == LayerKind::AdaptiveAvgPool)
      adaptiveAvgPoolForward(prepared.pool, halves(b.x), halves(b.y));
    else
      avgPoolForward(prepared.pool, halves(b.x), halves(b.y));
    return Status::ok();
  }
  auto pool = opOf<PoolOp>(prepared);
  if (!pool) return pool.status();
  REMAT_RETURN_IF_ERROR((*pool)->forward(context, b.x, b.y, b.workspace));
  if (prepared.kind == LayerKind::MaxPool && keep)
    maxPoolIndices(prepared.pool, halves(b.x), halves(b.y), reinterpret_cast<std::int64_t*>(b.extra));
  return Status::ok();
}

Status backwardPool(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  if (b.dx == nullptr) return Status::ok();
  if (prepared.kind == LayerKind::MaxPool) {
    maxPoolBackward(prepared.pool, reinterpret_cast<const std::int64_t*>(b.extra), halves(b.dy), halves(b.dx));
    return Status::ok();
  }
  if (ownHalfPool(prepared)) {
    if (prepared.kind == LayerKind::AdaptiveAvgPool)
      adaptiveAvgPoolBackward(prepared.pool, halves(b.dy), halves(b.dx));
    else
      avgPoolBackward(prepared.pool, halves(b.dy), halves(b.dx));
    return Status::ok();
  }
  auto pool = opOf<PoolOp>(prepared);
  return pool ? (*pool)->backward(context, b.dy, b.dx, b.workspace) : pool.status();
}

}  // namespace

Status forwardHalfLayer(const DnnlContext& context, const PreparedLayer& prepared, std::size_t l, ForwardMode mode,
                        std::uint64_t seed, const ForwardBuffers& b) {
  const bool keep = mode == ForwardMode::Keep;
  std::byte* saved = keep ? b.extra : nullptr;  // a discard-mode forward makes its copies in the scratch
  switch (prepared.kind) {
    case LayerKind::Conv2d: {
      auto conv = opOf<HalfConvOp>(prepared);
      return conv ? (*conv)->forward(context, b.x, b.params, biasOf(prepared, b.params), b.y, saved, b.workspace)
                  : conv.status();
    }
    case LayerKind::Linear: {
      auto linear = opOf<HalfLinearOp>(prepared);
      return linear ? (*linear)->forward(context, b.x, b.params, biasOf(prepared, b.params), b.y, saved, b.workspace)
                    : linear.status();
    }
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool: return forwardPool(context, prepared, keep, b);
    case LayerKind::Dropout:
      dropoutForward(prepared.in, prepared.dropoutP, rng::streamKey(seed, rng::Purpose::Dropout, l), halves(b.x),
                     halves(b.y), reinterpret_cast<std::uint8_t*>(saved));
      return Status::ok();
    default: return Status::internal("cpu: " + prepared.label + ": no bf16 forward kernel");
  }
}

Status backwardHalfLayer(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  switch (prepared.kind) {
    case LayerKind::Conv2d: {
      auto conv = opOf<HalfConvOp>(prepared);
      return conv ? (*conv)->backward(context, b.x, b.dy, b.extra, b.dx, b.paramGrads, biasOf(prepared, b.paramGrads),
                                      b.workspace, b.params)
                  : conv.status();
    }
    case LayerKind::Linear: {
      auto linear = opOf<HalfLinearOp>(prepared);
      return linear ? (*linear)->backward(context, b.x, b.dy, b.extra, b.dx, b.paramGrads,
                                          biasOf(prepared, b.paramGrads), b.workspace, b.params)
                    : linear.status();
    }
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool: return backwardPool(context, prepared, b);
    case LayerKind::Dropout:
      if (b.dx != nullptr)
        dropoutBackward(prepared.in.batch * prepared.in.perSample(), prepared.dropoutP,
                        reinterpret_cast<const std::uint8_t*>(b.extra), halves(b.dy), halves(b.dx));
      return Status::ok();
    default: return Status::internal("cpu: " + prepared.label + ": no bf16 backward kernel");
  }
}

bool hasOwnHalfDispatch(LayerKind kind) {
  switch (kind) {
    case LayerKind::Conv2d:
    case LayerKind::Linear:
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool:
    case LayerKind::Dropout: return true;
    default: return false;
  }
}

// Autocast runs layer_norm in float32: it casts the bfloat16 input to a float32 copy, which its
// backward reads (saved in E after the statistics), and the float32 d(input) flows back through
// the cast (ToCopyBackward), rounded to bfloat16.
Status forwardCastLayerNorm(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                            const ForwardBuffers& b) {
  auto norm = opOf<LayerNormOp>(prepared);
  if (!norm) return norm.status();
  const bool keep = mode == ForwardMode::Keep;
  std::byte* copy = keep ? b.extra + prepared.castOffset : b.workspace;
  auto* cast = reinterpret_cast<float*>(copy);
  castToFloat(prepared.in.batch * prepared.in.perSample(), halves(b.x), cast);
  float* stats = keep ? reinterpret_cast<float*>(b.extra) : nullptr;
  return (*norm)->forward(context, cast, b.params, b.y, stats, b.workspace + prepared.castScratchBytes);
}

Status backwardCastLayerNorm(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  auto norm = opOf<LayerNormOp>(prepared);
  if (!norm) return norm.status();
  const auto* cast = reinterpret_cast<const float*>(b.extra + prepared.castOffset);
  auto* dx = reinterpret_cast<float*>(b.workspace);
  REMAT_RETURN_IF_ERROR((*norm)->backward(context, cast, b.dy, b.params, reinterpret_cast<const float*>(b.extra), dx,
                                          b.paramGrads, b.workspace + prepared.castScratchBytes));
  if (b.dx != nullptr) castToHalf(prepared.in.batch * prepared.in.perSample(), dx, halves(b.dx));
  return Status::ok();
}

}  // namespace remat::cpu
