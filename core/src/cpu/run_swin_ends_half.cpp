// Swin's patch embedding, patch merging and head under bf16-mixed on the CPU (docs/memory-model.md
// 12.10, "Swin under autocast"), as PyTorch 2's CPU autocast runs them: the conv and the linears are
// HalfConvOp / HalfLinearOps (the embedding's conv casts the float32 image; merging and head read
// the bfloat16 stream), each norm takes a bfloat16 input with float32 weights (widened into the
// scratch, normalised in float32, rounded), and every x(l) is bfloat16 (the head's logits too).
// E, exactly what the model counts:
// swin_embedding: [the image's cast][the conv's weight copy], the conv's bfloat16 output (the norm's
//   input), the norm's float32 statistics.
// patch_merging: the bfloat16 concatenation, the norm's bfloat16 output, the statistics, [the
//   reduction's weight copy].
// swin_head: the statistics, the bfloat16 normalised map (avgpool's saved self), the bfloat16
//   pooled [N, C], [the head's weight copy].
// Pure bf16: the same on bfloat16 parameters and gradients, without copies or the image's cast
// (the embedding's conv keeps the bfloat16 image itself: in = yes); each norm's bfloat16 weight and
// bias are widened into the scratch and their float32 gradients added into the bfloat16 buffer.
#include <algorithm>
#include <string>
#include <type_traits>

#include "block_prep.hpp"
#include "device_impl.hpp"
#include "window_half.hpp"

namespace remat::cpu {

struct HalfSwinEndPrep {
  Index batch = 0, height = 0, width = 0, channels = 0, rows = 0, features = 0, outFeatures = 0;
  bool pure = false;  // pure bf16: bfloat16 parameters and gradients
  std::optional<HalfConvOp> conv;
  std::optional<HalfLinearOp> linear;
  LayerNormOp ln;
  Index normP = 0, weight = 0, bias = 0;                                                // parameter offsets (floats)
  std::uint64_t copies = 0, stats = 0, a = 0, b = 0, savedBytes = 0, discardShift = 0;  // E
  std::uint64_t fWide = 0, fNorm = 0, fParams = 0, fDnnl = 0;                           // forward scratch
  std::uint64_t bX = 0, bDy = 0, bDx = 0, bHalf = 0, bParams = 0, bDnnl = 0;            // backward scratch
};

namespace {

template <typename T = BFloat16>
T* at(std::byte* base, std::uint64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}
template <typename T = BFloat16>
const T* at(const std::byte* base, std::uint64_t offset) {
  return reinterpret_cast<const T*>(base + offset);
}

// The norm's weight and bias as float32: the masters, or pure bf16's widened into `wide`.
const float* normParams(const HalfSwinEndPrep& e, const float* params, float* wide) {
  if (!e.pure) return params + e.normP;
  castToFloat(2 * e.features, reinterpret_cast<const BFloat16*>(paramAt(params, e.normP, true)), wide);
  return wide;
}

Status checkSaved(const ChainLayer& layer, const LayerChecks& check, bool needsInput, const HalfSwinEndPrep& e) {
  if (e.channels % 2 != 0)  // the window and merge gathers move a bfloat16 row as C / 2 float32 words
    return check.fail("the CPU's bfloat16 Swin kernels need an even channel count C, got " +
                      std::to_string(e.channels) + "; run it as fp32");
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, needsInput));
  return check.expectExtra(layer.numbers.extraBytes, e.savedBytes);
}

