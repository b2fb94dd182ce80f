// lm_head and cls_head under bf16-mixed on the GPU (cuda_heads_half.hpp).
#include "cuda_heads_half.hpp"

#include "cuda_linear_half.hpp"
#include "cuda_transformer_half_layout.hpp"
#include "kernels_embedding.hpp"
#include "kernels_half.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {

struct HalfLmHeadState {
  Index tokens = 0, width = 0, vocab = 0;
  bool norm = true, tied = false;
  float epsilon = 1e-5f;
  Index weight = 0;  // W's offset in the parameters (floats) when not tied
  HalfHeadLayout e;
  std::uint64_t discardShift = 0, fLnOut = 0, fHalfLogits = 0, fLogits = 0;             // forward workspace
  std::uint64_t bLogits = 0, bHalfLogits = 0, bLnOut = 0, bHalfInput = 0, bWeight = 0;  // backward
};

struct HalfClsHeadState {
  Index batch = 0, seq = 0, width = 0, outFeatures = 0;
  bool norm = true, tanhOut = false;
  float epsilon = 1e-5f;
  Index weight = 0, bias = -1;  // parameter offsets (floats)
  HalfHeadLayout e;
  std::uint64_t discardShift = 0, fNormed = 0, fRows = 0, fLogits = 0;      // forward workspace
  std::uint64_t bDz = 0, bHalfRows = 0, bRows = 0, bFull = 0, bWeight = 0;  // backward workspace
};

namespace {

using kernels::Bf16;

constexpr std::uint64_t kAlignBytes = 256;

struct Regions {  // consecutive regions at 256-byte boundaries
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    const std::uint64_t start = (end + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    end = start + bytes;
    return start;
  }
};

template <typename T>
T* at(std::byte* base, std::uint64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}
template <typename T>
const T* at(const std::byte* base, std::uint64_t offset) {
  return reinterpret_cast<const T*>(base + offset);
}

void layOut(HalfLmHeadState& h, LayerState& state) {
  const auto T = static_cast<std::uint64_t>(h.tokens), d = static_cast<std::uint64_t>(h.width),
             V = static_cast<std::uint64_t>(h.vocab);
  h.discardShift = (h.e.savedBytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  Regions f, b;
  h.fLnOut = f.add(T * d * 4);
  h.fHalfLogits = f.add(T * V * 2);
  h.fLogits = f.add(T * V * 4);
  state.requiredFwdWorkspace = h.discardShift + f.end;
  h.bLogits = b.add(T * V * 4);
  h.bHalfLogits = b.add(T * V * 2);
  h.bLnOut = b.add(T * d * 4);
  h.bHalfInput = b.add(T * d * 2);
  h.bWeight = b.add(V * d * 2);
  state.requiredBwdWorkspace = b.end;
}

Linear projection(const HalfLmHeadState& h) { return Linear{h.tokens, h.width, h.vocab, "lm_head projection"}; }

}  // namespace

Status prepareHalfLmHead(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                         LayerState& state) {
  // The parameters, flags, tied table and E were checked against the layout with the whole chain
  // (checkHalfChain); E is checked again here, where the offsets are taken.
  (void)chain;
  const Shape& in = layer.inputShape;
  auto h = std::make_shared<HalfLmHeadState>();
  h->tokens = in[0] * in[1];
  h->width = in[2];
  h->vocab = spec.vocab;
  h->norm = spec.norm;
  h->tied = spec.tied;
  h->epsilon = static_cast<float>(spec.epsilon);
  h->weight = h->norm ? 2 * h->width : 0;
  h->e = halfLmHeadLayout(in, spec);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, h->e.savedBytes));
  layOut(*h, state);
  state.halfLmHead = std::move(h);
  return Status::ok();
}

