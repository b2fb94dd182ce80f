// The language-model head on the CPU (docs/memory-model.md 12.2): ln_f (oneDNN's layer
// normalization over the N*S token rows), logits = x W^T (oneDNN's matmul, no bias), log_softmax
// (own rows: one thread per row). x(n) is the log-probabilities, which the loss reads; the logits
// exist only in the forward's workspace. E is ln_f's statistics and output (the projection's input);
// a discard-mode forward keeps them at the start of its workspace. The backward forms
// d(logits) = dy - exp(y) * sum(dy) from x(n) (log_softmax's backward from its result), then the
// projection's and ln_f's backward. Parameters: ln_f's weight and bias, then W [V, d]; a tied head
// (GPT-2's) has no W of its own: it reads the token embedding's table wte [V, d] (layer 1's
// parameters from offset 0, passed as the call's shared parameters) and adds W's gradient into
// layer 1's table gradient, which the embedding's own backward adds to later (static, or made by
// this backward under on-backward gradients: memory-model.md 11.2).
#include <algorithm>
#include <cmath>

#include "block_prep.hpp"
#include "device_impl.hpp"

namespace remat::cpu {

struct LmHeadPrep {
  bool norm = true, tied = false;
  LayerNormOp ln;
  LinearOp projection;
  Index weight = 0;  // W's offset in the parameters (floats)
  // E (keep) or the start of a discard-mode workspace: statistics [2T], ln_f's output [T, d]
  std::uint64_t stats = 0, lnOut = 0, savedBytes = 0;
  std::uint64_t logits = 0, fDnnl = 0, discardShift = 0;  // forward workspace
  std::uint64_t dLogits = 0, dLnOut = 0, bDnnl = 0;       // backward workspace
};

void logSoftmaxRows(Index rows, Index width, const float* logits, float* out) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const float* x = logits + r * width;
    const float top = *std::max_element(x, x + width);
    double sum = 0.0;
    for (Index i = 0; i < width; ++i) sum += std::exp(static_cast<double>(x[i] - top));
    const float shift = top + static_cast<float>(std::log(sum));
    for (Index i = 0; i < width; ++i) out[r * width + i] = x[i] - shift;
  }
}

void logSoftmaxBackwardRows(Index rows, Index width, const float* y, const float* dy, float* dx) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const Index at = r * width;
    double sum = 0.0;
    for (Index i = 0; i < width; ++i) sum += dy[at + i];
    for (Index i = 0; i < width; ++i) dx[at + i] = dy[at + i] - std::exp(y[at + i]) * static_cast<float>(sum);
  }
}

namespace {

Status createHeadOps(const DnnlContext& context, LmHeadPrep& h, const TransformerEnds& e, float epsilon,
                     bool firstLayer, const std::string& label) {
  const InputGrad grad = firstLayer ? InputGrad::None : InputGrad::Write;
  if (h.norm)
    REMAT_RETURN_IF_ERROR(
        assign(LayerNormOp::create(context, e.tokens, e.width, epsilon, grad, label + ", ln_f"), h.ln));
  // Without ln_f the projection writes d(x) itself.
  REMAT_RETURN_IF_ERROR(assign(LinearOp::create(context, e.tokens, e.width, e.vocab, false,
                                                h.norm ? InputGrad::Write : grad, label + ", projection"),
                               h.projection));
  return Status::ok();
}

}  // namespace

namespace {

// A tied head's table is layer 1's: a token embedding of the same vocabulary and width. Its backward
// adds into layer 1's gradient: static, or made by this B(n) under on-backward gradients (the first
// backward to use the table; memory-model.md 11.2).
Status checkTiedTable(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check) {
  const ChainLayer& first = chain.layers.front();
  const LayerSpec& table = chain.spec.layers[first.specIndex];
  if (first.kind != LayerKind::TokenEmbedding || table.vocab != spec.vocab || table.width != layer.inputShape[2])
    return check.fail("tied: layer 1 must be a token_embedding of vocabulary " + std::to_string(spec.vocab) +
                      " and width " + std::to_string(layer.inputShape[2]) + " (the head's weight is its table)");
  return Status::ok();
}

}  // namespace

