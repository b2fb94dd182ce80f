// ViT's patch embedding and the classification head under pure bf16 on the CPU (the model cast
// with .to(torch.bfloat16); docs/memory-model.md 12.11): float32's rule (run_vit.cpp) on bfloat16
// tensors and parameters.
//
// patch_embedding: conv_proj a pure HalfConvOp (bfloat16 image, weights read in place, bfloat16
// patch rows); the concatenation with the class token and the position table's add in bfloat16,
// each sum rounded; E is the dropout mask (p > 0) only, as in float32 (the conv keeps the image
// x(l-1)). The backward sums d(x) over the batch in float32 into the position table's and the class
// token's bfloat16 gradients (one rounding each), rounds d(patches) to bfloat16 and runs the conv's
// backward, whose weight gradient the primitive adds into the bfloat16 buffer.
//
// cls_head: the LayerNorm reads and writes bfloat16 and keeps float32 statistics (oneDNN's float32
// layer normalization on a widening in the workspace), E its statistics and the whole bfloat16
// normalised [N, S, d] (the x[:, 0] view); token 0's rows gathered, a pure HalfLinearOp, tanh in
// bfloat16 for BERT's pooler (computed in float32, rounded). Its backward scatters d(token 0) into
// a zero bfloat16 [N, S, d] before the LayerNorm's backward.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention.hpp"
#include "block_prep.hpp"
#include "cls_head_rows.hpp"
#include "device_impl.hpp"
#include "wide_norm.hpp"

namespace remat::cpu {

struct PureVitPrep {
  Index batch = 0, seq = 0, width = 0, patches = 0, outFeatures = 0;
  bool norm = true, tanhOut = false;
  std::optional<HalfConvOp> conv;
  LayerNormOp ln;
  HalfLinearOp linear;
  Index convBias = 0, classToken = 0, positions = 0;  // patch_embedding's parameters (bfloat16 elements)
  Index weight = 0, bias = -1;                        // cls_head's
  std::uint64_t stats = 0, lnOut = 0, savedBytes = 0, discardShift = 0;
  // forward: the conv's patches / token 0's rows, the linear's output, a norm's float32 work
  std::uint64_t fA = 0, fB = 0, fWideIn = 0, fWideOut = 0, fParams = 0, fDnnl = 0;
  // backward: d(patches) / rows, d(z), d(rows); d(token 0) scattered; a norm's float32 work
  std::uint64_t bA = 0, bDz = 0, bDRows = 0, bFull = 0, bX = 0, bDy = 0, bDx = 0, bParams = 0, bDParams = 0;
  std::uint64_t bDnnl = 0;
};

namespace {

const BFloat16* halfOf(const float* p) { return reinterpret_cast<const BFloat16*>(p); }
BFloat16* halfOf(float* p) { return reinterpret_cast<BFloat16*>(p); }
BFloat16* halfAt(std::byte* base, std::uint64_t offset) { return reinterpret_cast<BFloat16*>(base + offset); }
float* floatAt(std::byte* base, std::uint64_t offset) { return reinterpret_cast<float*>(base + offset); }
float* param(float* p, Index offset) { return reinterpret_cast<float*>(halfOf(p) + offset); }
const float* param(const float* p, Index offset) { return reinterpret_cast<const float*>(halfOf(p) + offset); }

}  // namespace

Status preparePurePatchEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                 const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto v = std::make_shared<PureVitPrep>();
  ConvGeometry convProj;
  auto maskBytes = checkPatchEmbedding(*v, layer, spec, check, true, prepared, convProj);
  if (!maskBytes) return maskBytes.status();
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, *maskBytes));
  REMAT_RETURN_IF_ERROR(
      assign(HalfConvOp::create(context, convProj, true, false, firstLayer ? InputGrad::None : InputGrad::Write,
                                prepared.label + ", conv_proj", true),
             v->conv));
  const std::uint64_t patchBytes = aligned(halves(v->batch * v->patches * v->width));
  ScratchLayout f, b;
  v->fA = f.add(patchBytes);  // the conv's bfloat16 output
  v->fDnnl = f.add(v->conv->forwardScratchBytes());
  v->bA = b.add(patchBytes);  // d(patches) in bfloat16, contiguous
  v->bDnnl = b.add(v->conv->backwardScratchBytes());
  prepared.requiredFwdWorkspace = f.bytes();
  prepared.requiredBwdWorkspace = b.bytes();
  addPlainParams(layer, prepared);
  prepared.pureVit = std::move(v);
  return Status::ok();
}

