// Swin's patch embedding, patch merging and head on the CPU (docs/memory-model.md 12.6), from the
// transformer kinds' pieces (oneDNN's ConvOp, LayerNormOp, LinearOp) and window.hpp's gathers. Each
// E holds what the model says PyTorch keeps; a discard-mode forward lays it out at the start of its
// workspace. Every x(l) is the channels-last residual stream [N, H, W, C] in canonical order (the
// head's [N, out]).
//
// swin_embedding: the conv (kernel = stride = patch) over the channels-last image writes [N, h, w, C],
// which is the permuted view LayerNorm normalises; E: that conv output and the norm's statistics.
// Parameters: the conv's weight [C, 3, k, k] and bias, the norm's weight and bias.
// patch_merging: E: the concatenation of the 2x2 neighbours (the norm's input), the norm's output
// (the reduction's input) and the statistics. Parameters: reduction [2C, 4C] (no bias), the norm's.
// swin_head: E: the norm's statistics, the normalised map (avgpool's saved self) and the pooled
// [N, C] (the linear's input). Parameters: the norm's, then the head's weight [out, C] and bias.
#include <algorithm>

#include "block_prep.hpp"
#include "device_impl.hpp"
#include "window.hpp"

namespace remat::cpu {

struct SwinEndPrep {
  Index batch = 0, height = 0, width = 0, channels = 0, rows = 0, outFeatures = 0;
  std::optional<ConvOp> conv;
  LayerNormOp ln;
  LinearOp linear;
  Index normP = 0, weight = 0, bias = 0;                                    // parameter offsets (floats)
  std::uint64_t stats = 0, a = 0, b = 0, savedBytes = 0, discardShift = 0;  // E: stats and two tensors
  std::uint64_t fDnnl = 0;                                                  // forward scratch
  std::uint64_t bA = 0, bB = 0, bDnnl = 0;                                  // backward scratch
};

namespace {

float* at(std::byte* base, std::uint64_t offset) { return reinterpret_cast<float*>(base + offset); }
const float* at(const std::byte* base, std::uint64_t offset) { return reinterpret_cast<const float*>(base + offset); }

Status checkSaved(const ChainLayer& layer, const LayerChecks& check, bool needsInput, std::uint64_t savedBytes) {
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, needsInput));
  return check.expectExtra(layer.numbers.extraBytes, savedBytes);
}

// E = stats (2 rows), then tensors of aFloats and bFloats; the discard-mode shift after it.
void layOutSaved(SwinEndPrep& e, Index aFloats, Index bFloats) {
  e.stats = 0;
  e.a = floats(2 * e.rows);
  e.b = e.a + floats(aFloats);
  e.savedBytes = e.b + floats(bFloats);
  e.discardShift = (e.savedBytes + 63) / 64 * 64;
}

struct Saved {
  std::byte* saved;
  std::byte* scratch;
};

Saved savedOf(const SwinEndPrep& e, ForwardMode mode, const ForwardBuffers& b) {
  const bool keep = mode == ForwardMode::Keep;
  return {keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : e.discardShift)};
}

Status requireForward(const PreparedLayer& prepared, ForwardMode mode, const ForwardBuffers& b) {
  if (b.workspace != nullptr && (mode != ForwardMode::Keep || b.extra != nullptr)) return Status::ok();
  return Status::internal("cpu: " + prepared.label + ": the forward lacks its workspace or E");
}

Status requireBackward(const PreparedLayer& prepared, const BackwardBuffers& b, bool needsInput) {
  if (b.workspace != nullptr && b.extra != nullptr && (!needsInput || b.x != nullptr)) return Status::ok();
  return Status::internal("cpu: " + prepared.label + ": the backward lacks x(l-1), E or its workspace");
}

}  // namespace