// The norm's scratch (its widened input and float32 output, forward; widened x, dy and float32 dx,
// backward) and the ops' own; `halfBytes`: one more bfloat16 tensor of the backward.
void layOutScratch(HalfSwinEndPrep& e, std::uint64_t fwdOps, std::uint64_t bwdOps, std::uint64_t halfBytes,
                   PreparedLayer& prepared) {
  const Index count = e.rows * e.features;
  e.discardShift = (e.savedBytes + 63) / 64 * 64;
  ScratchLayout f, b;
  e.fWide = f.add(floats(count));
  e.fNorm = f.add(floats(count));
  const Index normParams = e.pure ? 2 * e.features : 0;  // pure: the norm's widened weight and bias
  e.fParams = f.add(floats(normParams));
  e.fDnnl = f.add(std::max(fwdOps, e.ln.forwardScratchBytes()));
  prepared.requiredFwdWorkspace = e.discardShift + f.bytes();
  e.bX = b.add(floats(count));
  e.bDy = b.add(floats(count));
  e.bDx = b.add(floats(count));
  e.bHalf = b.add(halfBytes);
  e.bParams = b.add(floats(2 * normParams));  // pure: widened, then their float32 gradients
  e.bDnnl = b.add(std::max(bwdOps, e.ln.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
}

struct Saved {
  std::byte* saved;
  std::byte* scratch;
};

Result<Saved> savedOf(const PreparedLayer& prepared, const HalfSwinEndPrep& e, ForwardMode mode,
                      const ForwardBuffers& b) {
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the forward lacks its workspace or E");
  return Saved{keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : e.discardShift)};
}

Status requireBackward(const PreparedLayer& prepared, const BackwardBuffers& b, bool needsInput) {
  if (b.workspace != nullptr && b.extra != nullptr && (!needsInput || b.x != nullptr)) return Status::ok();
  return Status::internal("cpu: " + prepared.label + ": the backward lacks x(l-1), E or its workspace");
}

// The norm on a bfloat16 input (float32 weights): widened, normalised in float32, rounded into y.
Status normForward(const DnnlContext& context, const HalfSwinEndPrep& e, const Saved& s, const BFloat16* x,
                   const float* params, BFloat16* y) {
  const Index count = e.rows * e.features;
  castToFloat(count, x, at<float>(s.scratch, e.fWide));
  REMAT_RETURN_IF_ERROR(e.ln.forward(context, at<float>(s.scratch, e.fWide),
                                     normParams(e, params, at<float>(s.scratch, e.fParams)),
                                     at<float>(s.scratch, e.fNorm), at<float>(s.saved, e.stats), s.scratch + e.fDnnl));
  castToHalf(count, at<float>(s.scratch, e.fNorm), y);
  return Status::ok();
}

// Its backward from x and the float32 dy already in bDy: d(x) float32 in bDx.
Status normBackward(const DnnlContext& context, const HalfSwinEndPrep& e, const BackwardBuffers& b, const BFloat16* x) {
  castToFloat(e.rows * e.features, x, at<float>(b.workspace, e.bX));
  float* wide = at<float>(b.workspace, e.bParams);
  const float* params = normParams(e, b.params, wide);
  float* grads = e.pure ? wide + 2 * e.features : b.paramGrads + e.normP;
  if (e.pure) std::fill_n(grads, 2 * e.features, 0.0f);
  REMAT_RETURN_IF_ERROR(e.ln.backward(context, at<float>(b.workspace, e.bX), at<float>(b.workspace, e.bDy), params,
                                      at<float>(b.extra, e.stats), at<float>(b.workspace, e.bDx), grads,
                                      b.workspace + e.bDnnl));
  if (e.pure)
    addFloatIntoHalf(2 * e.features, grads, reinterpret_cast<BFloat16*>(paramAt(b.paramGrads, e.normP, true)));
  return Status::ok();
}

Status makeNorm(const DnnlContext& context, HalfSwinEndPrep& e, const LayerSpec& spec, const std::string& label) {
  return assign(
      LayerNormOp::create(context, e.rows, e.features, static_cast<float>(spec.epsilon), InputGrad::Write, label),
      e.ln);
}

}  // namespace

Status prepareHalfSwinEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                const LayerChecks& check, bool firstLayer, bool pure, PreparedLayer& prepared) {
  auto e = std::make_shared<HalfSwinEndPrep>();
  e->pure = pure;
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  e->batch = out[0], e->height = out[1], e->width = out[2], e->channels = e->features = out[3];
  e->rows = e->batch * e->height * e->width;
  const Index C = e->channels, weights = C * in[1] * spec.kernel * spec.kernel;
  e->bias = weights;
  e->normP = weights + C;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(e->normP + 2 * C)));
  REMAT_RETURN_IF_ERROR(
      assign(HalfConvOp::create(context, patchConvGeometry(spec, in, C), true, !pure,
                                firstLayer ? InputGrad::None : InputGrad::Write, prepared.label + ", conv", pure),
             e->conv));
  REMAT_RETURN_IF_ERROR(makeNorm(context, *e, spec, prepared.label + ", norm"));
  e->a = e->conv->copies().inputCastBytes() + e->conv->copies().weightCopyBytes();  // the conv's output
  e->stats = e->a + halves(e->rows * C);
  e->savedBytes = e->stats + floats(2 * e->rows);
  REMAT_RETURN_IF_ERROR(checkSaved(layer, check, pure, *e));  // pure: the conv keeps the bfloat16 image
  layOutScratch(*e, e->conv->forwardScratchBytes(), e->conv->backwardScratchBytes(), halves(e->rows * C), prepared);
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.halfSwinEnd = std::move(e);
  return Status::ok();
}

