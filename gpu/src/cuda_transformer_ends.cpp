// The transformer ends on the GPU (docs/memory-model.md 12.2, docs/gpu.md), op for op the CPU's.
//
// token_embedding: x0 holds the ids as int64 (PyTorch's torch.long, kTokenIdBytes each), checked on
// the host (copied back) to lie in the vocabulary before anything is written. E: the int64 position
// arange (8*S bytes); BERT's type ids (S int64 zeros), the LayerNorm's statistics [2T] and its
// input (the sum, [T, d]); the dropout mask (p > 0). The forward writes both lookups into its
// workspace (exactly the model's bytes for GPT's), BERT's type lookup after them; the backward
// scatters d(x1) (through the mask) into the tables, BERT's through the norm's backward first.
//
// lm_head: E = ln_f's statistics and output; the logits [T, V] exist only in the forward's
// workspace (after the saved tensors in discard mode); x(n) is the log-probabilities. A tied head
// reads layer 1's table through the call's shared parameters and adds its gradient there.
#include "cuda_transformer_ends.hpp"

#include <cmath>
#include <vector>

#include "cuda_transformer.hpp"
#include "kernels_embedding.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {

struct EndsState {
  Index batch = 0, seq = 0, tokens = 0, width = 0, vocab = 0;
  double dropoutP = 0.0;
  float epsilon = 1e-5f;
  kernels::EmbeddingShape embedding;
  Index normParams = 0;  // token_embedding: the LayerNorm's weight and bias (floats; 0: none)
  bool norm = false, tied = false;
  Index weight = 0;  // lm_head: W's offset (floats)
  // E (bytes): token_embedding's arange at 0, typeIdsAt, statsAt, normInputAt, maskAt;
  // lm_head's statistics at 0 and lnOutAt
  std::uint64_t typeIdsAt = 0, statsAt = 0, normInputAt = 0, maskAt = 0, lnOutAt = 0, savedBytes = 0;
  // workspaces (bytes)
  std::uint64_t positionsAt = 0, typesAt = 0, logitsAt = 0, discardShift = 0;
  std::uint64_t dNormAt = 0, dSumAt = 0, dLogitsAt = 0, dLnOutAt = 0;
};

namespace {

constexpr std::uint64_t kAlignBytes = 256;

std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }
std::uint64_t aligned(std::uint64_t bytes) { return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

void layOutEmbedding(const LayerSpec& spec, EndsState& e, LayerState& state) {
  std::uint64_t at = 8 * static_cast<std::uint64_t>(e.seq);
  if (spec.segments > 0) {
    e.typeIdsAt = at;
    at += 8 * static_cast<std::uint64_t>(e.seq);
  }
  if (e.norm) {
    e.statsAt = at;
    at += floats(2 * e.tokens);
    e.normInputAt = at;
    at += floats(e.tokens * e.width);
  }
  e.maskAt = at;
  e.savedBytes = at + (e.dropoutP > 0.0 ? static_cast<std::uint64_t>(e.tokens * e.width) : 0);
  e.positionsAt = floats(e.tokens * e.width);
  state.requiredFwdWorkspace = e.positionsAt + floats(e.seq * e.width);
  if (spec.segments > 0) {
    e.typesAt = aligned(state.requiredFwdWorkspace);
    state.requiredFwdWorkspace = e.typesAt + floats(e.tokens * e.width);
  }
  state.requiredBwdWorkspace = 0;
  if (!e.norm) return;
  std::uint64_t b = 0;
  if (e.dropoutP > 0.0) b = aligned(floats(e.tokens * e.width));  // d(norm): d(x1) through the mask
  e.dSumAt = b;
  state.requiredBwdWorkspace = b + floats(e.tokens * e.width);
}

// x0 as the int64 ids it holds (the buffers' pointers are typed float for every other kind).
const std::int64_t* tokenIds(const float* x) { return reinterpret_cast<const std::int64_t*>(x); }

// The ids copied back and checked: in [0, vocab).
Status checkIds(const EndsState& e, const std::string& label, cudaStream_t stream, const std::int64_t* ids) {
  std::vector<std::int64_t> host(static_cast<std::size_t>(e.tokens));
  REMAT_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), ids, host.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost, stream));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (Index t = 0; t < e.tokens; ++t) {
    const std::int64_t v = host[static_cast<std::size_t>(t)];
    if (v < 0 || v >= e.vocab)
      return Status::invalid("gpu: " + label + ": token id " + std::to_string(v) + " of sample " +
                             std::to_string(t / e.seq) + ", position " + std::to_string(t % e.seq) + " is not in [0, " +
                             std::to_string(e.vocab) + ") (the vocabulary)");
  }
  return Status::ok();
}

}  // namespace

