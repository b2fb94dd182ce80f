// lm_head under pure bf16 on the CPU (the model cast with .to(torch.bfloat16); docs/memory-model.md
// 12.11): ln_f reads and writes bfloat16 and keeps float32 statistics (oneDNN's float32 layer
// normalization on a widening of its input and parameters in the workspace, its output rounded
// once), the projection is a pure HalfLinearOp reading ln_f's bfloat16 output (E, after the
// statistics) and the bfloat16 table (layer 1's when tied), the logits are bfloat16 and
// log_softmax, computed in float32 from them row by row (no float32 copy: the workspaces are the
// model's logits and d(logits), T * V * 2 each), writes bfloat16 log-probabilities into x(n), as
// PyTorch's CPU kernel runs it on a bfloat16 tensor. The backward: log_softmax's d(logits) rounded
// to bfloat16, the projection's backward adding the table's gradient into the bfloat16 buffer
// (layer 1's for a tied head), then ln_f's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "block_prep.hpp"
#include "device_impl.hpp"
#include "wide_norm.hpp"

namespace remat::cpu {

struct PureLmHeadPrep {
  bool norm = true, tied = false;
  LayerNormOp ln;
  HalfLinearOp projection;
  Index weight = 0;  // W's offset in the parameters (bfloat16 elements)
  std::uint64_t stats = 0, lnOut = 0, savedBytes = 0, discardShift = 0;  // E
  // forward workspace: ln_f's float32 input, output and parameters; the bfloat16 logits
  std::uint64_t wideIn = 0, wideOut = 0, wideParams = 0, halfLogits = 0, fDnnl = 0;
  // backward workspace: d(logits) in bfloat16, d(ln_f's output), ln_f's float32 x, d(output),
  // d(input), parameters and their gradients
  std::uint64_t dHalf = 0, dLnOut = 0, wideX = 0, wideDln = 0, wideDx = 0;
  std::uint64_t bParams = 0, dParams = 0, bDnnl = 0;
};

namespace {

Status createPureHeadOps(const DnnlContext& context, PureLmHeadPrep& h, const TransformerEnds& e, float epsilon,
                         bool firstLayer, const std::string& label) {
  const InputGrad grad = firstLayer ? InputGrad::None : InputGrad::Write;
  if (h.norm)
    REMAT_RETURN_IF_ERROR(
        assign(LayerNormOp::create(context, e.tokens, e.width, epsilon, InputGrad::Write, label + ", ln_f"), h.ln));
  REMAT_RETURN_IF_ERROR(assign(HalfLinearOp::create(context, e.tokens, e.width, e.vocab, false, false,
                                                    h.norm ? InputGrad::Write : grad, label + ", projection", true),
                               h.projection));
  return Status::ok();
}

void layOutPureHead(PureLmHeadPrep& h, const TransformerEnds& e, PreparedLayer& prepared) {
  const auto T = static_cast<std::uint64_t>(e.tokens), d = static_cast<std::uint64_t>(e.width),
             V = static_cast<std::uint64_t>(e.vocab);
  h.stats = 0;
  h.lnOut = h.norm ? 2 * T * 4 : 0;
  h.savedBytes = h.norm ? 2 * T * 4 + T * d * 2 : 0;
  const std::uint64_t lnFwd = h.norm ? h.ln.forwardScratchBytes() : 0;
  const std::uint64_t lnBwd = h.norm ? h.ln.backwardScratchBytes() : 0;
  ScratchLayout f, b;
  if (h.norm) {
    h.wideIn = f.add(T * d * 4);
    h.wideOut = f.add(T * d * 4);
    h.wideParams = f.add(2 * d * 4);
  }
  h.halfLogits = f.add(aligned(T * V * 2));  // the model's wf: T * V * s
  h.fDnnl = f.add(std::max(lnFwd, h.projection.forwardScratchBytes()));
  h.discardShift = aligned(h.savedBytes);
  prepared.requiredFwdWorkspace = h.discardShift + f.bytes();
  h.dHalf = b.add(aligned(T * V * 2));  // the model's wb: d(logits), then d(ln_f's output) beside it
  if (h.norm) {
    h.dLnOut = b.add(aligned(T * d * 2));
    h.wideX = b.add(T * d * 4);
    h.wideDln = b.add(T * d * 4);
    h.wideDx = b.add(T * d * 4);
    h.bParams = b.add(2 * d * 4);
    h.dParams = b.add(2 * d * 4);
  }
  h.bDnnl = b.add(std::max(lnBwd, h.projection.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
}

const BFloat16* halfOf(const float* p) { return reinterpret_cast<const BFloat16*>(p); }
BFloat16* halfOf(float* p) { return reinterpret_cast<BFloat16*>(p); }

// log_softmax over each bfloat16 row, in float32 arithmetic, each result rounded to bfloat16
// (PyTorch's CPU kernel on a bfloat16 tensor): row by row, no float32 copy of the logits.
void logSoftmaxRowsHalf(Index rows, Index width, const BFloat16* logits, BFloat16* out) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const BFloat16* x = logits + r * width;
    float top = x[0].value();
    for (Index i = 1; i < width; ++i) top = std::max(top, x[i].value());
    double sum = 0.0;
    for (Index i = 0; i < width; ++i) sum += std::exp(static_cast<double>(x[i].value() - top));
    const float shift = top + static_cast<float>(std::log(sum));
    for (Index i = 0; i < width; ++i) out[r * width + i] = BFloat16(x[i].value() - shift);
  }
}

// Its backward: dx = dy - exp(y) * sum(dy), each rounded to bfloat16.
void logSoftmaxBackwardRowsHalf(Index rows, Index width, const BFloat16* y, const BFloat16* dy, BFloat16* dx) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const Index at = r * width;
    double sum = 0.0;
    for (Index i = 0; i < width; ++i) sum += dy[at + i].value();
    const auto total = static_cast<float>(sum);
    for (Index i = 0; i < width; ++i) dx[at + i] = BFloat16(dy[at + i].value() - std::exp(y[at + i].value()) * total);
  }
}

}  // namespace

