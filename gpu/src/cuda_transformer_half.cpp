// transformer_block under bf16-mixed on the GPU, its preparation and forward (cuda_transformer_half.hpp).
#include "cuda_transformer_half.hpp"

#include <algorithm>

#include "kernels_attention_half.hpp"
#include "kernels_half.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::gpu {
namespace halfblock {

std::uint64_t Dropout::site(std::uint64_t which) const { return rng::mix64(key ^ which); }

RowMajorGemm headProduct(const kernels::AttentionShape& shape, bool transA, bool transB, Index m, Index n, Index k) {
  RowMajorGemm g;
  g.transA = transA, g.transB = transB;
  g.m = m, g.n = n, g.k = k;
  g.lda = transA ? m : k, g.ldb = transB ? k : n, g.ldc = n;
  g.strideA = m * k, g.strideB = k * n, g.strideC = m * n;
  g.batch = shape.batch * shape.heads;
  return g;
}

RowMajorGemm headProduct(const HalfBlockState& t, bool transA, bool transB, Index m, Index n, Index k) {
  return headProduct(t.g, transA, transB, m, n, k);
}

}  // namespace halfblock

namespace {

using halfblock::Dropout;
using halfblock::Ops;
using kernels::Bf16;

constexpr std::uint64_t kAlignBytes = 256;

std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }
std::uint64_t halves(Index n) { return static_cast<std::uint64_t>(n) * 2; }

// Consecutive regions, each at a 256-byte boundary.
struct Regions {
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    const std::uint64_t start = (end + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    end = start + bytes;
    return start;
  }
};

void setParams(HalfBlockState& t) {
  const Index d = t.width, H = t.hidden;
  Index at = 0;
  auto take = [&at](Index n) {
    const Index start = at;
    at += n;
    return start;
  };
  t.ln1P = take(2 * d), t.qkvW = take(3 * d * d), t.qkvB = take(3 * d), t.projW = take(d * d), t.projB = take(d);
  t.ln2P = take(2 * d), t.fc1W = take(H * d), t.fc1B = take(H), t.fc2W = take(d * H), t.fc2B = take(d);
}

void layOutScratch(HalfBlockState& t, LayerState& state) {
  const Index T = t.tokens, d = t.width, H = t.hidden, square = t.g.rows() * t.g.seq;
  t.discardShift = (t.e.savedBytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  Regions f;
  t.fNorm = f.add(floats(T * d));     // a norm's float32 output
  t.fQkv = f.add(halves(3 * T * d));  // math: qkv's bfloat16 output before the heads are copied out
  t.fHeads = f.add(halves(T * d));    // math: P v's heads
  t.fBranch = f.add(halves(T * d));   // a branch's bfloat16 output
  t.fFloat = f.add(floats(T * d));    // its float32 promotion
  t.fGelu = f.add(floats(T * H));     // GELU in float32
  state.requiredFwdWorkspace = t.discardShift + f.end;
  Regions b;
  t.bHalfRows = b.add(halves(T * d));                     // a sublayer's bfloat16 d(output)
  t.bWide = b.add(halves(std::max(T * H, 3 * T * d)));    // d(GELU's output), d(fc1's), d(qkv)
  t.bFloatWide = b.add(floats(2 * T * H));                // GELU's backward in float32
  t.bRows = b.add(floats(T * d));                         // d(a norm's output), float32
  t.bDh1 = b.add(floats(T * d));                          // the residual's gradient
  t.bHeads = b.add(halves(T * d));                        // d(merged heads)
  t.bCast = b.add(halves(T * d));                         // a casting linear's bfloat16 d(input)
  t.bWeight = b.add(halves(std::max(3 * d * d, d * H)));  // a linear's bfloat16 weight gradient
  if (!t.fused) {
    t.bSquare = b.add(halves(square));        // dP, then dS
    t.bGradHeads = b.add(halves(3 * T * d));  // dq, dk, dv per head before the merge
  }
  state.requiredBwdWorkspace = b.end;
}

// The saved tensors (E, or the start of a discard-mode workspace) and the scratch.
struct Saved {
  std::byte* saved;
  std::byte* scratch;
  template <typename T = Bf16>
  T* at(std::uint64_t offset) const {
    return reinterpret_cast<T*>(saved + offset);
  }
  template <typename T = Bf16>
  T* work(std::uint64_t offset) const {
    return reinterpret_cast<T*>(scratch + offset);
  }
};

// y = bfloat16(x) W^T + b with autocast's copies: x's cast into `cast` (when x is float32), the
// weights' copy into `copy`, both saved.
Status castingLinear(const LayerContext& c, const Linear& op, const float* x, Bf16* cast, const float* w, Bf16* copy,
                     const float* bias, Bf16* y) {
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, op.rows * op.in, x, cast));
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, op.out * op.in, w, copy));
  return halfLinearForward(c, op, cast, copy, bias, y);
}

