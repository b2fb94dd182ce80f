// The token embedding on the CPU (docs/memory-model.md 12.2).
//
// token_embedding (GPT: wte[ids] + wpe[0..S)): x0 holds the ids as int64, PyTorch's torch.long (the
// model counts a(0) at 8 bytes per token, kTokenIdBytes); each is checked to lie inside the
// vocabulary before anything is written. E is the int64 position arange its backward keeps (8*S
// bytes); the forward writes both lookups into its
// workspace, as PyTorch's two embedding calls do, and adds them into x(1). The backward writes the
// dense table gradients (a scatter-add of d(x1) rows into wte's, the sum over the batch into wpe's),
// columns split over the threads so every element is summed in token order. With dropout (p > 0) E
// also holds its mask (1 byte per element, after the arange): the sum is dropped in place in x(1),
// and the backward scales d(x1) through the mask before the scatter.
//
// BERT's (Hugging Face's BertEmbeddings): (wte[ids] + tte[type ids]) + wpe[0..S), then LayerNorm,
// then dropout. The type ids are its buffer of zeros (every token reads row 0 of tte), kept as S
// int64 in E after the arange; then the LayerNorm's mean and variance [2T] float32 and its input
// (the sum, [T, d]), then the mask. The LayerNorm is LayerNormOp (dnnl_layernorm.cpp); the sum lies
// in E (keep) or in the token lookup's place in the workspace (discard), and the norm's scratch
// reuses the type lookup's. The backward scales d(x1) through the mask into its workspace, runs
// the norm's backward to d(sum) and scatters that into the three tables as above. Parameters: wte
// [V, d], wpe [P, d], tte [segments, d], the norm's weight and bias [2, d].
//
// Pure bf16 (the model cast with .to(torch.bfloat16); memory-model.md 12.11): the tables, the
// lookups, their sums (each rounded, as PyTorch's bfloat16 add), x(1) and the norm's input in E are
// bfloat16; the norm's statistics stay float32 (the model's, CUDA's), oneDNN's float32 layer
// normalization running on a widening of its input and parameters in the workspace. The backward
// adds each token's gradient row into the bfloat16 table gradients, each sum rounded (PyTorch's
// bfloat16 index_add); the norm's d(input) is rounded to bfloat16 before the scatter.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "attention.hpp"
#include "device_impl.hpp"
#include "wide_norm.hpp"

