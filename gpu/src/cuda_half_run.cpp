// bf16-mixed's layers on the GPU that run (cuda_half.hpp): linear on cuBLAS in bfloat16 with
// float32 accumulation (cublasGemmEx, CUDA_R_16BF or CUDA_R_16F by half_type.hpp, CUBLAS_COMPUTE_32F, no workspace),
// the activations and dropout on bfloat16 tensors (kernels_half.cu), as torch.autocast runs them: the float32 master
// weights cast to a bfloat16 copy each step (saved in E for the backward), a float32 input cast to bfloat16 (saved in E
// in its place), the bfloat16 weight gradient in the backward's workspace then added into the float32 master gradient.
//
// A linear's E, keep mode: [the input's cast copy, when it casts][the weight copy]; a discard-mode
// forward makes both at the start of its workspace. Its backward workspace: [the bfloat16 weight
// gradient][d(input) in bfloat16 before its float32 cast, when it casts and has a d(input)].
#include "cuda_device_impl.hpp"
#include "cuda_half.hpp"
#include "half_type.hpp"
#include "kernels_half.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"
#include "remat/model/operators.hpp"

namespace remat::gpu {
namespace {

using kernels::Bf16;

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

const Bf16* halves(const void* data) { return static_cast<const Bf16*>(data); }
Bf16* halves(void* data) { return static_cast<Bf16*>(data); }

std::uint64_t inputCastBytes(const LayerState& s) {
  return s.castsInput ? static_cast<std::uint64_t>(s.inCount) * 2 : 0;
}
Index weightCount(const LayerState& s) { return s.outFeatures * s.inFeatures; }

// C (column-major m x n, ldc) = op(A) op(B) in bfloat16 with float32 accumulation; `what` names
// the product in an error.
Status gemmHalf(const LayerContext& c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const Bf16* a,
                int lda, const Bf16* b, int ldb, Bf16* out, int ldc, const char* what) {
  const cublasStatus_t status =
      cublasGemmEx(c.cublas, ta, tb, m, n, k, &kOne, a, cublasHalfType(), lda, b, cublasHalfType(), ldb, &kZero, out,
                   cublasHalfType(), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS)
    return Status::internal(std::string("gpu: cublasGemmEx (bf16, ") + what + ") failed: " + cublasStatusName(status));
  return Status::ok();
}

// y = x W^T (+ b), through the row-major trick of the float32 path (cuda_layers_run.cpp).
Status linearForwardHalf(const LayerState& s, ForwardMode mode, const LayerContext& c, const ForwardBuffers& p) {
  std::byte* copies = mode == ForwardMode::Keep ? p.extra : p.workspace;
  const Bf16* x = halves(p.x);
  if (s.castsInput) {
    REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, s.inCount, p.x, halves(copies)));
    x = halves(copies);
  }
  Bf16* w = halves(copies + inputCastBytes(s));
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, weightCount(s), p.params, w));
  const int rows = static_cast<int>(s.rows), in = static_cast<int>(s.inFeatures), out = static_cast<int>(s.outFeatures);
  REMAT_RETURN_IF_ERROR(gemmHalf(c, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, w, in, x, in, halves(p.y), out, "x W^T"));
  if (s.bias) return kernels::addRowBiasHalf(c.stream, s.rows, s.outFeatures, p.params + s.biasOffset, halves(p.y));
  return Status::ok();
}

