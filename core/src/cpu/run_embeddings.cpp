// The token embedding and the language-model head on the CPU (docs/memory-model.md 12.2).
//
// token_embedding (GPT: wte[ids] + wpe[0..S)): x0 holds the ids as float32 values of integers (the
// model counts a(0) at the chain dtype's 4 bytes, PyTorch's int64 ids at half that size); each is
// checked to be a whole number inside the vocabulary before anything is written. E is the int64
// position arange its backward keeps (8*S bytes); the forward writes both lookups into its
// workspace, as PyTorch's two embedding calls do, and adds them into x(1). The backward writes the
// dense table gradients (a scatter-add of d(x1) rows into wte's, the sum over the batch into wpe's),
// columns split over the threads so every element is summed in token order. With dropout (p > 0) E
// also holds its mask (1 byte per element, after the arange): the sum is dropped in place in x(1),
// and the backward scales d(x1) through the mask before the scatter.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "attention.hpp"
#include "device_impl.hpp"

namespace remat::cpu {
namespace {

std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }

// The id at token t, or -1 when it is not a whole number in [0, vocab).
Index tokenId(const float* ids, Index t, Index vocab) {
  const float v = ids[t];
  if (!(v >= 0.0f && v < static_cast<float>(vocab)) || v != std::floor(v)) return -1;
  return static_cast<Index>(v);
}

Status checkIds(const PreparedLayer& prepared, const float* ids) {
  const TransformerEnds& e = prepared.ends;
  for (Index t = 0; t < e.tokens; ++t)
    if (tokenId(ids, t, e.vocab) < 0)
      return Status::invalid("cpu: " + prepared.label + ": token id " + std::to_string(ids[t]) + " of sample " +
                             std::to_string(t / e.seq) + ", position " + std::to_string(t % e.seq) +
                             " is not a whole number in [0, " + std::to_string(e.vocab) + ") (the vocabulary)");
  return Status::ok();
}

}  // namespace

std::string shortNumber(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

Status prepareTokenEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, std::size_t l,
                             PreparedLayer& prepared) {
  if (spec.segments > 0 || spec.embeddingNorm)
    return check.fail("BERT's token types and embedding LayerNorm have no CPU kernel yet");
  if (l != 1) return check.fail("a token embedding must be the chain's first layer (it reads the ids x0)");
  TransformerEnds& e = prepared.ends;
  e.batch = layer.inputShape[0];
  e.seq = layer.inputShape[1];
  e.tokens = e.batch * e.seq;
  e.width = spec.width;
  e.vocab = spec.vocab;
  e.positionTable = e.vocab * e.width;  // wpe follows wte
  REMAT_RETURN_IF_ERROR(
      check.expectParams(layer.paramCount, static_cast<std::uint64_t>((spec.vocab + spec.positions) * spec.width)));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  prepared.dropoutP = spec.dropoutP;
  const std::uint64_t maskBytes = spec.dropoutP > 0.0 ? static_cast<std::uint64_t>(e.tokens * e.width) : 0;
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, static_cast<std::uint64_t>(8 * e.seq) + maskBytes));
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(layer.paramCount), 0, {}});
  prepared.requiredFwdWorkspace = floats(e.tokens * e.width) + floats(e.seq * e.width);  // the two lookups
  prepared.requiredBwdWorkspace = 0;
  return Status::ok();
}

Status forwardTokenEmbedding(const PreparedLayer& prepared, ForwardMode mode, std::uint64_t dropoutKey,
                             const ForwardBuffers& b) {
  const TransformerEnds& e = prepared.ends;
  REMAT_RETURN_IF_ERROR(checkIds(prepared, b.x));
  if (b.workspace == nullptr) return Status::internal("cpu: " + prepared.label + ": no forward workspace");
  auto* tokens = reinterpret_cast<float*>(b.workspace);
  float* positions = tokens + e.tokens * e.width;
  const Index d = e.width;
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < e.tokens; ++t) std::memcpy(tokens + t * d, b.params + tokenId(b.x, t, e.vocab) * d, floats(d));
  std::memcpy(positions, b.params + e.positionTable, floats(e.seq * d));
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < e.tokens; ++t)
    for (Index c = 0; c < d; ++c) b.y[t * d + c] = tokens[t * d + c] + positions[(t % e.seq) * d + c];
  const bool keep = mode == ForwardMode::Keep;
  if (keep) {  // the position ids, int64, as PyTorch's arange
    auto* arange = reinterpret_cast<std::int64_t*>(b.extra);
    for (Index s = 0; s < e.seq; ++s) arange[s] = s;
  }
  const DropoutDraw drop(dropoutKey, prepared.dropoutP);
  if (drop.active())
    dropoutFlat(e.tokens * d, drop, b.y, b.y, keep ? reinterpret_cast<std::uint8_t*>(b.extra + 8 * e.seq) : nullptr);
  return Status::ok();
}

Status backwardTokenEmbedding(const PreparedLayer& prepared, const BackwardBuffers& b) {
  const TransformerEnds& e = prepared.ends;
  if (b.x == nullptr || b.extra == nullptr)
    return Status::internal("cpu: " + prepared.label + ": the backward lacks the ids or the position ids");
  const auto* arange = reinterpret_cast<const std::int64_t*>(b.extra);
  const auto* mask = reinterpret_cast<const std::uint8_t*>(b.extra + 8 * e.seq);  // p > 0 only
  const bool dropout = prepared.dropoutP > 0.0;
  const float scale = DropoutDraw(0, prepared.dropoutP).scale;
  const Index d = e.width;
  // Each thread owns a run of columns of both tables and adds the tokens' rows in order.
#pragma omp parallel for schedule(static)
  for (Index c = 0; c < d; ++c)
    for (Index t = 0; t < e.tokens; ++t) {
      const Index i = t * d + c;
      const float g = !dropout ? b.dy[i] : (mask[i] ? b.dy[i] * scale : 0.0f);
      b.paramGrads[tokenId(b.x, t, e.vocab) * d + c] += g;
      b.paramGrads[e.positionTable + arange[t % e.seq] * d + c] += g;
    }
  return Status::ok();
}

}  // namespace remat::cpu