namespace remat::cpu {
namespace {

std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }

// The id at token t, or -1 when it is not in [0, vocab).
Index tokenId(const std::int64_t* ids, Index t, Index vocab) {
  const std::int64_t v = ids[t];
  return v >= 0 && v < vocab ? static_cast<Index>(v) : -1;
}

// x0 as the int64 ids it holds (the buffers' pointers are typed float for every other kind).
const std::int64_t* tokenIds(const float* x) { return reinterpret_cast<const std::int64_t*>(x); }

Status checkIds(const PreparedLayer& prepared, const std::int64_t* ids) {
  const TransformerEnds& e = prepared.ends;
  for (Index t = 0; t < e.tokens; ++t)
    if (tokenId(ids, t, e.vocab) < 0)
      return Status::invalid("cpu: " + prepared.label + ": token id " + std::to_string(ids[t]) + " of sample " +
                             std::to_string(t / e.seq) + ", position " + std::to_string(t % e.seq) + " is not in [0, " +
                             std::to_string(e.vocab) + ") (the vocabulary)");
  return Status::ok();
}

// E's layout (bytes) of an embedding with the chain's spec: the arange, BERT's type ids, the norm's
// statistics and input, the mask; returns E's size.
std::uint64_t layOutExtra(const LayerSpec& spec, TransformerEnds& e, std::uint64_t elementBytes) {
  std::uint64_t at = 8 * static_cast<std::uint64_t>(e.seq);
  if (spec.segments > 0) {
    e.typeIdsAt = at;
    at += 8 * static_cast<std::uint64_t>(e.seq);
  }
  if (spec.embeddingNorm) {
    e.statsAt = at;
    at += floats(2 * e.tokens);
    e.normInputAt = at;
    at += elementBytes * static_cast<std::uint64_t>(e.tokens * e.width);  // float32, bfloat16 under pure bf16
  }
  e.maskAt = at;
  return at + (spec.dropoutP > 0.0 ? static_cast<std::uint64_t>(e.tokens * e.width) : 0);
}

// The workspaces: the two lookups (exactly the model's bytes for GPT's), then the type lookup, whose
// place the norm's scratch takes; backward (with the norm): d(norm) (p > 0), d(sum), the norm's scratch.
Status layOutWorkspaces(const DnnlContext& context, const LayerSpec& spec, PreparedLayer& prepared) {
  TransformerEnds& e = prepared.ends;
  const std::uint64_t lookups = floats(e.tokens * e.width) + floats(e.seq * e.width);
  prepared.requiredFwdWorkspace = lookups;
  prepared.requiredBwdWorkspace = 0;
  std::uint64_t lnFwd = 0, lnBwd = 0;
  if (spec.embeddingNorm) {
    auto ln = LayerNormOp::create(context, e.tokens, e.width, static_cast<float>(spec.epsilon), InputGrad::Write,
                                  prepared.label + ", LayerNorm");
    if (!ln) return ln.status();
    lnFwd = ln->forwardScratchBytes();
    lnBwd = ln->backwardScratchBytes();
    prepared.op = std::move(ln).value();
  }
  if (spec.segments == 0 && !spec.embeddingNorm) return Status::ok();
  ScratchLayout f, b;
  f.add(lookups);
  e.typesAt = e.fScratchAt = f.add(std::max(spec.segments > 0 ? floats(e.tokens * e.width) : 0, lnFwd));
  prepared.requiredFwdWorkspace = f.bytes();
  if (!spec.embeddingNorm) return Status::ok();
  if (spec.dropoutP > 0.0) b.add(floats(e.tokens * e.width));  // d(norm): d(x1) through the mask
  e.dSumAt = b.add(floats(e.tokens * e.width));
  e.bScratchAt = b.add(lnBwd);
  prepared.requiredBwdWorkspace = b.bytes();
  return Status::ok();
}

// Adds each token's gradient row (gradAt(t * d + c)) into the rows its ids picked: wte's, wpe's and,
// with a type table, tte's. Each thread owns a run of columns and adds the tokens in order.
template <typename Grad>
void scatterIntoTables(const TransformerEnds& e, const std::int64_t* ids, const std::int64_t* arange,
                       const std::int64_t* typeIds, float* grads, Grad gradAt) {
  const Index d = e.width;
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < d; ++c)
    for (Index t = 0; t < e.tokens; ++t) {
      const float g = gradAt(t * d + c);
      grads[tokenId(ids, t, e.vocab) * d + c] += g;
      grads[e.positionTable + arange[t % e.seq] * d + c] += g;
      if (typeIds != nullptr) grads[e.typeTable + typeIds[t % e.seq] * d + c] += g;
    }
}

// The lookups (`tokens`, `types` when BERT's table is there, the position table's first seq rows in
// `positions`), summed into `sum` as BertEmbeddings adds them: (tokens + types) + positions (GPT's:
// tokens + positions), each sum stored in T (bfloat16: rounded, as PyTorch adds bfloat16 tensors).
template <typename T>
void lookUpAndAdd(const TransformerEnds& e, const std::int64_t* ids, const T* params, T* tokens, T* positions, T* types,
                  T* sum) {
  const Index d = e.width;
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < e.tokens; ++t) {
    std::memcpy(tokens + t * d, params + tokenId(ids, t, e.vocab) * d, sizeof(T) * d);
    if (types != nullptr) std::memcpy(types + t * d, params + e.typeTable, sizeof(T) * d);  // type id 0
  }
  std::memcpy(positions, params + e.positionTable, sizeof(T) * e.seq * d);
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < e.tokens; ++t)
    for (Index c = 0; c < d; ++c) {
      const Index i = t * d + c;
      const float first =
          types != nullptr ? valueOf(stored<T>(valueOf(tokens[i]) + valueOf(types[i]))) : valueOf(tokens[i]);
      sum[i] = stored<T>(first + valueOf(positions[(t % e.seq) * d + c]));
    }
}

}  // namespace

Status preparePureTokenEmbedding(const LayerSpec& spec, PreparedLayer& prepared);
Status forwardPureTokenEmbedding(const DnnlContext& context, const PreparedLayer& prepared, bool keep,
                                 std::uint64_t dropoutKey, const ForwardBuffers& b);
Status backwardPureTokenEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b);