Status prepareSwinEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                            const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto e = std::make_shared<SwinEndPrep>();
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  e->batch = out[0], e->height = out[1], e->width = out[2], e->channels = out[3];
  e->rows = e->batch * e->height * e->width;
  const Index C = e->channels, weights = C * in[1] * spec.kernel * spec.kernel;
  e->bias = weights;
  e->normP = weights + C;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(e->normP + 2 * C)));
  layOutSaved(*e, e->rows * C, 0);
  REMAT_RETURN_IF_ERROR(checkSaved(layer, check, true, e->savedBytes));
  REMAT_RETURN_IF_ERROR(
      assign(ConvOp::create(context, patchConvGeometry(spec, in, C), true,
                            firstLayer ? InputGrad::None : InputGrad::Write, prepared.label + ", conv"),
             e->conv));
  REMAT_RETURN_IF_ERROR(assign(LayerNormOp::create(context, e->rows, C, static_cast<float>(spec.epsilon),
                                                   InputGrad::Write, prepared.label + ", norm"),
                               e->ln));
  ScratchLayout f, b;
  e->fDnnl = f.add(std::max(e->conv->forwardScratchBytes(), e->ln.forwardScratchBytes()));
  prepared.requiredFwdWorkspace = e->discardShift + f.bytes();
  e->bA = b.add(floats(e->rows * C));  // d(conv output)
  e->bDnnl = b.add(std::max(e->conv->backwardScratchBytes(), e->ln.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.swinEnd = std::move(e);
  return Status::ok();
}

Status forwardSwinEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                            const ForwardBuffers& b) {
  if (prepared.halfSwinEnd) return forwardHalfSwinEmbedding(context, prepared, mode, b);  // bf16-mixed
  const SwinEndPrep& e = *prepared.swinEnd;
  REMAT_RETURN_IF_ERROR(requireForward(prepared, mode, b));
  const Saved s = savedOf(e, mode, b);
  float* conv = at(s.saved, e.a);
  REMAT_RETURN_IF_ERROR(e.conv->forward(context, b.x, b.params, b.params + e.bias, conv, s.scratch + e.fDnnl));
  return e.ln.forward(context, conv, b.params + e.normP, b.y, at(s.saved, e.stats), s.scratch + e.fDnnl);
}

Status backwardSwinEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  if (prepared.halfSwinEnd) return backwardHalfSwinEmbedding(context, prepared, b);  // bf16-mixed
  const SwinEndPrep& e = *prepared.swinEnd;
  REMAT_RETURN_IF_ERROR(requireBackward(prepared, b, true));
  float* g = b.paramGrads;
  float* dConv = at(b.workspace, e.bA);
  std::byte* dnnl = b.workspace + e.bDnnl;
  REMAT_RETURN_IF_ERROR(e.ln.backward(context, at(b.extra, e.a), b.dy, b.params + e.normP, at(b.extra, e.stats), dConv,
                                      g + e.normP, dnnl));
  return e.conv->backward(context, b.x, dConv, b.params, b.dx, g, g + e.bias, dnnl);
}