Status forwardHalfSwinEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                const ForwardBuffers& b) {
  const HalfSwinEndPrep& e = *prepared.halfSwinEnd;
  auto s = savedOf(prepared, e, mode, b);
  if (!s) return s.status();
  BFloat16* conv = at(s->saved, e.a);
  REMAT_RETURN_IF_ERROR(
      e.conv->forward(context, b.x, b.params, paramAt(b.params, e.bias, e.pure), conv, s->saved, s->scratch + e.fDnnl));
  return normForward(context, e, *s, conv, b.params, reinterpret_cast<BFloat16*>(b.y));
}

Status backwardHalfSwinEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const HalfSwinEndPrep& e = *prepared.halfSwinEnd;
  REMAT_RETURN_IF_ERROR(requireBackward(prepared, b, e.pure));
  const Index count = e.rows * e.features;
  castToFloat(count, reinterpret_cast<const BFloat16*>(b.dy), at<float>(b.workspace, e.bDy));
  REMAT_RETURN_IF_ERROR(normBackward(context, e, b, at(b.extra, e.a)));
  BFloat16* dConv = at(b.workspace, e.bHalf);
  castToHalf(count, at<float>(b.workspace, e.bDx), dConv);
  float* g = b.paramGrads;
  return e.conv->backward(context, e.pure ? b.x : nullptr, dConv, b.extra, b.dx, g, paramAt(g, e.bias, e.pure),
                          b.workspace + e.bDnnl, b.params);
}

Status prepareHalfPatchMerging(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                               const LayerChecks& check, bool pure, PreparedLayer& prepared) {
  auto e = std::make_shared<HalfSwinEndPrep>();
  e->pure = pure;
  const Shape& in = layer.inputShape;
  e->batch = in[0], e->height = in[1], e->width = in[2], e->channels = in[3];
  e->rows = layer.outputShape[0] * layer.outputShape[1] * layer.outputShape[2];
  e->features = 4 * e->channels;
  e->normP = 2 * e->channels * e->features;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(e->normP + 2 * e->features)));
  REMAT_RETURN_IF_ERROR(makeNorm(context, *e, spec, prepared.label + ", norm"));
  REMAT_RETURN_IF_ERROR(assign(HalfLinearOp::create(context, e->rows, e->features, 2 * e->channels, false, false,
                                                    InputGrad::Write, prepared.label + ", reduction", pure),
                               e->linear));
  const std::uint64_t cat = halves(e->rows * e->features);
  e->a = 0, e->b = cat, e->stats = 2 * cat, e->copies = e->stats + floats(2 * e->rows);
  e->savedBytes = e->copies + e->linear->copies().weightCopyBytes();
  REMAT_RETURN_IF_ERROR(checkSaved(layer, check, false, *e));
  layOutScratch(*e, e->linear->forwardScratchBytes(), e->linear->backwardScratchBytes(), 2 * cat, prepared);
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.halfSwinEnd = std::move(e);
  return Status::ok();
}

Status forwardHalfPatchMerging(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                               const ForwardBuffers& b) {
  const HalfSwinEndPrep& e = *prepared.halfSwinEnd;
  auto s = savedOf(prepared, e, mode, b);
  if (!s) return s.status();
  BFloat16 *cat = at(s->saved, e.a), *normed = at(s->saved, e.b);
  mergeGatherHalf(e.batch, e.height, e.width, e.channels, reinterpret_cast<const BFloat16*>(b.x), cat);
  REMAT_RETURN_IF_ERROR(normForward(context, e, *s, cat, b.params, normed));
  return e.linear->forward(context, normed, b.params, nullptr, b.y, s->saved + e.copies, s->scratch + e.fDnnl);
}