std::string shortNumber(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

Status prepareTokenEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                             const LayerChecks& check, std::size_t l, PreparedLayer& prepared) {
  if (l != 1) return check.fail("a token embedding must be the chain's first layer (it reads the ids x0)");
  TransformerEnds& e = prepared.ends;
  e.batch = layer.inputShape[0];
  e.seq = layer.inputShape[1];
  e.tokens = e.batch * e.seq;
  e.width = spec.width;
  e.vocab = spec.vocab;
  e.positionTable = e.vocab * e.width;  // wpe follows wte, tte wpe, the norm's weight and bias tte
  const Index tables = (spec.vocab + spec.positions + spec.segments) * spec.width;
  e.typeTable = spec.segments > 0 ? (spec.vocab + spec.positions) * spec.width : 0;
  e.normParams = spec.embeddingNorm ? tables : 0;
  REMAT_RETURN_IF_ERROR(check.expectParams(
      layer.paramCount, static_cast<std::uint64_t>(tables + (spec.embeddingNorm ? 2 * spec.width : 0))));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  prepared.dropoutP = spec.dropoutP;
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, layOutExtra(spec, e, prepared.halfParams ? 2 : 4)));
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  REMAT_RETURN_IF_ERROR(layOutWorkspaces(context, spec, prepared));
  return prepared.halfParams ? preparePureTokenEmbedding(spec, prepared) : Status::ok();
}

Status forwardTokenEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                             std::uint64_t dropoutKey, const ForwardBuffers& b) {
  const TransformerEnds& e = prepared.ends;
  REMAT_RETURN_IF_ERROR(checkIds(prepared, tokenIds(b.x)));
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": no forward workspace or E");
  const auto* norm = std::get_if<LayerNormOp>(&prepared.op);
  // The sum is x(1) itself without a norm, else the norm's input: E's (keep) or the token lookup's place.
  float* sum = norm == nullptr ? b.y
               : keep          ? reinterpret_cast<float*>(b.extra + e.normInputAt)
                               : reinterpret_cast<float*>(b.workspace);
  if (keep) {  // the position ids, int64, as PyTorch's arange; BERT's type ids, its buffer of zeros
    auto* arange = reinterpret_cast<std::int64_t*>(b.extra);
    for (Index s = 0; s < e.seq; ++s) arange[s] = s;
    if (e.typeTable > 0) std::fill_n(reinterpret_cast<std::int64_t*>(b.extra + e.typeIdsAt), e.seq, 0);
  }
  if (prepared.halfParams) return forwardPureTokenEmbedding(context, prepared, keep, dropoutKey, b);
  auto* tokens = reinterpret_cast<float*>(b.workspace);
  float* types = e.typeTable > 0 ? reinterpret_cast<float*>(b.workspace + e.typesAt) : nullptr;
  lookUpAndAdd(e, tokenIds(b.x), b.params, tokens, tokens + e.tokens * e.width, types, sum);
  if (norm != nullptr)
    REMAT_RETURN_IF_ERROR(norm->forward(context, sum, b.params + e.normParams, b.y,
                                        keep ? reinterpret_cast<float*>(b.extra + e.statsAt) : nullptr,
                                        b.workspace + e.fScratchAt));
  const DropoutDraw drop(dropoutKey, prepared.dropoutP);
  if (drop.active())
    dropoutFlat(e.tokens * e.width, drop, b.y, b.y,
                keep ? reinterpret_cast<std::uint8_t*>(b.extra + e.maskAt) : nullptr);
  return Status::ok();
}

Status backwardTokenEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const TransformerEnds& e = prepared.ends;
  const auto* norm = std::get_if<LayerNormOp>(&prepared.op);
  if (b.x == nullptr || b.extra == nullptr || (norm != nullptr && b.workspace == nullptr))
    return Status::internal("cpu: " + prepared.label +
                            ": the backward lacks the ids, the position ids or its workspace");
  if (prepared.halfParams) return backwardPureTokenEmbedding(context, prepared, b);
  const auto* arange = reinterpret_cast<const std::int64_t*>(b.extra);
  const auto* typeIds = e.typeTable > 0 ? reinterpret_cast<const std::int64_t*>(b.extra + e.typeIdsAt) : nullptr;
  const auto* mask = reinterpret_cast<const std::uint8_t*>(b.extra + e.maskAt);  // p > 0 only
  const DropoutDraw drop(0, prepared.dropoutP);
  if (norm == nullptr) {
    scatterIntoTables(e, tokenIds(b.x), arange, typeIds, b.paramGrads,
                      [&](Index i) { return !drop.active() ? b.dy[i] : (mask[i] ? b.dy[i] * drop.scale : 0.0f); });
    return Status::ok();
  }
  // d(norm's output) is d(x1) itself without dropout (p = 0 returns its input), else scaled through the mask.
  auto* dNorm = reinterpret_cast<float*>(b.workspace);
  auto* dSum = reinterpret_cast<float*>(b.workspace + e.dSumAt);
  if (drop.active()) dropoutFlatBackward(e.tokens * e.width, drop, mask, b.dy, dNorm);
  REMAT_RETURN_IF_ERROR(norm->backward(context, reinterpret_cast<const float*>(b.extra + e.normInputAt),
                                       drop.active() ? dNorm : b.dy, b.params + e.normParams,
                                       reinterpret_cast<const float*>(b.extra + e.statsAt), dSum,
                                       b.paramGrads + e.normParams, b.workspace + e.bScratchAt));
  scatterIntoTables(e, tokenIds(b.x), arange, typeIds, b.paramGrads, [&](Index i) { return dSum[i]; });
  return Status::ok();
}

