// lm_head under bf16-mixed on the CPU (docs/memory-model.md 12.10): ln_f in float32 (its
// statistics in E; it reads x(l-1)), the projection a HalfLinearOp reading ln_f's output's bfloat16
// cast and the table's bfloat16 copy (both saved in E after the statistics, as the model counts
// them), bfloat16 logits cast to float32 (autocast runs cross entropy in float32) and log_softmax
// into x(n) as in float32. The backward: log_softmax's float32 d(logits), its bfloat16 cast (the
// cast's backward), the projection's backward writing ln_f's float32 d(output) and adding the
// table's half gradient into the float32 master (layer 1's for a tied head), then ln_f's backward.
#include <algorithm>

#include "block_prep.hpp"
#include "device_impl.hpp"

namespace remat::cpu {

struct HalfLmHeadPrep {
  bool norm = true, tied = false;
  LayerNormOp ln;
  HalfLinearOp projection;
  Index weight = 0;                                                       // W's offset in the parameters (floats)
  std::uint64_t stats = 0, copies = 0, savedBytes = 0, discardShift = 0;  // E
  std::uint64_t lnOut = 0, halfLogits = 0, logits = 0, fDnnl = 0;         // forward workspace
  std::uint64_t dLogits = 0, dHalfLogits = 0, dLnOut = 0, bDnnl = 0;      // backward workspace
};

namespace {

Status createHalfHeadOps(const DnnlContext& context, HalfLmHeadPrep& h, const TransformerEnds& e, float epsilon,
                         bool firstLayer, const std::string& label) {
  const InputGrad grad = firstLayer ? InputGrad::None : InputGrad::Write;
  if (h.norm)
    REMAT_RETURN_IF_ERROR(
        assign(LayerNormOp::create(context, e.tokens, e.width, epsilon, grad, label + ", ln_f"), h.ln));
  REMAT_RETURN_IF_ERROR(assign(HalfLinearOp::create(context, e.tokens, e.width, e.vocab, false, true,
                                                    h.norm ? InputGrad::Write : grad, label + ", projection"),
                               h.projection));
  return Status::ok();
}

void layOutHalfHead(HalfLmHeadPrep& h, const TransformerEnds& e, PreparedLayer& prepared) {
  const std::uint64_t T = static_cast<std::uint64_t>(e.tokens), d = static_cast<std::uint64_t>(e.width),
                      V = static_cast<std::uint64_t>(e.vocab);
  const HalfCopies& copies = h.projection.copies();
  h.stats = 0;
  h.copies = h.norm ? 2 * T * 4 : 0;
  h.savedBytes = h.copies + copies.inputCastBytes() + copies.weightCopyBytes();
  const std::uint64_t lnFwd = h.norm ? h.ln.forwardScratchBytes() : 0;
  const std::uint64_t lnBwd = h.norm ? h.ln.backwardScratchBytes() : 0;
  ScratchLayout f, b;
  h.lnOut = f.add(T * d * 4);
  h.halfLogits = f.add(aligned(T * V * 2));
  h.logits = f.add(T * V * 4);
  h.fDnnl = f.add(std::max(lnFwd, h.projection.forwardScratchBytes()));
  h.discardShift = aligned(h.savedBytes);
  prepared.requiredFwdWorkspace = h.discardShift + f.bytes();
  h.dLogits = b.add(T * V * 4);
  h.dHalfLogits = b.add(aligned(T * V * 2));
  h.dLnOut = b.add(T * d * 4);
  h.bDnnl = b.add(std::max(lnBwd, h.projection.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
}

}  // namespace

Status prepareHalfLmHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                         const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  TransformerEnds& e = prepared.ends;
  auto h = std::make_shared<HalfLmHeadPrep>();
  h->norm = spec.norm;
  h->tied = spec.tied;
  h->weight = h->norm ? 2 * e.width : 0;
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, h->norm, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, true, "needs_output"));
  REMAT_RETURN_IF_ERROR(
      createHalfHeadOps(context, *h, e, static_cast<float>(spec.epsilon), firstLayer, prepared.label));
  layOutHalfHead(*h, e, prepared);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, h->savedBytes));
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.halfLmHead = std::move(h);
  return Status::ok();
}

Status forwardHalfLmHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                         const ForwardBuffers& b) {
  const HalfLmHeadPrep& h = *prepared.halfLmHead;
  const TransformerEnds& e = prepared.ends;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr) || (h.tied && b.sharedParams == nullptr))
    return Status::internal("cpu: " + prepared.label +
                            ": the head's forward lacks its workspace, E or layer 1's table");
  const float* weight = h.tied ? b.sharedParams : b.params + h.weight;
  std::byte* saved = keep ? b.extra : b.workspace;
  std::byte* scratch = b.workspace + (keep ? 0 : h.discardShift);
  const float* projected = b.x;
  if (h.norm) {
    auto* lnOut = reinterpret_cast<float*>(scratch + h.lnOut);
    REMAT_RETURN_IF_ERROR(
        h.ln.forward(context, b.x, b.params, lnOut, reinterpret_cast<float*>(saved + h.stats), scratch + h.fDnnl));
    projected = lnOut;
  }
  auto* halfLogits = reinterpret_cast<BFloat16*>(scratch + h.halfLogits);
  auto* logits = reinterpret_cast<float*>(scratch + h.logits);
  REMAT_RETURN_IF_ERROR(
      h.projection.forward(context, projected, weight, nullptr, halfLogits, saved + h.copies, scratch + h.fDnnl));
  castToFloat(e.tokens * e.vocab, halfLogits, logits);
  logSoftmaxRows(e.tokens, e.vocab, logits, b.y);
  return Status::ok();
}

Status backwardHalfLmHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const HalfLmHeadPrep& h = *prepared.halfLmHead;
  const TransformerEnds& e = prepared.ends;
  if (b.workspace == nullptr || b.y == nullptr || b.extra == nullptr || (h.norm && b.x == nullptr) ||
      (h.tied && (b.sharedParams == nullptr || b.sharedParamGrads == nullptr)))
    return Status::internal("cpu: " + prepared.label +
                            ": the head's backward lacks x(l-1), x(l), E, its workspace or layer 1's table");
  float* weightGrad = h.tied ? b.sharedParamGrads : b.paramGrads + h.weight;
  auto* dLogits = reinterpret_cast<float*>(b.workspace + h.dLogits);
  auto* dHalf = reinterpret_cast<BFloat16*>(b.workspace + h.dHalfLogits);
  std::byte* dnnl = b.workspace + h.bDnnl;
  logSoftmaxBackwardRows(e.tokens, e.vocab, b.y, b.dy, dLogits);
  castToHalf(e.tokens * e.vocab, dLogits, dHalf);
  const std::byte* copies = b.extra + h.copies;
  if (!h.norm) return h.projection.backward(context, nullptr, dHalf, copies, b.dx, weightGrad, nullptr, dnnl);
  auto* dLnOut = reinterpret_cast<float*>(b.workspace + h.dLnOut);
  REMAT_RETURN_IF_ERROR(h.projection.backward(context, nullptr, dHalf, copies, dLnOut, weightGrad, nullptr, dnnl));
  return h.ln.backward(context, b.x, dLnOut, b.params, reinterpret_cast<const float*>(b.extra + h.stats), b.dx,
                       b.paramGrads, dnnl);
}

}  // namespace remat::cpu
