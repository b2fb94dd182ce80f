// transformer_block under bf16-mixed on the GPU, its backward (cuda_transformer_half.hpp): the CPU's
// backwardHalfTransformerBlock. A sublayer's float32 output gradient is cast to bfloat16 (the
// promotion's backward) and through its dropout mask; the linears' weight gradients go through a
// bfloat16 scratch into the float32 masters; a casting linear's bfloat16 d(input) is cast to the
// float32 gradient of the norm output (or x(l-1)) it read.
#include "cuda_transformer_half.hpp"
#include "kernels_attention_half.hpp"
#include "kernels_half.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::gpu {
namespace {

using halfblock::Dropout;
using halfblock::Ops;
using kernels::Bf16;

struct Tensors {
  const std::byte* saved;
  std::byte* workspace;
  template <typename T = Bf16>
  const T* at(std::uint64_t offset) const {
    return reinterpret_cast<const T*>(saved + offset);
  }
  template <typename T = Bf16>
  T* work(std::uint64_t offset) const {
    return reinterpret_cast<T*>(workspace + offset);
  }
};

// halfRows = bfloat16(dOut) through the branch's dropout mask (site 1 or 2).
Status branchGradient(const LayerContext& c, const HalfBlockState& t, const Tensors& s, const Dropout& drop, int site,
                      const float* dOut) {
  const Index count = t.tokens * t.width;
  Bf16* halfRows = s.work(t.bHalfRows);
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, count, dOut, halfRows));
  if (!drop.active()) return Status::ok();
  return kernels::dropoutBackwardHalf(c.stream, count, drop.p, s.at<std::uint8_t>(site == 1 ? t.e.mask1 : t.e.mask2),
                                      halfRows, halfRows);
}

// A casting linear's backward (qkv, fc1): its float32 input's gradient into dInput (none when null).
Status castingBackward(const LayerContext& c, const HalfBlockState& t, const Tensors& s, const Linear& op,
                       std::uint64_t cast, std::uint64_t copy, const Bf16* dy, Index weight, Index bias,
                       NodeGradients& g, float* dInput) {
  Bf16* dx = dInput != nullptr ? s.work(t.bCast) : nullptr;
  REMAT_RETURN_IF_ERROR(
      halfLinearBackward(c, op, s.at(cast), dy, s.at(copy), dx, s.work(t.bWeight), g.at(weight), g.at(bias)));
  return dx == nullptr ? Status::ok() : kernels::castToFloat(c.stream, op.rows * op.in, dx, dInput);
}

// Math attention's backward from dO's heads (`dOut`) into d(qkv) rows (`wide`).
Status mathBackward(const LayerContext& c, const HalfBlockState& t, const Tensors& s, const Dropout& drop,
                    const Bf16* dOut, Bf16* wide) {
  const Index S = t.g.seq, dh = t.g.headDim, d = t.width, heads = t.tokens * d;
  Bf16 *square = s.work(t.bSquare), *grads = s.work(t.bGradHeads);
  const Bf16* used = drop.active() ? s.at(t.e.dropped) : s.at(t.e.probs);
  REMAT_RETURN_IF_ERROR(
      gemmHalfBatched(c, halfblock::headProduct(t, false, true, S, S, dh), dOut, s.at(t.e.v), square, "dO v^T"));
  REMAT_RETURN_IF_ERROR(
      kernels::attentionSoftmaxBackwardHalf(c.stream, t.g, {drop.site(3), drop.p}, s.at(t.e.probs),
                                            drop.active() ? s.at<std::uint8_t>(t.e.attnMask) : nullptr, square));
  REMAT_RETURN_IF_ERROR(
      gemmHalfBatched(c, halfblock::headProduct(t, false, false, S, dh, S), square, s.at(t.e.k), grads, "dS k"));
  REMAT_RETURN_IF_ERROR(gemmHalfBatched(c, halfblock::headProduct(t, true, false, S, dh, S), square, s.at(t.e.q),
                                        grads + heads, "dS^T q"));
  REMAT_RETURN_IF_ERROR(
      gemmHalfBatched(c, halfblock::headProduct(t, true, false, S, dh, S), used, dOut, grads + 2 * heads, "P^T dO"));
  for (Index part = 0; part < 3; ++part)
    REMAT_RETURN_IF_ERROR(kernels::headsToRowsHalf(c.stream, t.g, grads + part * heads, wide, 3 * d, part * d));
  return Status::ok();
}

// The attention sublayer's backward from the float32 gradient of its promoted output: the
// out-projection, the attention, qkv writing its float32 input's gradient (none when null).
Status attentionBackward(const LayerContext& c, const HalfBlockState& t, const Tensors& s, const Dropout& drop,
                         NodeGradients& g, const float* dOut, float* dInput) {
  const Ops ops(t);
  const Index d = t.width;
  Bf16 *halfRows = s.work(t.bHalfRows), *wide = s.work(t.bWide), *heads = s.work(t.bHeads);
  REMAT_RETURN_IF_ERROR(branchGradient(c, t, s, drop, 1, dOut));
  REMAT_RETURN_IF_ERROR(halfLinearBackward(c, ops.proj, s.at(t.e.merged), halfRows, s.at(t.e.projCopy), heads,
                                           s.work(t.bWeight), g.at(t.projW), g.at(t.projB)));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, heads, d, 0, halfRows));  // dO's heads
  if (t.fused)
    REMAT_RETURN_IF_ERROR(kernels::flashAttentionBackwardHalf(c.stream, t.g, {drop.site(3), drop.p}, s.at(t.e.qkvOut),
                                                              s.at(t.e.attnOut), s.at<float>(t.e.lse), halfRows, wide));
  else
    REMAT_RETURN_IF_ERROR(mathBackward(c, t, s, drop, halfRows, wide));
  return castingBackward(c, t, s, ops.qkv, t.e.qkvCast, t.e.qkvCopy, wide, t.qkvW, t.qkvB, g, dInput);
}