namespace {

std::uint64_t halves(Index n) { return static_cast<std::uint64_t>(n) * 2; }

// Pure bf16's workspaces (offsets in bytes), the same for prepare and run.
struct PureEmbeddingScratch {
  std::uint64_t tokens = 0, positions = 0, types = 0, sum = 0, wideIn = 0, wideOut = 0, params = 0, fDnnl = 0,
                fBytes = 0;
  std::uint64_t dNorm = 0, wideX = 0, wideDy = 0, dSum = 0, bParams = 0, dParams = 0, bDnnl = 0, bBytes = 0;
};

PureEmbeddingScratch pureScratchOf(const TransformerEnds& e, const LayerNormOp* norm, bool dropout) {
  PureEmbeddingScratch p;
  const Index T = e.tokens, d = e.width;
  ScratchLayout f, b;
  p.tokens = f.add(halves(T * d));
  p.positions = f.add(halves(e.seq * d));
  if (e.typeTable > 0) p.types = f.add(halves(T * d));
  if (norm != nullptr) {
    p.sum = f.add(halves(T * d));  // the norm's input in a discard-mode forward
    p.wideIn = f.add(floats(T * d));
    p.wideOut = f.add(floats(T * d));
    p.params = f.add(floats(2 * d));
    p.fDnnl = f.add(norm->forwardScratchBytes());
    if (dropout) p.dNorm = b.add(halves(T * d));
    p.wideX = b.add(floats(T * d));
    p.wideDy = b.add(floats(T * d));
    p.dSum = b.add(floats(T * d));
    p.bParams = b.add(floats(2 * d));
    p.dParams = b.add(floats(2 * d));
    p.bDnnl = b.add(norm->backwardScratchBytes());
  }
  p.fBytes = f.bytes();
  p.bBytes = b.bytes();
  return p;
}

// Each token's gradient row into the bfloat16 tables' gradients, each sum rounded, in token order.
template <typename Grad>
void scatterIntoHalfTables(const TransformerEnds& e, const std::int64_t* ids, const std::int64_t* arange,
                           const std::int64_t* typeIds, BFloat16* grads, Grad gradAt) {
  const Index d = e.width;
  auto addTo = [](BFloat16& to, float g) { to = BFloat16(to.value() + g); };
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < d; ++c)
    for (Index t = 0; t < e.tokens; ++t) {
      const float g = gradAt(t * d + c);
      addTo(grads[tokenId(ids, t, e.vocab) * d + c], g);
      addTo(grads[e.positionTable + arange[t % e.seq] * d + c], g);
      if (typeIds != nullptr) addTo(grads[e.typeTable + typeIds[t % e.seq] * d + c], g);
    }
}

}  // namespace

Status preparePureTokenEmbedding(const LayerSpec& spec, PreparedLayer& prepared) {
  const auto* norm = std::get_if<LayerNormOp>(&prepared.op);
  const PureEmbeddingScratch p = pureScratchOf(prepared.ends, norm, spec.dropoutP > 0.0);
  prepared.requiredFwdWorkspace = p.fBytes;
  prepared.requiredBwdWorkspace = p.bBytes;
  return Status::ok();
}