Status forwardHalfLmHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b) {
  const HalfLmHeadState& h = *state.halfLmHead;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr) || (h.tied && b.sharedParams == nullptr))
    return Status::internal("gpu: " + state.label + ": the head's forward lacks its workspace, E or layer 1's table");
  const float* weight = h.tied ? b.sharedParams : b.params + h.weight;
  std::byte* saved = keep ? b.extra : b.workspace;
  std::byte* scratch = b.workspace + (keep ? 0 : h.discardShift);
  const Index T = h.tokens, d = h.width, V = h.vocab;
  const float* projected = b.x;
  if (h.norm) {
    REMAT_RETURN_IF_ERROR(kernels::layerNormForward(c.stream, T, d, h.epsilon, b.x, b.params,
                                                    at<float>(scratch, h.fLnOut), at<float>(saved, h.e.stats)));
    projected = at<float>(scratch, h.fLnOut);
  }
  Bf16 *cast = at<Bf16>(saved, h.e.inputCast), *copy = at<Bf16>(saved, h.e.weightCopy);
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, T * d, projected, cast));
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, V * d, weight, copy));
  Bf16* halfLogits = at<Bf16>(scratch, h.fHalfLogits);
  REMAT_RETURN_IF_ERROR(halfLinearForward(c, projection(h), cast, copy, nullptr, halfLogits));
  float* logits = at<float>(scratch, h.fLogits);
  REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, T * V, halfLogits, logits));
  return kernels::logSoftmaxRows(c.stream, T, V, logits, b.y);
}

Status backwardHalfLmHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const HalfLmHeadState& h = *state.halfLmHead;
  if (b.workspace == nullptr || b.y == nullptr || b.extra == nullptr || (h.norm && b.x == nullptr) ||
      (h.tied && (b.sharedParams == nullptr || b.sharedParamGrads == nullptr)))
    return Status::internal("gpu: " + state.label +
                            ": the head's backward lacks x(l-1), x(l), E, its workspace or layer 1's table");
  float* weightGrad = h.tied ? b.sharedParamGrads : b.paramGrads + h.weight;
  const Index T = h.tokens, d = h.width, V = h.vocab;
  float* dLogits = at<float>(b.workspace, h.bLogits);
  Bf16* dHalf = at<Bf16>(b.workspace, h.bHalfLogits);
  REMAT_RETURN_IF_ERROR(kernels::logSoftmaxBackwardRows(c.stream, T, V, b.y, b.dy, dLogits));
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, T * V, dLogits, dHalf));
  float* dInput = h.norm ? at<float>(b.workspace, h.bLnOut) : b.dx;
  Bf16* dInputHalf = dInput != nullptr ? at<Bf16>(b.workspace, h.bHalfInput) : nullptr;
  REMAT_RETURN_IF_ERROR(halfLinearBackward(c, projection(h), at<Bf16>(b.extra, h.e.inputCast), dHalf,
                                           at<Bf16>(b.extra, h.e.weightCopy), dInputHalf,
                                           at<Bf16>(b.workspace, h.bWeight), weightGrad, nullptr));
  if (dInputHalf != nullptr) REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, T * d, dInputHalf, dInput));
  if (!h.norm) return Status::ok();
  return kernels::layerNormBackward(c.stream, T, d, b.x, dInput, b.params, at<float>(b.extra, h.e.stats), b.dx,
                                    b.paramGrads);
}

namespace {

constexpr kernels::HalfActivationFn kTanh{kernels::HalfActivation::Pointwise, kernels::Pointwise::Tanh};

void layOutCls(HalfClsHeadState& v, LayerState& state) {
  const auto N = static_cast<std::uint64_t>(v.batch), T = N * static_cast<std::uint64_t>(v.seq),
             d = static_cast<std::uint64_t>(v.width), out = static_cast<std::uint64_t>(v.outFeatures);
  v.discardShift = (v.e.savedBytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  Regions f, b;
  v.fNormed = f.add(T * d * 4);
  v.fRows = f.add(N * d * 4);
  v.fLogits = f.add(N * out * 2);  // the linear's output before tanh
  state.requiredFwdWorkspace = v.discardShift + f.end;
  v.bDz = b.add(N * out * 2);
  v.bHalfRows = b.add(N * d * 2);  // d(token 0) in bfloat16
  v.bRows = b.add(N * d * 4);
  v.bFull = b.add(T * d * 4);  // d(token 0) scattered into a zero [N, S, d]
  v.bWeight = b.add(out * d * 2);
  state.requiredBwdWorkspace = b.end;
}

Linear clsLinear(const HalfClsHeadState& v) { return Linear{v.batch, v.width, v.outFeatures, "cls_head linear"}; }

}  // namespace

Status prepareHalfClsHead(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state) {
  const Shape& in = layer.inputShape;
  auto v = std::make_shared<HalfClsHeadState>();
  v->batch = in[0];
  v->seq = in[1];
  v->width = in[2];
  v->outFeatures = spec.outFeatures;
  v->norm = spec.norm;
  v->tanhOut = spec.tanhOut;
  v->epsilon = static_cast<float>(spec.epsilon);
  v->weight = v->norm ? 2 * v->width : 0;
  v->bias = spec.bias ? v->weight + v->outFeatures * v->width : -1;
  v->e = halfClsHeadLayout(in, spec);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, v->e.savedBytes));
  layOutCls(*v, state);
  state.halfClsHead = std::move(v);
  return Status::ok();
}