Status halfInputLinear(const LayerContext& c, const Linear& op, const Bf16* x, const float* w, Bf16* copy,
                       const float* bias, Bf16* y) {
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, op.out * op.in, w, copy));
  return halfLinearForward(c, op, x, copy, bias, y);
}

Status mathAttention(const LayerContext& c, const HalfBlockState& t, const Saved& s, const Dropout& drop,
                     const Bf16* qkv) {
  const Index d = t.width, S = t.g.seq, dh = t.g.headDim;
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, qkv, 3 * d, 0, s.at(t.e.q)));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, qkv, 3 * d, d, s.at(t.e.k)));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, qkv, 3 * d, 2 * d, s.at(t.e.v)));
  REMAT_RETURN_IF_ERROR(gemmHalfBatched(c, halfblock::headProduct(t, false, true, S, S, dh), s.at(t.e.q), s.at(t.e.k),
                                        s.at(t.e.probs), "q k^T"));
  const kernels::AttentionDrop attnDrop{drop.site(3), drop.p};
  Bf16* dropped = drop.active() ? s.at(t.e.dropped) : nullptr;
  REMAT_RETURN_IF_ERROR(kernels::attentionSoftmaxHalf(
      c.stream, t.g, attnDrop, s.at(t.e.probs), drop.active() ? s.at<std::uint8_t>(t.e.attnMask) : nullptr, dropped));
  Bf16* heads = s.work(t.fHeads);
  REMAT_RETURN_IF_ERROR(gemmHalfBatched(c, halfblock::headProduct(t, false, false, S, dh, S),
                                        dropped != nullptr ? dropped : s.at(t.e.probs), s.at(t.e.v), heads, "P v"));
  return kernels::headsToRowsHalf(c.stream, t.g, heads, s.at(t.e.merged), d, 0);
}

// From qkv's float32 input (ln_1's output, or x(l-1) post-norm) to the merged heads.
Status attentionForward(const LayerContext& c, const HalfBlockState& t, const Saved& s, const Dropout& drop,
                        const float* input, const float* p) {
  const Ops ops(t);
  Bf16* qkv = t.fused ? s.at(t.e.qkvOut) : s.work(t.fQkv);
  REMAT_RETURN_IF_ERROR(
      castingLinear(c, ops.qkv, input, s.at(t.e.qkvCast), p + t.qkvW, s.at(t.e.qkvCopy), p + t.qkvB, qkv));
  if (!t.fused) return mathAttention(c, t, s, drop, qkv);
  REMAT_RETURN_IF_ERROR(kernels::flashAttentionForwardHalf(c.stream, t.g, {drop.site(3), drop.p}, qkv,
                                                           s.at(t.e.attnOut), s.at<float>(t.e.lse)));
  return kernels::headsToRowsHalf(c.stream, t.g, s.at(t.e.attnOut), s.at(t.e.merged), t.width, 0);
}

// out = residual + float(dropout(branch)): autocast's promotion of float32 + bfloat16.
Status promote(const LayerContext& c, const HalfBlockState& t, const Saved& s, const Dropout& drop, int site,
               const float* residual, float* out) {
  const Index count = t.tokens * t.width;
  Bf16* branch = s.work(t.fBranch);
  if (drop.active())
    REMAT_RETURN_IF_ERROR(kernels::dropoutForwardHalf(c.stream, count, drop.p,
                                                      drop.site(static_cast<std::uint64_t>(site)), branch, branch,
                                                      s.at<std::uint8_t>(site == 1 ? t.e.mask1 : t.e.mask2)));
  REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, count, branch, s.work<float>(t.fFloat)));
  return kernels::add(c.stream, count, residual, s.work<float>(t.fFloat), out);
}

// The MLP from its float32 input to its bfloat16 output in the branch scratch.
Status mlpForward(const LayerContext& c, const HalfBlockState& t, const Saved& s, const float* input, const float* p) {
  const Ops ops(t);
  const Index count = t.tokens * t.hidden;
  REMAT_RETURN_IF_ERROR(
      castingLinear(c, ops.fc1, input, s.at(t.e.fc1Cast), p + t.fc1W, s.at(t.e.fc1Copy), p + t.fc1B, s.at(t.e.fc)));
  float* work = s.work<float>(t.fGelu);  // GELU from its bfloat16 input in float32, rounded
  REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, count, s.at(t.e.fc), work));
  REMAT_RETURN_IF_ERROR(kernels::geluForward(c.stream, count, t.tanhGelu, work, work));
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, count, work, s.at(t.e.gelu)));
  return halfInputLinear(c, ops.fc2, s.at(t.e.gelu), p + t.fc2W, s.at(t.e.fc2Copy), p + t.fc2B, s.work(t.fBranch));
}