Status forwardPurePatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                 std::uint64_t dropoutKey, const ForwardBuffers& b) {
  const PureVitPrep& v = *prepared.pureVit;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && prepared.dropoutP > 0.0 && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": no forward workspace or mask");
  BFloat16* patches = halfAt(b.workspace, v.fA);
  const BFloat16* p = halfOf(b.params);
  REMAT_RETURN_IF_ERROR(
      v.conv->forward(context, b.x, b.params, param(b.params, v.convBias), patches, nullptr, b.workspace + v.fDnnl));
  const Index d = v.width, perSample = v.seq * d;
  BFloat16* y = halfOf(b.y);
  const DropoutDraw drop(dropoutKey, prepared.dropoutP);
  auto* mask = keep && drop.active() ? reinterpret_cast<std::uint8_t*>(b.extra) : nullptr;
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < v.batch * perSample; ++i) {  // cat(class token, patches) + positions, dropped
    const Index n = i / perSample, at = i % perSample;
    const BFloat16 joined = at < d ? p[v.classToken + at] : patches[n * v.patches * d + at - d];
    float value = BFloat16(joined.value() + p[v.positions + at].value()).value();
    if (drop.active()) {
      const bool kept = drop.keep(static_cast<std::uint64_t>(i));
      value = kept ? value * drop.scale : 0.0f;
      if (mask != nullptr) mask[i] = kept ? 1 : 0;
    }
    y[i] = BFloat16(value);
  }
  return Status::ok();
}

Status backwardPurePatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const PureVitPrep& v = *prepared.pureVit;
  if (b.workspace == nullptr || b.x == nullptr || (prepared.dropoutP > 0.0 && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the backward lacks the image, its mask or its workspace");
  const Index d = v.width, perSample = v.seq * d;
  BFloat16* g = halfOf(b.paramGrads);
  const BFloat16* dy = halfOf(b.dy);
  const auto* mask = reinterpret_cast<const std::uint8_t*>(b.extra);  // p > 0 only
  const float scale = DropoutDraw(0, prepared.dropoutP).scale;
  auto dIn = [&](Index i) {
    return prepared.dropoutP > 0.0 ? (mask[i] ? BFloat16(dy[i].value() * scale).value() : 0.0f) : dy[i].value();
  };
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < perSample; ++i) {  // positions, and token 0 into the class token
    float sum = 0.0f;
    for (Index n = 0; n < v.batch; ++n) sum += dIn(n * perSample + i);
    const float rounded = BFloat16(sum).value();
    g[v.positions + i] = BFloat16(g[v.positions + i].value() + rounded);
    if (i < d) g[v.classToken + i] = BFloat16(g[v.classToken + i].value() + rounded);
  }
  BFloat16* dPatches = halfAt(b.workspace, v.bA);
#pragma omp parallel for schedule(static)
  for (Index n = 0; n < v.batch; ++n)
    for (Index i = 0; i < v.patches * d; ++i) dPatches[n * v.patches * d + i] = BFloat16(dIn(n * perSample + d + i));
  return v.conv->backward(context, b.x, dPatches, nullptr, b.dx, b.paramGrads, param(b.paramGrads, v.convBias),
                          b.workspace + v.bDnnl, b.params);
}

Status preparePureClsHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                          const LayerChecks& check, bool /*firstLayer*/, PreparedLayer& prepared) {
  auto v = std::make_shared<PureVitPrep>();
  REMAT_RETURN_IF_ERROR(setClsHeadLayout(*v, layer, spec, check));
  const Index d = v->width, T = v->batch * v->seq, out = v->outFeatures;
  v->lnOut = floats(2 * T);
  v->savedBytes = v->norm ? floats(2 * T) + halves(T * d) : 0;
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, true, v->tanhOut));
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, v->savedBytes));
  if (v->norm) {
    REMAT_RETURN_IF_ERROR(assign(LayerNormOp::create(context, T, d, static_cast<float>(spec.epsilon), InputGrad::Write,
                                                     prepared.label + ", norm"),
                                 v->ln));
  }
  REMAT_RETURN_IF_ERROR(assign(HalfLinearOp::create(context, v->batch, d, out, spec.bias, false, InputGrad::Write,
                                                    prepared.label + ", linear", true),
                               v->linear));
  const std::uint64_t lnFwd = v->norm ? v->ln.forwardScratchBytes() : 0,
                      lnBwd = v->norm ? v->ln.backwardScratchBytes() : 0;
  ScratchLayout f, b;
  v->fA = f.add(aligned(halves(v->batch * d)));    // token 0's rows, contiguous
  v->fB = f.add(aligned(halves(v->batch * out)));  // the linear's output before tanh
  if (v->norm) {
    v->fWideIn = f.add(floats(T * d));
    v->fWideOut = f.add(floats(T * d));
    v->fParams = f.add(floats(2 * d));
  }
  v->fDnnl = f.add(std::max(lnFwd, v->linear.forwardScratchBytes()));
  v->discardShift = aligned(v->savedBytes);
  prepared.requiredFwdWorkspace = v->discardShift + f.bytes();
  v->bA = b.add(aligned(halves(v->batch * d)));
  v->bDz = b.add(aligned(halves(v->batch * out)));
  v->bDRows = b.add(aligned(halves(v->batch * d)));
  v->bFull = b.add(aligned(halves(T * d)));  // d(token 0) scattered into a zero [N, S, d]
  if (v->norm) {
    v->bX = b.add(floats(T * d));
    v->bDy = b.add(floats(T * d));
    v->bDx = b.add(floats(T * d));
    v->bParams = b.add(floats(2 * d));
    v->bDParams = b.add(floats(2 * d));
  }
  v->bDnnl = b.add(std::max(lnBwd, v->linear.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
  addPlainParams(layer, prepared);
  prepared.pureVit = std::move(v);
  return Status::ok();
}

Status forwardPureClsHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                          const ForwardBuffers& b) {
  const PureVitPrep& v = *prepared.pureVit;
  auto regions = forwardRegions(prepared, mode, b, v.discardShift, "head", v.norm);
  if (!regions) return regions.status();
  std::byte *saved = regions->saved, *scratch = regions->scratch;
  const BFloat16* normed = halfOf(b.x);
  if (v.norm) {
    const Index count = v.batch * v.seq * v.width;
    float *wideIn = floatAt(scratch, v.fWideIn), *wideOut = floatAt(scratch, v.fWideOut);
    float* params = floatAt(scratch, v.fParams);
    castToFloat(count, halfOf(b.x), wideIn);
    castToFloat(2 * v.width, halfOf(b.params), params);
    REMAT_RETURN_IF_ERROR(v.ln.forward(context, wideIn, params, wideOut, floatAt(saved, v.stats), scratch + v.fDnnl));
    castToHalf(count, wideOut, halfAt(saved, v.lnOut));
    normed = halfAt(saved, v.lnOut);
  }
  BFloat16* rows = halfAt(scratch, v.fA);
  gatherFirstTokens(v.batch, v.seq, v.width, normed, rows);
  const float* bias = v.bias >= 0 ? param(b.params, v.bias) : nullptr;
  BFloat16* z = v.tanhOut ? halfAt(scratch, v.fB) : halfOf(b.y);
  REMAT_RETURN_IF_ERROR(
      v.linear.forward(context, rows, param(b.params, v.weight), bias, z, nullptr, scratch + v.fDnnl));
  if (v.tanhOut) poolerTanhForward(v.batch * v.outFeatures, z, halfOf(b.y));
  return Status::ok();
}