Status prepareTokenEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, std::size_t l,
                             LayerState& state) {
  if (l != 1) return check.fail("a token embedding must be the chain's first layer (it reads the ids x0)");
  if (layer.inputShape.size() != 2) return check.fail("token_embedding needs [N, S] ids");
  auto e = std::make_shared<EndsState>();
  e->batch = layer.inputShape[0];
  e->seq = layer.inputShape[1];
  e->tokens = e->batch * e->seq;
  e->width = spec.width;
  e->vocab = spec.vocab;
  e->norm = spec.embeddingNorm;
  e->dropoutP = spec.dropoutP;
  e->epsilon = static_cast<float>(spec.epsilon);
  const Index tables = (spec.vocab + spec.positions + spec.segments) * spec.width;
  e->embedding = {e->tokens, e->seq, e->width, e->vocab * e->width,
                  spec.segments > 0 ? (spec.vocab + spec.positions) * spec.width : 0};
  e->normParams = e->norm ? tables : 0;
  REMAT_RETURN_IF_ERROR(
      check.expectParams(layer.paramCount, static_cast<std::uint64_t>(tables + (e->norm ? 2 * spec.width : 0))));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  layOutEmbedding(spec, *e, state);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, e->savedBytes));
  state.ends = std::move(e);
  return Status::ok();
}

Status forwardTokenEmbedding(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                             const LayerContext& c, const ForwardBuffers& b) {
  const EndsState& e = *state.ends;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": no forward workspace or E");
  REMAT_RETURN_IF_ERROR(checkIds(e, state.label, c.stream, tokenIds(b.x)));
  auto* tokens = reinterpret_cast<float*>(b.workspace);
  auto* positions = reinterpret_cast<float*>(b.workspace + e.positionsAt);
  float* types = e.embedding.typeTable > 0 ? reinterpret_cast<float*>(b.workspace + e.typesAt) : nullptr;
  // The sum is x(1) itself without a norm, else the norm's input: E's (keep) or the token lookup's place.
  float* sum = !e.norm ? b.y : keep ? reinterpret_cast<float*>(b.extra + e.normInputAt) : tokens;
  REMAT_RETURN_IF_ERROR(
      kernels::embeddingLookUp(c.stream, e.embedding, tokenIds(b.x), b.params, tokens, positions, types, sum));
  if (keep) {  // the position ids, int64, as PyTorch's arange; BERT's type ids, its buffer of zeros
    REMAT_RETURN_IF_ERROR(kernels::writeArange(c.stream, e.seq, reinterpret_cast<std::int64_t*>(b.extra)));
    if (e.embedding.typeTable > 0)
      REMAT_CUDA_CHECK(cudaMemsetAsync(b.extra + e.typeIdsAt, 0, 8 * static_cast<std::size_t>(e.seq), c.stream));
  }
  if (e.norm)
    REMAT_RETURN_IF_ERROR(kernels::layerNormForward(c.stream, e.tokens, e.width, e.epsilon, sum,
                                                    b.params + e.normParams, b.y,
                                                    keep ? reinterpret_cast<float*>(b.extra + e.statsAt) : nullptr));
  if (e.dropoutP <= 0.0) return Status::ok();
  return kernels::dropoutForward(c.stream, e.tokens * e.width, e.dropoutP,
                                 rng::streamKey(seed, rng::Purpose::Dropout, l), b.y, b.y,
                                 keep ? reinterpret_cast<std::uint8_t*>(b.extra + e.maskAt) : nullptr);
}