// The MLP's backward from the float32 gradient of its promoted output into fc1's float32 input's.
Status mlpBackward(const LayerContext& c, const HalfBlockState& t, const Tensors& s, const Dropout& drop,
                   NodeGradients& g, const float* dOut, float* dInput) {
  const Ops ops(t);
  const Index count = t.tokens * t.hidden;
  Bf16* wide = s.work(t.bWide);
  float* work = s.work<float>(t.bFloatWide);
  REMAT_RETURN_IF_ERROR(branchGradient(c, t, s, drop, 2, dOut));
  REMAT_RETURN_IF_ERROR(halfLinearBackward(c, ops.fc2, s.at(t.e.gelu), s.work(t.bHalfRows), s.at(t.e.fc2Copy), wide,
                                           s.work(t.bWeight), g.at(t.fc2W), g.at(t.fc2B)));
  // GELU's backward in float32 from its bfloat16 input and d(output), rounded
  REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, count, s.at(t.e.fc), work));
  REMAT_RETURN_IF_ERROR(kernels::castToFloat(c.stream, count, wide, work + count));
  REMAT_RETURN_IF_ERROR(kernels::geluBackward(c.stream, count, t.tanhGelu, work, work + count, work + count));
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, count, work + count, wide));
  return castingBackward(c, t, s, ops.fc1, t.e.fc1Cast, t.e.fc1Copy, wide, t.fc1W, t.fc1B, g, dInput);
}

Status preNormBackward(const LayerContext& c, const HalfBlockState& t, const Dropout& drop, const BackwardBuffers& b) {
  const Tensors s{b.extra, b.workspace};
  const float* p = b.params;
  NodeGradients g = transformerNodeGradients(c.stream, t, b);
  const Index T = t.tokens, d = t.width;
  float *rows = s.work<float>(t.bRows), *dh1 = s.work<float>(t.bDh1);
  REMAT_RETURN_IF_ERROR(mlpBackward(c, t, s, drop, g, b.dy, rows));
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, T, d, s.at<float>(t.e.h1), rows, p + t.ln2P,
                                                   s.at<float>(t.e.stats2), dh1, g.at(t.ln2P)));
  REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * d, dh1, b.dy, dh1));  // the residual: d(h1) = dy + ln_2's
  REMAT_RETURN_IF_ERROR(attentionBackward(c, t, s, drop, g, dh1, rows));
  if (b.dx != nullptr) REMAT_RETURN_IF_ERROR(kernels::copyOrAdd(c.stream, T * d, dh1, b.dx, false));
  // ln_1's input gradient is added to the residual's (none for layer 1: dx is null).
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, T, d, b.x, rows, p + t.ln1P, s.at<float>(t.e.stats1), b.dx,
                                                   g.at(t.ln1P), 1, /*accumulate=*/true));
  return g.close();
}

Status postNormBackward(const LayerContext& c, const HalfBlockState& t, const Dropout& drop, const BackwardBuffers& b) {
  const Tensors s{b.extra, b.workspace};
  const float* p = b.params;
  NodeGradients g = transformerNodeGradients(c.stream, t, b);
  const Index T = t.tokens, d = t.width;
  float *rows = s.work<float>(t.bRows), *residual = s.work<float>(t.bDh1);
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, T, d, s.at<float>(t.e.s2), b.dy, p + t.ln2P,
                                                   s.at<float>(t.e.stats2), residual, g.at(t.ln2P)));
  REMAT_RETURN_IF_ERROR(mlpBackward(c, t, s, drop, g, residual, rows));
  REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * d, rows, residual, rows));  // d(h): the MLP's and the residual's
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, T, d, s.at<float>(t.e.h1), rows, p + t.ln1P,
                                                   s.at<float>(t.e.stats1), residual, g.at(t.ln1P)));
  REMAT_RETURN_IF_ERROR(attentionBackward(c, t, s, drop, g, residual, b.dx));
  if (b.dx != nullptr)  // d(s1) reaches x(l-1) through the residual too
    REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * d, b.dx, residual, b.dx));
  return g.close();
}

}  // namespace

Status backwardHalfTransformerBlock(const LayerState& state, std::size_t l, std::uint64_t seed, const LayerContext& c,
                                    const BackwardBuffers& b) {
  const HalfBlockState& t = *state.halfBlock;
  if (b.workspace == nullptr || b.extra == nullptr || (!t.postNorm && b.x == nullptr))
    return Status::internal("gpu: " + state.label + ": the block's backward lacks x(l-1), E or its workspace");
  const Dropout drop{rng::streamKey(seed, rng::Purpose::Dropout, l), t.dropoutP};
  return t.postNorm ? postNormBackward(c, t, drop, b) : preNormBackward(c, t, drop, b);
}

}  // namespace remat::gpu