Status prepareLmHead(const DnnlContext& context, const Chain& chain, const ChainLayer& layer, const LayerSpec& spec,
                     const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  if (spec.tied) REMAT_RETURN_IF_ERROR(checkTiedTable(chain, layer, spec, check));
  TransformerEnds& e = prepared.ends;
  e.batch = layer.inputShape[0];
  e.seq = layer.inputShape[1];
  e.tokens = e.batch * e.seq;
  e.width = layer.inputShape[2];
  e.vocab = spec.vocab;
  auto h = std::make_shared<LmHeadPrep>();
  h->norm = spec.norm;
  h->tied = spec.tied;
  h->weight = h->norm ? 2 * e.width : 0;
  REMAT_RETURN_IF_ERROR(
      check.expectParams(layer.paramCount, static_cast<std::uint64_t>(h->weight + (h->tied ? 0 : e.vocab * e.width))));
  if (chain.step.precision == Precision::Bf16Mixed)  // autocast's casts: run_heads_half.cpp
    return prepareHalfLmHead(context, layer, spec, check, firstLayer, prepared);
  if (prepared.halfParams) return preparePureLmHead(context, layer, spec, check, firstLayer, prepared);  // pure bf16
  h->stats = 0;
  h->lnOut = floats(2 * e.tokens);
  h->savedBytes = h->norm ? floats(2 * e.tokens) + floats(e.tokens * e.width) : 0;
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, true, "needs_output"));
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, h->savedBytes));
  REMAT_RETURN_IF_ERROR(createHeadOps(context, *h, e, static_cast<float>(spec.epsilon), firstLayer, prepared.label));
  const std::uint64_t lnFwd = h->norm ? h->ln.forwardScratchBytes() : 0;
  const std::uint64_t lnBwd = h->norm ? h->ln.backwardScratchBytes() : 0;
  ScratchLayout f, b;
  h->logits = f.add(floats(e.tokens * e.vocab));
  h->fDnnl = f.add(std::max(lnFwd, h->projection.forwardScratchBytes()));
  h->discardShift = (h->savedBytes + 63) / 64 * 64;
  prepared.requiredFwdWorkspace = h->discardShift + f.bytes();
  h->dLogits = b.add(floats(e.tokens * e.vocab));
  if (h->norm) h->dLnOut = b.add(floats(e.tokens * e.width));
  h->bDnnl = b.add(std::max(lnBwd, h->projection.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.lmHead = std::move(h);
  return Status::ok();
}

Status forwardLmHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                     const ForwardBuffers& b) {
  if (prepared.halfLmHead) return forwardHalfLmHead(context, prepared, mode, b);
  if (prepared.pureLmHead) return forwardPureLmHead(context, prepared, mode, b);
  const LmHeadPrep& h = *prepared.lmHead;
  const TransformerEnds& e = prepared.ends;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && h.norm && b.extra == nullptr) || (h.tied && b.sharedParams == nullptr))
    return Status::internal("cpu: " + prepared.label +
                            ": the head's forward lacks its workspace, E or layer 1's table");
  const float* weight = h.tied ? b.sharedParams : b.params + h.weight;
  std::byte* saved = keep ? b.extra : b.workspace;
  std::byte* scratch = b.workspace + (keep ? 0 : h.discardShift);
  auto* logits = reinterpret_cast<float*>(scratch + h.logits);
  const float* projected = b.x;
  if (h.norm) {
    auto* lnOut = reinterpret_cast<float*>(saved + h.lnOut);
    REMAT_RETURN_IF_ERROR(
        h.ln.forward(context, b.x, b.params, lnOut, reinterpret_cast<float*>(saved + h.stats), scratch + h.fDnnl));
    projected = lnOut;
  }
  REMAT_RETURN_IF_ERROR(h.projection.forward(context, projected, weight, nullptr, logits, scratch + h.fDnnl));
  logSoftmaxRows(e.tokens, e.vocab, logits, b.y);
  return Status::ok();
}

Status backwardLmHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  if (prepared.halfLmHead) return backwardHalfLmHead(context, prepared, b);
  if (prepared.pureLmHead) return backwardPureLmHead(context, prepared, b);
  const LmHeadPrep& h = *prepared.lmHead;
  const TransformerEnds& e = prepared.ends;
  if (b.workspace == nullptr || b.y == nullptr || b.x == nullptr || (h.norm && b.extra == nullptr) ||
      (h.tied && (b.sharedParams == nullptr || b.sharedParamGrads == nullptr)))
    return Status::internal("cpu: " + prepared.label +
                            ": the head's backward lacks x(l-1), x(l), E, its workspace or layer 1's table");
  const float* weight = h.tied ? b.sharedParams : b.params + h.weight;
  float* weightGrad = h.tied ? b.sharedParamGrads : b.paramGrads + h.weight;
  auto* dLogits = reinterpret_cast<float*>(b.workspace + h.dLogits);
  std::byte* dnnl = b.workspace + h.bDnnl;
  logSoftmaxBackwardRows(e.tokens, e.vocab, b.y, b.dy, dLogits);
  if (!h.norm) return h.projection.backward(context, b.x, dLogits, weight, b.dx, weightGrad, nullptr, dnnl);
  const auto* lnOut = reinterpret_cast<const float*>(b.extra + h.lnOut);
  auto* dLnOut = reinterpret_cast<float*>(b.workspace + h.dLnOut);
  REMAT_RETURN_IF_ERROR(h.projection.backward(context, lnOut, dLogits, weight, dLnOut, weightGrad, nullptr, dnnl));
  return h.ln.backward(context, b.x, dLnOut, b.params, reinterpret_cast<const float*>(b.extra + h.stats), b.dx,
                       b.paramGrads, dnnl);
}

// Pure bf16: the same gradient in bfloat16 (-1/T rounded).
void nllLossBackward(Index tokens, Index vocab, const std::int64_t* labels, BFloat16* grad) {
  const BFloat16 invTokens(-1.0f / static_cast<float>(tokens));
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < tokens; ++t) {
    std::fill_n(grad + t * vocab, vocab, BFloat16(0.0f));
    grad[t * vocab + labels[t]] = invTokens;
  }
}

void nllLossBackward(Index tokens, Index vocab, const std::int64_t* labels, float* grad) {
  const float invTokens = 1.0f / static_cast<float>(tokens);
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < tokens; ++t) {
    std::fill_n(grad + t * vocab, vocab, 0.0f);
    grad[t * vocab + labels[t]] = -invTokens;
  }
}

}  // namespace remat::cpu