// dx = dy W; dW (bfloat16, workspace) = dy^T x, then added into the float32 master; db from dy.
Status linearBackwardHalf(const LayerState& s, const LayerContext& c, const BackwardBuffers& p) {
  const Bf16* x = s.castsInput ? halves(p.extra) : halves(p.x);
  const Bf16* w = halves(p.extra + inputCastBytes(s));
  const Bf16* dy = halves(p.dy);
  const int rows = static_cast<int>(s.rows), in = static_cast<int>(s.inFeatures), out = static_cast<int>(s.outFeatures);
  Bf16* dw = halves(p.workspace);
  if (p.dx != nullptr) {
    Bf16* dx = s.castsInput ? halves(p.workspace + static_cast<std::uint64_t>(weightCount(s)) * 2) : halves(p.dx);
    REMAT_RETURN_IF_ERROR(gemmHalf(c, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, w, in, dy, out, dx, in, "dy W"));
    if (s.castsInput) REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, s.inCount, dx, p.dx));
  }
  REMAT_RETURN_IF_ERROR(gemmHalf(c, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, x, in, dy, out, dw, in, "dy^T x"));
  REMAT_RETURN_IF_ERROR(kernels::addHalfInto(c.stream, weightCount(s), dw, p.paramGrads));
  if (s.bias) return kernels::addHalfBiasGradient(c.stream, s.rows, s.outFeatures, dy, p.paramGrads + s.biasOffset);
  return Status::ok();
}

}  // namespace

Result<kernels::HalfActivationFn> halfActivationOf(LayerKind kind) {
  using kernels::HalfActivation;
  using kernels::Pointwise;
  switch (kind) {
    case LayerKind::Relu: return kernels::HalfActivationFn{HalfActivation::Relu};
    case LayerKind::Relu6: return kernels::HalfActivationFn{HalfActivation::Relu6};
    case LayerKind::Sigmoid: return kernels::HalfActivationFn{HalfActivation::Pointwise, Pointwise::Sigmoid};
    case LayerKind::Tanh: return kernels::HalfActivationFn{HalfActivation::Pointwise, Pointwise::Tanh};
    case LayerKind::Silu: return kernels::HalfActivationFn{HalfActivation::Pointwise, Pointwise::Silu};
    case LayerKind::HardSwish: return kernels::HalfActivationFn{HalfActivation::Pointwise, Pointwise::HardSwish};
    case LayerKind::HardSigmoid: return kernels::HalfActivationFn{HalfActivation::Pointwise, Pointwise::HardSigmoid};
    case LayerKind::Gelu: return kernels::HalfActivationFn{HalfActivation::Pointwise, Pointwise::Gelu};
    default: return Status::internal("gpu: '" + std::string(kindName(kind)) + "' has no bfloat16 kernel");
  }
}

bool runsHalf(LayerKind kind) {
  return kind == LayerKind::Linear || kind == LayerKind::Dropout || isPointwise(kind) || runsHalfCnn(kind) ||
         isComposite(kind);
}

std::uint64_t halfForwardWorkspaceBytes(const LayerState& s) {
  if (s.kind != LayerKind::Linear) return 0;
  return inputCastBytes(s) + static_cast<std::uint64_t>(weightCount(s)) * 2;
}

std::uint64_t halfBackwardWorkspaceBytes(const LayerState& s, bool hasInputGradient) {
  if (s.kind != LayerKind::Linear) return 0;
  const std::uint64_t dxBytes = s.castsInput && hasInputGradient ? static_cast<std::uint64_t>(s.inCount) * 2 : 0;
  return static_cast<std::uint64_t>(weightCount(s)) * 2 + dxBytes;
}

Status forwardHalfLayer(const LayerState& s, std::size_t l, ForwardMode mode, std::uint64_t seed, const LayerContext& c,
                        const ForwardBuffers& p) {
  const bool keep = mode == ForwardMode::Keep;
  if (runsHalfCnn(s.kind)) return forwardHalfCnnLayer(s, mode, c, p);
  if (isComposite(s.kind)) return forwardHalfBlock(s, l, seed, mode, c, p);
  if (s.kind == LayerKind::Linear) return linearForwardHalf(s, mode, c, p);
  if (s.kind == LayerKind::Dropout)
    return kernels::dropoutForwardHalf(c.stream, s.outCount, s.dropoutP, rng::streamKey(seed, rng::Purpose::Dropout, l),
                                       halves(p.x), halves(p.y),
                                       keep ? reinterpret_cast<std::uint8_t*>(p.extra) : nullptr);
  auto fn = halfActivationOf(s.kind);
  if (!fn) return fn.status();
  return kernels::activationForwardHalf(c.stream, *fn, s.outCount, halves(p.x), halves(p.y));
}