Status preparePureLmHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                         const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  const TransformerEnds& e = prepared.ends;
  auto h = std::make_shared<PureLmHeadPrep>();
  h->norm = spec.norm;
  h->tied = spec.tied;
  h->weight = h->norm ? 2 * e.width : 0;
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, true, "needs_output"));
  REMAT_RETURN_IF_ERROR(
      createPureHeadOps(context, *h, e, static_cast<float>(spec.epsilon), firstLayer, prepared.label));
  layOutPureHead(*h, e, prepared);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, h->savedBytes));
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.pureLmHead = std::move(h);
  return Status::ok();
}

Status forwardPureLmHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                         const ForwardBuffers& b) {
  const PureLmHeadPrep& h = *prepared.pureLmHead;
  const TransformerEnds& e = prepared.ends;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && h.norm && b.extra == nullptr) || (h.tied && b.sharedParams == nullptr))
    return Status::internal("cpu: " + prepared.label +
                            ": the head's forward lacks its workspace, E or layer 1's table");
  const float* weight = h.tied ? b.sharedParams : reinterpret_cast<const float*>(halfOf(b.params) + h.weight);
  std::byte* saved = keep ? b.extra : b.workspace;
  std::byte* scratch = b.workspace + (keep ? 0 : h.discardShift);
  const void* projected = b.x;
  if (h.norm) {
    const Index count = e.tokens * e.width;
    auto* wideIn = reinterpret_cast<float*>(scratch + h.wideIn);
    auto* wideOut = reinterpret_cast<float*>(scratch + h.wideOut);
    auto* params = reinterpret_cast<float*>(scratch + h.wideParams);
    auto* lnOut = reinterpret_cast<BFloat16*>(saved + h.lnOut);
    castToFloat(count, halfOf(b.x), wideIn);
    castToFloat(2 * e.width, halfOf(b.params), params);
    REMAT_RETURN_IF_ERROR(
        h.ln.forward(context, wideIn, params, wideOut, reinterpret_cast<float*>(saved + h.stats), scratch + h.fDnnl));
    castToHalf(count, wideOut, lnOut);
    projected = lnOut;
  }
  auto* halfLogits = reinterpret_cast<BFloat16*>(scratch + h.halfLogits);
  REMAT_RETURN_IF_ERROR(
      h.projection.forward(context, projected, weight, nullptr, halfLogits, saved, scratch + h.fDnnl));
  logSoftmaxRowsHalf(e.tokens, e.vocab, halfLogits, halfOf(b.y));
  return Status::ok();
}

namespace {

// ln_f's backward: d(x(l-1)) rounded to bfloat16 (none for layer 1), its parameters' gradients
// rounded into theirs.
Status pureNormBackward(const DnnlContext& context, const PureLmHeadPrep& h, const TransformerEnds& e,
                        const BackwardBuffers& b) {
  const Index count = e.tokens * e.width;
  auto wide = [&b](std::uint64_t offset) { return reinterpret_cast<float*>(b.workspace + offset); };
  const WideNormWork work{wide(h.wideX),   wide(h.wideDln), wide(h.wideDx),
                          wide(h.bParams), wide(h.dParams), b.workspace + h.bDnnl};
  REMAT_RETURN_IF_ERROR(wideNormBackward(
      context, h.ln, count, e.width, halfOf(b.x), reinterpret_cast<const BFloat16*>(b.workspace + h.dLnOut),
      halfOf(b.params), reinterpret_cast<const float*>(b.extra + h.stats), halfOf(b.paramGrads), work));
  if (b.dx != nullptr) castToHalf(count, work.dx, halfOf(b.dx));
  return Status::ok();
}

}  // namespace

Status backwardPureLmHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const PureLmHeadPrep& h = *prepared.pureLmHead;
  const TransformerEnds& e = prepared.ends;
  if (b.workspace == nullptr || b.y == nullptr || b.x == nullptr || (h.norm && b.extra == nullptr) ||
      (h.tied && (b.sharedParams == nullptr || b.sharedParamGrads == nullptr)))
    return Status::internal("cpu: " + prepared.label +
                            ": the head's backward lacks x(l-1), x(l), E, its workspace or layer 1's table");
  const BFloat16* weight = h.tied ? halfOf(b.sharedParams) : halfOf(b.params) + h.weight;
  BFloat16* weightGrad = h.tied ? halfOf(b.sharedParamGrads) : halfOf(b.paramGrads) + h.weight;
  auto* dHalf = reinterpret_cast<BFloat16*>(b.workspace + h.dHalf);
  std::byte* dnnl = b.workspace + h.bDnnl;
  logSoftmaxBackwardRowsHalf(e.tokens, e.vocab, halfOf(b.y), halfOf(b.dy), dHalf);
  auto* dw = reinterpret_cast<float*>(weightGrad);
  if (!h.norm) return h.projection.backward(context, b.x, dHalf, nullptr, b.dx, dw, nullptr, dnnl, weight);
  REMAT_RETURN_IF_ERROR(h.projection.backward(context, b.extra + h.lnOut, dHalf, nullptr, b.workspace + h.dLnOut, dw,
                                              nullptr, dnnl, weight));
  return pureNormBackward(context, h, e, b);
}

}  // namespace remat::cpu