Status backwardTokenEmbedding(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const EndsState& e = *state.ends;
  if (b.x == nullptr || b.extra == nullptr || (e.norm && b.workspace == nullptr))
    return Status::internal("gpu: " + state.label + ": the backward lacks the ids, the position ids or its workspace");
  const auto* arange = reinterpret_cast<const std::int64_t*>(b.extra);
  const bool dropped = e.dropoutP > 0.0;
  const auto* mask = dropped ? reinterpret_cast<const std::uint8_t*>(b.extra + e.maskAt) : nullptr;
  const float scale = dropped && e.dropoutP < 1.0 ? static_cast<float>(1.0 / (1.0 - e.dropoutP)) : 0.0f;
  if (!e.norm)
    return kernels::embeddingScatter(c.stream, e.embedding, tokenIds(b.x), arange, b.dy, mask, scale, b.paramGrads);
  auto* dNorm = reinterpret_cast<float*>(b.workspace + e.dNormAt);
  auto* dSum = reinterpret_cast<float*>(b.workspace + e.dSumAt);
  const Index count = e.tokens * e.width;
  if (dropped) REMAT_RETURN_IF_ERROR(kernels::dropoutBackward(c.stream, count, e.dropoutP, mask, b.dy, dNorm));
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(
      c.stream, e.tokens, e.width, reinterpret_cast<const float*>(b.extra + e.normInputAt), dropped ? dNorm : b.dy,
      b.params + e.normParams, reinterpret_cast<const float*>(b.extra + e.statsAt), dSum, b.paramGrads + e.normParams));
  return kernels::embeddingScatter(c.stream, e.embedding, tokenIds(b.x), arange, dSum, nullptr, 1.0f, b.paramGrads);
}

Status prepareLmHead(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                     LayerState& state) {
  if (layer.inputShape.size() != 3) return check.fail("lm_head needs an [N, S, d] input");
  if (spec.tied) {
    const ChainLayer& first = chain.layers.front();
    const LayerSpec& table = chain.spec.layers[first.specIndex];
    if (first.kind != LayerKind::TokenEmbedding || table.vocab != spec.vocab || table.width != layer.inputShape[2])
      return check.fail("tied: layer 1 must be a token_embedding of vocabulary " + std::to_string(spec.vocab) +
                        " and width " + std::to_string(layer.inputShape[2]) + " (the head's weight is its table)");
  }
  auto e = std::make_shared<EndsState>();
  e->batch = layer.inputShape[0];
  e->seq = layer.inputShape[1];
  e->tokens = e->batch * e->seq;
  e->width = layer.inputShape[2];
  e->vocab = spec.vocab;
  e->norm = spec.norm;
  e->tied = spec.tied;
  e->epsilon = static_cast<float>(spec.epsilon);
  e->weight = e->norm ? 2 * e->width : 0;
  REMAT_RETURN_IF_ERROR(check.expectParams(
      layer.paramCount, static_cast<std::uint64_t>(e->weight + (e->tied ? 0 : e->vocab * e->width))));
  e->lnOutAt = floats(2 * e->tokens);
  e->savedBytes = e->norm ? floats(2 * e->tokens) + floats(e->tokens * e->width) : 0;
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, true, "needs_output"));
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, e->savedBytes));
  e->discardShift = aligned(e->savedBytes);
  state.requiredFwdWorkspace = e->discardShift + floats(e->tokens * e->vocab);
  e->dLogitsAt = 0;
  e->dLnOutAt = aligned(floats(e->tokens * e->vocab));
  state.requiredBwdWorkspace = e->norm ? e->dLnOutAt + floats(e->tokens * e->width) : floats(e->tokens * e->vocab);
  state.ends = std::move(e);
  return Status::ok();
}

namespace {

RowMajorGemm projection(const EndsState& e) {  // logits [T, V] = x [T, d] W^T
  RowMajorGemm g;
  g.transB = true;
  g.m = e.tokens, g.n = e.vocab, g.k = e.width, g.lda = e.width, g.ldb = e.width, g.ldc = e.vocab;
  return g;
}

}  // namespace