Status prepareLayerNormFromHalf(const Chain& chain, std::size_t l, const LayerState& prev, const HalfMode& mode,
                                const LayerChecks& check, LayerState& state) {
  const ChainLayer& layer = chain.layers[l - 1];
  const LayerSpec& spec = chain.spec.layers[layer.specIndex];
  if (layer.kind != LayerKind::LayerNorm) return check.noKernel();
  REMAT_RETURN_IF_ERROR(check.realLayer(chain, l, prev.real, static_cast<std::uint64_t>(prev.outCount)));
  auto params = check.primitiveLayer(layer, spec, autocastCastsOf(layer, spec, mode));
  if (!params) return params.status();
  const Shape& in = layer.inputShape;
  state.real = true;
  state.castsFromHalf = true;
  state.inShape = in;
  state.outShape = layer.outputShape;
  state.inCount = static_cast<Index>(elementCount(in));
  state.outCount = static_cast<Index>(elementCount(layer.outputShape));
  // [N, F], or NCHW over the channels: N*H*W rows of C, H*W apart (the float32 path's rule).
  state.layerNormInner = in.size() == 4 ? in[2] * in[3] : 1;
  state.rows = in[0] * state.layerNormInner;
  state.inFeatures = in[1];
  state.epsilon = static_cast<float>(spec.epsilon);
  state.requiredFwdWorkspace = static_cast<std::uint64_t>(state.inCount) * 4;  // a discard-mode forward's copy
  state.requiredBwdWorkspace = l > 1 ? static_cast<std::uint64_t>(state.inCount) * 4 : 0;  // float32 d(input)
  return Status::ok();
}

// E: [mean, rstd per row][the input's float32 copy].
Status forwardLayerNormFromHalf(const LayerState& s, ForwardMode mode, const LayerContext& c, const ForwardBuffers& p) {
  const bool keep = mode == ForwardMode::Keep;
  float* stats = keep ? reinterpret_cast<float*>(p.extra) : nullptr;
  float* copy = keep ? stats + 2 * s.rows : reinterpret_cast<float*>(p.workspace);
  REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, s.inCount, halves(p.x), copy));
  return kernels::layerNormForward(c.stream, s.rows, s.inFeatures, s.epsilon, copy, p.params, p.y, stats,
                                   s.layerNormInner);
}

Status backwardLayerNormFromHalf(const LayerState& s, const LayerContext& c, const BackwardBuffers& p) {
  const float* stats = reinterpret_cast<const float*>(p.extra);
  const float* copy = stats + 2 * s.rows;
  float* dx = p.dx != nullptr ? reinterpret_cast<float*>(p.workspace) : nullptr;
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, s.rows, s.inFeatures, copy, p.dy, p.params, stats, dx,
                                                   p.paramGrads, s.layerNormInner));
  if (dx == nullptr) return Status::ok();
  return kernels::castToHalf(c.stream, s.inCount, dx, halves(p.dx));
}

Status backwardHalfLayer(const LayerState& s, const LayerContext& c, const BackwardBuffers& p) {
  if (runsHalfCnn(s.kind)) return backwardHalfCnnLayer(s, c, p);
  if (isComposite(s.kind)) return backwardHalfBlock(s, c, p);
  if (s.kind == LayerKind::Linear) return linearBackwardHalf(s, c, p);
  if (p.dx == nullptr) return Status::ok();
  if (s.kind == LayerKind::Dropout)
    return kernels::dropoutBackwardHalf(c.stream, s.inCount, s.dropoutP, reinterpret_cast<const std::uint8_t*>(p.extra),
                                        halves(p.dy), halves(p.dx));
  auto fn = halfActivationOf(s.kind);
  if (!fn) return fn.status();
  const void* saved = operatorInfo(s.kind).backwardReads == BackwardReads::Output ? p.y : p.x;
  return kernels::activationBackwardHalf(c.stream, *fn, s.outCount, halves(saved), halves(p.dy), halves(p.dx), false);
}

}  // namespace remat::gpu