Status forwardPureTokenEmbedding(const DnnlContext& context, const PreparedLayer& prepared, bool keep,
                                 std::uint64_t dropoutKey, const ForwardBuffers& b) {
  const TransformerEnds& e = prepared.ends;
  const auto* norm = std::get_if<LayerNormOp>(&prepared.op);
  const DropoutDraw drop(dropoutKey, prepared.dropoutP);
  const PureEmbeddingScratch p = pureScratchOf(e, norm, drop.active());
  const auto* params = reinterpret_cast<const BFloat16*>(b.params);
  auto* y = reinterpret_cast<BFloat16*>(b.y);
  BFloat16* sum = norm == nullptr ? y
                  : keep          ? reinterpret_cast<BFloat16*>(b.extra + e.normInputAt)
                                  : reinterpret_cast<BFloat16*>(b.workspace + p.sum);
  auto half = [&b](std::uint64_t offset) { return reinterpret_cast<BFloat16*>(b.workspace + offset); };
  lookUpAndAdd(e, tokenIds(b.x), params, half(p.tokens), half(p.positions), e.typeTable > 0 ? half(p.types) : nullptr,
               sum);
  if (norm != nullptr) {
    const Index count = e.tokens * e.width;
    auto* wideIn = reinterpret_cast<float*>(b.workspace + p.wideIn);
    auto* wideOut = reinterpret_cast<float*>(b.workspace + p.wideOut);
    auto* wideParams = reinterpret_cast<float*>(b.workspace + p.params);
    castToFloat(count, sum, wideIn);
    castToFloat(2 * e.width, params + e.normParams, wideParams);
    REMAT_RETURN_IF_ERROR(norm->forward(context, wideIn, wideParams, wideOut,
                                        keep ? reinterpret_cast<float*>(b.extra + e.statsAt) : nullptr,
                                        b.workspace + p.fDnnl));
    castToHalf(count, wideOut, y);
  }
  if (!drop.active()) return Status::ok();
  auto* mask = keep ? reinterpret_cast<std::uint8_t*>(b.extra + e.maskAt) : nullptr;
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < e.tokens * e.width; ++i) {
    const bool kept = drop.keep(static_cast<std::uint64_t>(i));
    y[i] = BFloat16(kept ? y[i].value() * drop.scale : 0.0f);
    if (mask != nullptr) mask[i] = kept ? 1 : 0;
  }
  return Status::ok();
}

Status backwardPureTokenEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const TransformerEnds& e = prepared.ends;
  const auto* norm = std::get_if<LayerNormOp>(&prepared.op);
  const DropoutDraw drop(0, prepared.dropoutP);
  const PureEmbeddingScratch p = pureScratchOf(e, norm, drop.active());
  const auto* arange = reinterpret_cast<const std::int64_t*>(b.extra);
  const auto* typeIds = e.typeTable > 0 ? reinterpret_cast<const std::int64_t*>(b.extra + e.typeIdsAt) : nullptr;
  const auto* mask = reinterpret_cast<const std::uint8_t*>(b.extra + e.maskAt);  // p > 0 only
  const auto* dy = reinterpret_cast<const BFloat16*>(b.dy);
  auto* grads = reinterpret_cast<BFloat16*>(b.paramGrads);
  auto dropped = [&](Index i) {
    return !drop.active() ? dy[i].value() : (mask[i] ? BFloat16(dy[i].value() * drop.scale).value() : 0.0f);
  };
  if (norm == nullptr) {
    scatterIntoHalfTables(e, tokenIds(b.x), arange, typeIds, grads, dropped);
    return Status::ok();
  }
  const Index count = e.tokens * e.width;
  auto wide = [&b](std::uint64_t offset) { return reinterpret_cast<float*>(b.workspace + offset); };
  const WideNormWork work{wide(p.wideX),   wide(p.wideDy),  wide(p.dSum),
                          wide(p.bParams), wide(p.dParams), b.workspace + p.bDnnl};
  const BFloat16* dNormed = dy;
  if (drop.active()) {
    auto* dNorm = reinterpret_cast<BFloat16*>(b.workspace + p.dNorm);
    for (Index i = 0; i < count; ++i) dNorm[i] = BFloat16(dropped(i));
    dNormed = dNorm;
  }
  REMAT_RETURN_IF_ERROR(
      wideNormBackward(context, *norm, count, e.width, reinterpret_cast<const BFloat16*>(b.extra + e.normInputAt),
                       dNormed, reinterpret_cast<const BFloat16*>(b.params) + e.normParams,
                       reinterpret_cast<const float*>(b.extra + e.statsAt), grads + e.normParams, work));
  const float* dSum = work.dx;
  scatterIntoHalfTables(e, tokenIds(b.x), arange, typeIds, grads, [&](Index i) { return BFloat16(dSum[i]).value(); });
  return Status::ok();
}

}  // namespace remat::cpu