Status preNormForward(const LayerContext& c, const HalfBlockState& t, const Saved& s, const Dropout& drop,
                      const ForwardBuffers& b) {
  const Ops ops(t);
  const float* p = b.params;
  const Index T = t.tokens, d = t.width;
  float *norm = s.work<float>(t.fNorm), *h1 = s.at<float>(t.e.h1);
  REMAT_RETURN_IF_ERROR(
      kernels::layerNormForward(c.stream, T, d, t.epsilon, b.x, p + t.ln1P, norm, s.at<float>(t.e.stats1)));
  REMAT_RETURN_IF_ERROR(attentionForward(c, t, s, drop, norm, p));
  REMAT_RETURN_IF_ERROR(
      halfInputLinear(c, ops.proj, s.at(t.e.merged), p + t.projW, s.at(t.e.projCopy), p + t.projB, s.work(t.fBranch)));
  REMAT_RETURN_IF_ERROR(promote(c, t, s, drop, 1, b.x, h1));
  REMAT_RETURN_IF_ERROR(
      kernels::layerNormForward(c.stream, T, d, t.epsilon, h1, p + t.ln2P, norm, s.at<float>(t.e.stats2)));
  REMAT_RETURN_IF_ERROR(mlpForward(c, t, s, norm, p));
  return promote(c, t, s, drop, 2, h1, b.y);
}

// BERT: s1 = x + proj(attn(qkv(x))), h = ln_1(s1), s2 = h + fc2(gelu(fc1(h))), y = ln_2(s2); E
// keeps s1 (h1's slot) and s2.
Status postNormForward(const LayerContext& c, const HalfBlockState& t, const Saved& s, const Dropout& drop,
                       const ForwardBuffers& b) {
  const Ops ops(t);
  const float* p = b.params;
  const Index T = t.tokens, d = t.width;
  float *s1 = s.at<float>(t.e.h1), *s2 = s.at<float>(t.e.s2), *h = s.work<float>(t.fNorm);
  REMAT_RETURN_IF_ERROR(attentionForward(c, t, s, drop, b.x, p));
  REMAT_RETURN_IF_ERROR(
      halfInputLinear(c, ops.proj, s.at(t.e.merged), p + t.projW, s.at(t.e.projCopy), p + t.projB, s.work(t.fBranch)));
  REMAT_RETURN_IF_ERROR(promote(c, t, s, drop, 1, b.x, s1));
  REMAT_RETURN_IF_ERROR(
      kernels::layerNormForward(c.stream, T, d, t.epsilon, s1, p + t.ln1P, h, s.at<float>(t.e.stats1)));
  REMAT_RETURN_IF_ERROR(mlpForward(c, t, s, h, p));
  REMAT_RETURN_IF_ERROR(promote(c, t, s, drop, 2, h, s2));
  return kernels::layerNormForward(c.stream, T, d, t.epsilon, s2, p + t.ln2P, b.y, s.at<float>(t.e.stats2));
}

}  // namespace

Status prepareHalfTransformerBlock(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                                   LayerState& state) {
  const Shape& in = layer.inputShape;
  auto t = std::make_shared<HalfBlockState>();
  t->g = kernels::AttentionShape{in[0], in[1], spec.heads, in[2] / spec.heads, spec.causal};
  t->tokens = in[0] * in[1];
  t->width = in[2];
  t->hidden = spec.hidden;
  t->fused = spec.fusedAttention;
  t->tanhGelu = spec.causal;  // GPT-2's gelu(approximate='tanh'); ViT's and BERT's exact (erf) form
  t->postNorm = !spec.preNorm;
  t->dropoutP = spec.dropoutP;
  t->epsilon = static_cast<float>(spec.epsilon);
  setParams(*t);
  t->e = halfBlockLayout(in, spec);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, t->e.savedBytes));
  layOutScratch(*t, state);
  state.halfBlock = std::move(t);
  return Status::ok();
}

Status forwardHalfTransformerBlock(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                                   const LayerContext& c, const ForwardBuffers& b) {
  const HalfBlockState& t = *state.halfBlock;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the block's forward lacks its workspace or E");
  const Saved s{keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : t.discardShift)};
  const Dropout drop{rng::streamKey(seed, rng::Purpose::Dropout, l), t.dropoutP};
  return t.postNorm ? postNormForward(c, t, s, drop, b) : preNormForward(c, t, s, drop, b);
}

}  // namespace remat::gpu