Status preparePatchMerging(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                           const LayerChecks& check, PreparedLayer& prepared) {
  auto e = std::make_shared<SwinEndPrep>();
  const Shape& in = layer.inputShape;
  e->batch = in[0], e->height = in[1], e->width = in[2], e->channels = in[3];
  e->rows = layer.outputShape[0] * layer.outputShape[1] * layer.outputShape[2];
  const Index C4 = 4 * e->channels;
  e->weight = 0;
  e->normP = 2 * e->channels * C4;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(e->normP + 2 * C4)));
  layOutSaved(*e, e->rows * C4, e->rows * C4);  // a: the concatenation, b: the norm's output
  REMAT_RETURN_IF_ERROR(checkSaved(layer, check, false, e->savedBytes));
  REMAT_RETURN_IF_ERROR(assign(LayerNormOp::create(context, e->rows, C4, static_cast<float>(spec.epsilon),
                                                   InputGrad::Write, prepared.label + ", norm"),
                               e->ln));
  REMAT_RETURN_IF_ERROR(assign(
      LinearOp::create(context, e->rows, C4, 2 * e->channels, false, InputGrad::Write, prepared.label + ", reduction"),
      e->linear));
  ScratchLayout f, b;
  e->fDnnl = f.add(std::max(e->ln.forwardScratchBytes(), e->linear.forwardScratchBytes()));
  prepared.requiredFwdWorkspace = e->discardShift + f.bytes();
  e->bA = b.add(floats(e->rows * C4));  // d(norm output)
  e->bB = b.add(floats(e->rows * C4));  // d(concatenation)
  e->bDnnl = b.add(std::max(e->ln.backwardScratchBytes(), e->linear.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.swinEnd = std::move(e);
  return Status::ok();
}

Status forwardPatchMerging(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                           const ForwardBuffers& b) {
  if (prepared.halfSwinEnd) return forwardHalfPatchMerging(context, prepared, mode, b);  // bf16-mixed
  const SwinEndPrep& e = *prepared.swinEnd;
  REMAT_RETURN_IF_ERROR(requireForward(prepared, mode, b));
  const Saved s = savedOf(e, mode, b);
  float *cat = at(s.saved, e.a), *normed = at(s.saved, e.b);
  mergeGather(e.batch, e.height, e.width, e.channels, b.x, cat);
  REMAT_RETURN_IF_ERROR(
      e.ln.forward(context, cat, b.params + e.normP, normed, at(s.saved, e.stats), s.scratch + e.fDnnl));
  return e.linear.forward(context, normed, b.params + e.weight, nullptr, b.y, s.scratch + e.fDnnl);
}

Status backwardPatchMerging(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  if (prepared.halfSwinEnd) return backwardHalfPatchMerging(context, prepared, b);  // bf16-mixed
  const SwinEndPrep& e = *prepared.swinEnd;
  REMAT_RETURN_IF_ERROR(requireBackward(prepared, b, false));
  float* g = b.paramGrads;
  float *dNormed = at(b.workspace, e.bA), *dCat = at(b.workspace, e.bB);
  std::byte* dnnl = b.workspace + e.bDnnl;
  REMAT_RETURN_IF_ERROR(
      e.linear.backward(context, at(b.extra, e.b), b.dy, b.params + e.weight, dNormed, g + e.weight, nullptr, dnnl));
  REMAT_RETURN_IF_ERROR(e.ln.backward(context, at(b.extra, e.a), dNormed, b.params + e.normP, at(b.extra, e.stats),
                                      dCat, g + e.normP, dnnl));
  if (b.dx != nullptr) mergeScatter(e.batch, e.height, e.width, e.channels, dCat, b.dx);
  return Status::ok();
}

Status prepareSwinHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                       const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto e = std::make_shared<SwinEndPrep>();
  const Shape& in = layer.inputShape;
  e->batch = in[0], e->height = in[1], e->width = in[2], e->channels = in[3];
  e->rows = e->batch * e->height * e->width;
  e->outFeatures = spec.outFeatures;
  const Index C = e->channels;
  e->normP = 0;
  e->weight = 2 * C;
  e->bias = e->weight + e->outFeatures * C;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(e->bias + e->outFeatures)));
  layOutSaved(*e, e->rows * C, e->batch * C);  // a: the normalised map, b: the pooled [N, C]
  REMAT_RETURN_IF_ERROR(checkSaved(layer, check, true, e->savedBytes));
  REMAT_RETURN_IF_ERROR(
      assign(LayerNormOp::create(context, e->rows, C, static_cast<float>(spec.epsilon),
                                 firstLayer ? InputGrad::None : InputGrad::Write, prepared.label + ", norm"),
             e->ln));
  REMAT_RETURN_IF_ERROR(
      assign(LinearOp::create(context, e->batch, C, e->outFeatures, true, InputGrad::Write, prepared.label + ", head"),
             e->linear));
  ScratchLayout f, b;
  e->fDnnl = f.add(std::max(e->ln.forwardScratchBytes(), e->linear.forwardScratchBytes()));
  prepared.requiredFwdWorkspace = e->discardShift + f.bytes();
  e->bA = b.add(floats(e->batch * C));  // d(pooled)
  e->bB = b.add(floats(e->rows * C));   // d(normalised map)
  e->bDnnl = b.add(std::max(e->ln.backwardScratchBytes(), e->linear.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.swinEnd = std::move(e);
  return Status::ok();
}

Status forwardSwinHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                       const ForwardBuffers& b) {
  if (prepared.halfSwinEnd) return forwardHalfSwinHead(context, prepared, mode, b);  // bf16-mixed
  const SwinEndPrep& e = *prepared.swinEnd;
  REMAT_RETURN_IF_ERROR(requireForward(prepared, mode, b));
  const Saved s = savedOf(e, mode, b);
  float *normed = at(s.saved, e.a), *pooled = at(s.saved, e.b);
  REMAT_RETURN_IF_ERROR(
      e.ln.forward(context, b.x, b.params + e.normP, normed, at(s.saved, e.stats), s.scratch + e.fDnnl));
  averagePositions(e.batch, e.height * e.width, e.channels, normed, pooled);
  return e.linear.forward(context, pooled, b.params + e.weight, b.params + e.bias, b.y, s.scratch + e.fDnnl);
}

Status backwardSwinHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  if (prepared.halfSwinEnd) return backwardHalfSwinHead(context, prepared, b);  // bf16-mixed
  const SwinEndPrep& e = *prepared.swinEnd;
  REMAT_RETURN_IF_ERROR(requireBackward(prepared, b, true));
  float* g = b.paramGrads;
  float *dPooled = at(b.workspace, e.bA), *dNormed = at(b.workspace, e.bB);
  std::byte* dnnl = b.workspace + e.bDnnl;
  REMAT_RETURN_IF_ERROR(
      e.linear.backward(context, at(b.extra, e.b), b.dy, b.params + e.weight, dPooled, g + e.weight, g + e.bias, dnnl));
  averagePositionsBackward(e.batch, e.height * e.width, e.channels, dPooled, dNormed);
  return e.ln.backward(context, b.x, dNormed, b.params + e.normP, at(b.extra, e.stats), b.dx, g + e.normP, dnnl);
}

}  // namespace remat::cpu