Status backwardHalfPatchMerging(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const HalfSwinEndPrep& e = *prepared.halfSwinEnd;
  REMAT_RETURN_IF_ERROR(requireBackward(prepared, b, false));
  const Index count = e.rows * e.features;
  BFloat16 *dNormed = at(b.workspace, e.bHalf), *dCat = dNormed + count;
  REMAT_RETURN_IF_ERROR(e.linear->backward(context, at(b.extra, e.b), b.dy, b.extra + e.copies, dNormed, b.paramGrads,
                                           nullptr, b.workspace + e.bDnnl, b.params));
  castToFloat(count, dNormed, at<float>(b.workspace, e.bDy));
  REMAT_RETURN_IF_ERROR(normBackward(context, e, b, at(b.extra, e.a)));
  if (b.dx == nullptr) return Status::ok();
  castToHalf(count, at<float>(b.workspace, e.bDx), dCat);
  mergeScatterHalf(e.batch, e.height, e.width, e.channels, dCat, reinterpret_cast<BFloat16*>(b.dx));
  return Status::ok();
}

Status prepareHalfSwinHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                           const LayerChecks& check, bool pure, PreparedLayer& prepared) {
  auto e = std::make_shared<HalfSwinEndPrep>();
  e->pure = pure;
  const Shape& in = layer.inputShape;
  e->batch = in[0], e->height = in[1], e->width = in[2], e->channels = e->features = in[3];
  e->rows = e->batch * e->height * e->width;
  e->outFeatures = spec.outFeatures;
  const Index C = e->channels;
  e->weight = 2 * C;
  e->bias = e->weight + e->outFeatures * C;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(e->bias + e->outFeatures)));
  REMAT_RETURN_IF_ERROR(makeNorm(context, *e, spec, prepared.label + ", norm"));
  REMAT_RETURN_IF_ERROR(assign(HalfLinearOp::create(context, e->batch, C, e->outFeatures, true, false, InputGrad::Write,
                                                    prepared.label + ", head", pure),
                               e->linear));
  e->stats = 0, e->a = floats(2 * e->rows), e->b = e->a + halves(e->rows * C), e->copies = e->b + halves(e->batch * C);
  e->savedBytes = e->copies + e->linear->copies().weightCopyBytes();
  REMAT_RETURN_IF_ERROR(checkSaved(layer, check, true, *e));
  layOutScratch(*e, e->linear->forwardScratchBytes(), e->linear->backwardScratchBytes(), halves(e->batch * C),
                prepared);
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.halfSwinEnd = std::move(e);
  return Status::ok();
}

Status forwardHalfSwinHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                           const ForwardBuffers& b) {
  const HalfSwinEndPrep& e = *prepared.halfSwinEnd;
  auto s = savedOf(prepared, e, mode, b);
  if (!s) return s.status();
  BFloat16 *normed = at(s->saved, e.a), *pooled = at(s->saved, e.b);
  REMAT_RETURN_IF_ERROR(normForward(context, e, *s, reinterpret_cast<const BFloat16*>(b.x), b.params, normed));
  averagePositionsHalf(e.batch, e.height * e.width, e.channels, normed, pooled);
  return e.linear->forward(context, pooled, paramAt(b.params, e.weight, e.pure), paramAt(b.params, e.bias, e.pure), b.y,
                           s->saved + e.copies, s->scratch + e.fDnnl);
}

Status backwardHalfSwinHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const HalfSwinEndPrep& e = *prepared.halfSwinEnd;
  REMAT_RETURN_IF_ERROR(requireBackward(prepared, b, true));
  float* g = b.paramGrads;
  BFloat16* dPooled = at(b.workspace, e.bHalf);
  REMAT_RETURN_IF_ERROR(e.linear->backward(context, at(b.extra, e.b), b.dy, b.extra + e.copies, dPooled,
                                           paramAt(g, e.weight, e.pure), paramAt(g, e.bias, e.pure),
                                           b.workspace + e.bDnnl, paramAt(b.params, e.weight, e.pure)));
  averagePositionsHalfBackward(e.batch, e.height * e.width, e.channels, dPooled, at<float>(b.workspace, e.bDy));
  const auto* x = reinterpret_cast<const BFloat16*>(b.x);
  REMAT_RETURN_IF_ERROR(normBackward(context, e, b, x));
  if (b.dx != nullptr)
    castToHalf(e.rows * e.features, at<float>(b.workspace, e.bDx), reinterpret_cast<BFloat16*>(b.dx));
  return Status::ok();
}

}  // namespace remat::cpu