namespace {

// The LayerNorm's backward from d(its output) `dFull`: d(x(l-1)) rounded (none for layer 1), the
// parameters' gradients rounded into theirs.
Status pureClsNormBackward(const DnnlContext& context, const PureVitPrep& v, const BackwardBuffers& b,
                           const BFloat16* dFull) {
  const Index count = v.batch * v.seq * v.width;
  const WideNormWork work{floatAt(b.workspace, v.bX),       floatAt(b.workspace, v.bDy),
                          floatAt(b.workspace, v.bDx),      floatAt(b.workspace, v.bParams),
                          floatAt(b.workspace, v.bDParams), b.workspace + v.bDnnl};
  REMAT_RETURN_IF_ERROR(wideNormBackward(context, v.ln, count, v.width, halfOf(b.x), dFull, halfOf(b.params),
                                         reinterpret_cast<const float*>(b.extra + v.stats), halfOf(b.paramGrads),
                                         work));
  if (b.dx != nullptr) castToHalf(count, work.dx, halfOf(b.dx));
  return Status::ok();
}

}  // namespace

Status backwardPureClsHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const PureVitPrep& v = *prepared.pureVit;
  if (b.workspace == nullptr || b.x == nullptr || (v.norm && b.extra == nullptr) || (v.tanhOut && b.y == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the head's backward lacks x(l-1), x(l), E or its workspace");
  const Index d = v.width, count = v.batch * v.outFeatures;
  BFloat16 *rows = halfAt(b.workspace, v.bA), *dz = halfAt(b.workspace, v.bDz);
  BFloat16 *dRows = halfAt(b.workspace, v.bDRows), *dFull = halfAt(b.workspace, v.bFull);
  const BFloat16* normed = v.norm ? reinterpret_cast<const BFloat16*>(b.extra + v.lnOut) : halfOf(b.x);
  gatherFirstTokens(v.batch, v.seq, d, normed, rows);
  const BFloat16* dy = halfOf(b.dy);
  if (v.tanhOut) {
    poolerTanhBackward(count, dy, halfOf(b.y), dz);
    dy = dz;
  }
  REMAT_RETURN_IF_ERROR(v.linear.backward(context, rows, dy, nullptr, dRows, param(b.paramGrads, v.weight),
                                          v.bias >= 0 ? param(b.paramGrads, v.bias) : nullptr, b.workspace + v.bDnnl,
                                          halfOf(b.params) + v.weight));
  // Without the norm d(x) is the scattered gradient itself; layer 1 without it: only the parameters'.
  scatterFirstTokens(v.batch, v.seq, d, dRows, v.norm || b.dx == nullptr ? dFull : halfOf(b.dx));
  if (!v.norm) return Status::ok();
  return pureClsNormBackward(context, v, b, dFull);
}

}  // namespace remat::cpu