Status forwardLmHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b) {
  const EndsState& e = *state.ends;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && e.norm && b.extra == nullptr) || (e.tied && b.sharedParams == nullptr))
    return Status::internal("gpu: " + state.label + ": the head's forward lacks its workspace, E or layer 1's table");
  const float* weight = e.tied ? b.sharedParams : b.params + e.weight;
  std::byte* saved = keep ? b.extra : b.workspace;
  auto* logits = reinterpret_cast<float*>(b.workspace + (keep ? 0 : e.discardShift));
  const float* projected = b.x;
  if (e.norm) {
    auto* lnOut = reinterpret_cast<float*>(saved + e.lnOutAt);
    REMAT_RETURN_IF_ERROR(kernels::layerNormForward(c.stream, e.tokens, e.width, e.epsilon, b.x, b.params, lnOut,
                                                    reinterpret_cast<float*>(saved)));
    projected = lnOut;
  }
  REMAT_RETURN_IF_ERROR(gemm(c, projection(e), projected, weight, logits, "lm_head projection"));
  return kernels::logSoftmaxRows(c.stream, e.tokens, e.vocab, logits, b.y);
}

Status backwardLmHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const EndsState& e = *state.ends;
  if (b.workspace == nullptr || b.y == nullptr || b.x == nullptr || (e.norm && b.extra == nullptr) ||
      (e.tied && (b.sharedParams == nullptr || b.sharedParamGrads == nullptr)))
    return Status::internal("gpu: " + state.label +
                            ": the head's backward lacks x(l-1), x(l), E, its workspace or layer 1's table");
  const float* weight = e.tied ? b.sharedParams : b.params + e.weight;
  float* weightGrad = e.tied ? b.sharedParamGrads : b.paramGrads + e.weight;
  auto* dLogits = reinterpret_cast<float*>(b.workspace + e.dLogitsAt);
  REMAT_RETURN_IF_ERROR(kernels::logSoftmaxBackwardRows(c.stream, e.tokens, e.vocab, b.y, b.dy, dLogits));
  const float* input = e.norm ? reinterpret_cast<const float*>(b.extra + e.lnOutAt) : b.x;
  float* dInput = e.norm ? reinterpret_cast<float*>(b.workspace + e.dLnOutAt) : b.dx;
  if (dInput != nullptr) {  // d(input) = dLogits W
    RowMajorGemm g;
    g.m = e.tokens, g.n = e.width, g.k = e.vocab, g.lda = e.vocab, g.ldb = e.width, g.ldc = e.width;
    REMAT_RETURN_IF_ERROR(gemm(c, g, dLogits, weight, dInput, "lm_head projection backward data"));
  }
  RowMajorGemm g;  // dW += dLogits^T input
  g.transA = true;
  g.m = e.vocab, g.n = e.width, g.k = e.tokens, g.lda = e.vocab, g.ldb = e.width, g.ldc = e.width, g.beta = 1.0f;
  REMAT_RETURN_IF_ERROR(gemm(c, g, dLogits, input, weightGrad, "lm_head projection backward weights"));
  if (!e.norm) return Status::ok();
  return kernels::layerNormBackward(c.stream, e.tokens, e.width, b.x, dInput, b.params,
                                    reinterpret_cast<const float*>(b.extra), b.dx, b.paramGrads);
}

Status lmHeadLossSeed(const LayerState& last, cudaStream_t stream, const LabelIndex* labels, float* grad) {
  // From the layer's shape [N, S, V], not its EndsState: a bf16-mixed head has its own state.
  const struct { Index tokens, vocab; } e{last.outShape[0] * last.outShape[1], last.outShape[2]};
  std::vector<LabelIndex> host(static_cast<std::size_t>(e.tokens));
  REMAT_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), labels, host.size() * sizeof(LabelIndex), cudaMemcpyDeviceToHost, stream));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (Index t = 0; t < e.tokens; ++t) {
    const LabelIndex v = host[static_cast<std::size_t>(t)];
    if (v < 0 || v >= e.vocab)
      return Status::invalid("gpu: label " + std::to_string(v) + " of token " + std::to_string(t) + " is outside the " +
                             std::to_string(e.vocab) + " classes of the last layer");
  }
  return kernels::nllLossBackward(stream, e.tokens, e.vocab, labels, grad);
}

}  // namespace remat::gpu