Status forwardHalfClsHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b) {
  const HalfClsHeadState& v = *state.halfClsHead;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the head's forward lacks its workspace or E");
  std::byte* saved = keep ? b.extra : b.workspace;
  std::byte* scratch = b.workspace + (keep ? 0 : v.discardShift);
  const Index N = v.batch, d = v.width, out = v.outFeatures;
  const float* normed = b.x;
  if (v.norm) {
    REMAT_RETURN_IF_ERROR(kernels::layerNormForward(c.stream, N * v.seq, d, v.epsilon, b.x, b.params,
                                                    at<float>(scratch, v.fNormed), at<float>(saved, v.e.stats)));
    normed = at<float>(scratch, v.fNormed);
  }
  float* rows = at<float>(scratch, v.fRows);  // token 0 of each sample
  REMAT_RETURN_IF_ERROR(kernels::copyOrAddRows(c.stream, N, d, normed, v.seq * d, rows, d, false));
  Bf16 *cast = at<Bf16>(saved, v.e.inputCast), *copy = at<Bf16>(saved, v.e.weightCopy);
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, N * d, rows, cast));
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, out * d, b.params + v.weight, copy));
  auto* y = reinterpret_cast<Bf16*>(b.y);
  Bf16* z = v.tanhOut ? at<Bf16>(scratch, v.fLogits) : y;
  REMAT_RETURN_IF_ERROR(halfLinearForward(c, clsLinear(v), cast, copy, v.bias >= 0 ? b.params + v.bias : nullptr, z));
  return v.tanhOut ? kernels::activationForwardHalf(c.stream, kTanh, N * out, z, y) : Status::ok();
}

Status backwardHalfClsHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const HalfClsHeadState& v = *state.halfClsHead;
  if (b.workspace == nullptr || b.extra == nullptr || (v.norm && b.x == nullptr) || (v.tanhOut && b.y == nullptr))
    return Status::internal("gpu: " + state.label + ": the head's backward lacks x(l-1), x(l), E or its workspace");
  const Index N = v.batch, d = v.width, out = v.outFeatures;
  const auto* dy = reinterpret_cast<const Bf16*>(b.dy);
  if (v.tanhOut) {  // tanh's backward in bfloat16, from its bfloat16 result
    Bf16* dz = at<Bf16>(b.workspace, v.bDz);
    REMAT_RETURN_IF_ERROR(
        kernels::activationBackwardHalf(c.stream, kTanh, N * out, reinterpret_cast<const Bf16*>(b.y), dy, dz, false));
    dy = dz;
  }
  Bf16* dHalfRows = at<Bf16>(b.workspace, v.bHalfRows);
  float* g = b.paramGrads;
  REMAT_RETURN_IF_ERROR(halfLinearBackward(
      c, clsLinear(v), at<Bf16>(b.extra, v.e.inputCast), dy, at<Bf16>(b.extra, v.e.weightCopy), dHalfRows,
      at<Bf16>(b.workspace, v.bWeight), g + v.weight, v.bias >= 0 ? g + v.bias : nullptr));
  float* dRows = at<float>(b.workspace, v.bRows);
  REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, N * d, dHalfRows, dRows));
  float* target = v.norm || b.dx == nullptr ? at<float>(b.workspace, v.bFull) : b.dx;
  if (!v.norm && b.dx == nullptr) return Status::ok();  // layer 1 without a norm: nothing below
  REMAT_CUDA_CHECK(cudaMemsetAsync(target, 0, static_cast<std::size_t>(N * v.seq * d) * 4, c.stream));
  REMAT_RETURN_IF_ERROR(kernels::copyOrAddRows(c.stream, N, d, dRows, d, target, v.seq * d, false));
  if (!v.norm) return Status::ok();
  return kernels::layerNormBackward(c.stream, N * v.seq, d, b.x, target, b.params, at<float>(b.extra, v.e.stats), b.dx,
                                    g);
}

}  // namespace remat::gpu
