// swin_block under bf16-mixed on the GPU (cuda_swin_half.hpp): the CPU's run_swin_half.cpp op for op.
// E is cuda_swin_half_layout.hpp's HalfSwinBlockLayout: both norms' float32 statistics, the windowed
// input, [qkv's weight copy], q * scale, the k and v copies (one window in the batch: qkv's output
// instead, k and v copied out into the workspace each pass), the merged heads, [proj's weight copy],
// softmax's float32 result, its bfloat16 cast, h1, norm2's output, [fc1's weight copy], fc1's and
// GELU's outputs, [fc2's weight copy] and with stochastic depth its two bfloat16 noises [N].
// Parameters as float32's (cuda_swin.hpp's SwinParams).
#include "cuda_swin_half.hpp"

#include <algorithm>
#include <cmath>

#include "cuda_linear_half.hpp"
#include "cuda_swin.hpp"
#include "cuda_swin_half_layout.hpp"
#include "cuda_transformer_half.hpp"
#include "kernels_attention_half.hpp"
#include "kernels_half_convnext.hpp"
#include "kernels_window_half.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::gpu {

struct HalfSwinBlockState : SwinParams {
  kernels::WindowShape w;
  kernels::AttentionShape g;  // batch N*nW, seq L
  Index hidden = 0;
  double stochasticDepth = 0.0;
  float epsilon = 1e-5f;
  bool single = false;  // N*nW = 1
  HalfSwinBlockLayout e;
  // forward scratch (after discardShift in a discard-mode forward)
  std::uint64_t discardShift = 0, fNorm = 0, fQkv = 0, fKv = 0, fAttn = 0, fProj = 0, fBranch = 0, fBias = 0, fMask = 0;
  // backward scratch
  std::uint64_t bRowsA = 0, bRowsB = 0, bDh1 = 0, bNorm = 0, bWide = 0, bHeads = 0, bSquare = 0, bScores = 0, bKv = 0;
  std::uint64_t bGrads = 0, bWeight = 0;
};

namespace {

using kernels::Bf16;

constexpr std::uint64_t kAlignBytes = 256;
std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }
std::uint64_t halves(Index n) { return static_cast<std::uint64_t>(n) * 2; }

struct Regions {  // workspaces: 256-byte boundaries
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    const std::uint64_t start = (end + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    end = start + bytes;
    return start;
  }
};

Index attentionElements(const HalfSwinBlockState& t) { return t.g.rows() * t.g.seq; }
float scaleOf(const HalfSwinBlockState& t) { return 1.0f / std::sqrt(static_cast<float>(t.g.headDim)); }

void layOutScratch(HalfSwinBlockState& t, LayerState& state) {
  const Index T = t.w.tokens(), Tp = t.w.paddedTokens(), C = t.w.channels, L = t.w.area(), H = t.hidden;
  t.discardShift = (t.e.savedBytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  Regions f;
  f.end = t.discardShift;
  auto add = [&](std::uint64_t bytes) { return f.add(bytes) - t.discardShift; };
  t.fNorm = add(halves(T * C));                     // norm1's bfloat16 output
  if (!t.single) t.fQkv = add(halves(3 * Tp * C));  // single: qkv is written into E
  if (t.single) t.fKv = add(halves(2 * Tp * C));
  t.fAttn = add(halves(Tp * C));  // P @ v, heads order
  t.fProj = add(halves(Tp * C));
  t.fBranch = add(halves(T * C));
  t.fBias = add(floats(t.g.heads * L * L));
  if (t.w.shifted()) t.fMask = add(floats(t.w.windows() * L * L));
  state.requiredFwdWorkspace = f.end;
  Regions b;
  const Index rows = std::max(T, Tp);
  t.bRowsA = b.add(halves(rows * C));
  t.bRowsB = b.add(halves(rows * C));
  t.bDh1 = b.add(halves(T * C));
  t.bNorm = b.add(halves(T * C));                        // a norm's bfloat16 d(input)
  t.bWide = b.add(halves(std::max(T * H, 3 * Tp * C)));  // d(GELU's output), later d(qkv)
  t.bHeads = b.add(halves(Tp * C));                      // dO's heads
  t.bSquare = b.add(halves(attentionElements(t)));       // d(P), then d(scores) rounded
  t.bScores = b.add(floats(attentionElements(t)));       // d(scores) in float32
  if (t.single) t.bKv = b.add(halves(2 * Tp * C));
  t.bGrads = b.add(halves(3 * Tp * C));                   // dq, dk, dv per head before the merge
  t.bWeight = b.add(halves(std::max(3 * C * C, C * H)));  // a linear's bfloat16 weight gradient
  state.requiredBwdWorkspace = b.end;
}

}  // namespace

Status copyingHalfLinear(const LayerContext& c, const Linear& op, const Bf16* x, const float* w, Bf16* copy,
                         const float* bias, Bf16* y) {
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, op.out * op.in, w, copy));
  return halfLinearForward(c, op, x, copy, bias, y);
}

Status prepareHalfSwinBlock(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                            LayerState& state) {
  const Shape& in = layer.inputShape;
  auto t = std::make_shared<HalfSwinBlockState>();
  t->w = kernels::windowShape(in[0], in[1], in[2], in[3], spec.window, spec.shift);
  t->g = kernels::AttentionShape{in[0] * t->w.windows(), t->w.area(), spec.heads, in[3] / spec.heads, false};
  t->hidden = spec.hidden;
  t->stochasticDepth = spec.stochasticDepth;
  t->epsilon = static_cast<float>(spec.epsilon);
  t->single = t->g.batch == 1;
  static_cast<SwinParams&>(*t) = swinParams(in[3], spec.hidden, spec.window, spec.heads);
  t->e = halfSwinBlockLayout(in, spec);
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(t->count)));
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, t->e.savedBytes));
  layOutScratch(*t, state);
  state.halfSwin = std::move(t);
  return Status::ok();
}

namespace {

struct Tensors {  // the saved tensors (E, or the start of a discard-mode workspace) and the scratch
  const HalfSwinBlockState& t;
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

struct Ops {
  Linear qkv, proj, fc1, fc2;
  explicit Ops(const HalfSwinBlockState& t)
      : qkv{t.w.paddedTokens(), t.w.channels, 3 * t.w.channels, "qkv"},
        proj{t.w.paddedTokens(), t.w.channels, t.w.channels, "proj"},
        fc1{t.w.tokens(), t.w.channels, t.hidden, "fc1"},
        fc2{t.w.tokens(), t.hidden, t.w.channels, "fc2"} {}
};

// k and v in heads order: E's copies, or (one window in the batch) copies out of E's qkv into kv.
Status keysAndValues(const LayerContext& c, const HalfSwinBlockState& t, const Bf16* qkv, Bf16* kv, const Bf16*& k,
                     const Bf16*& v) {
  if (!t.single) return Status::ok();
  const Index C = t.w.channels, vOffset = t.w.paddedTokens() * C;
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, qkv, 3 * C, C, kv));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, qkv, 3 * C, 2 * C, kv + vOffset));
  k = kv;
  v = kv + vOffset;
  return Status::ok();
}

// From norm1's bfloat16 output (fNorm) to proj's bfloat16 output (fProj).
Status attentionForward(const LayerContext& c, const Tensors& s, const float* p) {
  const HalfSwinBlockState& t = s.t;
  const Ops ops(t);
  const Index C = t.w.channels, L = t.g.seq, dh = t.g.headDim;
  REMAT_RETURN_IF_ERROR(kernels::windowPartitionHalf(c.stream, t.w, s.work(t.fNorm), s.at(t.e.windowed)));
  Bf16* qkv = t.single ? s.at(t.e.qkvOut) : s.work(t.fQkv);
  REMAT_RETURN_IF_ERROR(
      copyingHalfLinear(c, ops.qkv, s.at(t.e.windowed), p + t.qkvW, s.at(t.e.qkvCopy), p + t.qkvB, qkv));
  Bf16* q = s.at(t.e.q);
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, qkv, 3 * C, 0, q));
  REMAT_RETURN_IF_ERROR(kernels::scaleHalf(c.stream, t.w.paddedTokens() * C, scaleOf(t), q, q));  // a bfloat16 mul
  const Bf16 *k = s.at(t.e.k), *v = s.at(t.e.v);
  if (t.single) {
    REMAT_RETURN_IF_ERROR(keysAndValues(c, t, qkv, s.work(t.fKv), k, v));
  } else {
    REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, qkv, 3 * C, C, s.at(t.e.k)));
    REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, qkv, 3 * C, 2 * C, s.at(t.e.v)));
  }
  kernels::ScoreBias bias{s.work<float>(t.fBias), nullptr, t.w.windows()};
  REMAT_RETURN_IF_ERROR(
      kernels::relativeBiasGather(c.stream, t.w.side, t.g.heads, p + t.table, s.work<float>(t.fBias)));
  if (t.w.shifted()) {
    REMAT_RETURN_IF_ERROR(kernels::shiftMask(c.stream, t.w, s.work<float>(t.fMask)));
    bias.perWindow = s.work<float>(t.fMask);
  }
  Bf16* probs = s.at(t.e.probs16);  // q k^T in bfloat16, then (in place) softmax's bfloat16 cast
  REMAT_RETURN_IF_ERROR(gemmHalfBatched(c, halfblock::headProduct(t.g, false, true, L, L, dh), q, k, probs, "q k^T"));
  REMAT_RETURN_IF_ERROR(kernels::swinSoftmaxHalf(c.stream, t.g, bias, probs, s.at<float>(t.e.probs32)));
  REMAT_RETURN_IF_ERROR(
      gemmHalfBatched(c, halfblock::headProduct(t.g, false, false, L, dh, L), probs, v, s.work(t.fAttn), "P v"));
  REMAT_RETURN_IF_ERROR(kernels::headsToRowsHalf(c.stream, t.g, s.work(t.fAttn), s.at(t.e.merged), C, 0));
  return copyingHalfLinear(c, ops.proj, s.at(t.e.merged), p + t.projW, s.at(t.e.projCopy), p + t.projB,
                           s.work(t.fProj));
}

// y = h1 + sd(fc2(gelu(fc1(norm2(h1))))), from h1 in E.
Status mlpForward(const LayerContext& c, const Tensors& s, const float* p, Bf16* y) {
  const HalfSwinBlockState& t = s.t;
  const Ops ops(t);
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C;
  Bf16 *branch = s.work(t.fBranch), *h1 = s.at(t.e.h1);
  REMAT_RETURN_IF_ERROR(kernels::layerNormForwardHalf(c.stream, T, C, t.epsilon, h1, p + t.ln2P, s.at(t.e.ln2Out),
                                                      s.at<float>(t.e.stats2), 1));
  REMAT_RETURN_IF_ERROR(
      copyingHalfLinear(c, ops.fc1, s.at(t.e.ln2Out), p + t.fc1W, s.at(t.e.fc1Copy), p + t.fc1B, s.at(t.e.fc)));
  REMAT_RETURN_IF_ERROR(kernels::geluForwardHalf(c.stream, T * t.hidden, false, s.at(t.e.fc), s.at(t.e.gelu)));
  REMAT_RETURN_IF_ERROR(
      copyingHalfLinear(c, ops.fc2, s.at(t.e.gelu), p + t.fc2W, s.at(t.e.fc2Copy), p + t.fc2B, branch));
  if (t.stochasticDepth > 0.0)
    REMAT_RETURN_IF_ERROR(
        kernels::scaleSamplesHalf(c.stream, t.w.batch, perSample, s.at(t.e.noise) + t.w.batch, branch, branch));
  return kernels::addHalf(c.stream, T * C, h1, branch, y);
}

}  // namespace

Status forwardHalfSwinBlock(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                            const LayerContext& c, const ForwardBuffers& b) {
  const HalfSwinBlockState& t = *state.halfSwin;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the block's forward lacks its workspace or E");
  const Tensors s{t, keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : t.discardShift)};
  const float* p = b.params;
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C, N = t.w.batch;
  const auto* x = reinterpret_cast<const Bf16*>(b.x);
  REMAT_RETURN_IF_ERROR(kernels::layerNormForwardHalf(c.stream, T, C, t.epsilon, x, p + t.ln1P, s.work(t.fNorm),
                                                      s.at<float>(t.e.stats1), 1));
  REMAT_RETURN_IF_ERROR(attentionForward(c, s, p));
  Bf16* branch = s.work(t.fBranch);
  REMAT_RETURN_IF_ERROR(kernels::windowReverseHalf(c.stream, t.w, s.work(t.fProj), branch));
  if (t.stochasticDepth > 0.0) {
    const std::uint64_t key = rng::streamKey(seed, rng::Purpose::Dropout, l);
    REMAT_RETURN_IF_ERROR(kernels::stochasticDepthNoiseHalf(c.stream, N, t.stochasticDepth, key, s.at(t.e.noise)));
    REMAT_RETURN_IF_ERROR(kernels::scaleSamplesHalf(c.stream, N, perSample, s.at(t.e.noise), branch, branch));
  }
  REMAT_RETURN_IF_ERROR(kernels::addHalf(c.stream, T * C, x, branch, s.at(t.e.h1)));
  return mlpForward(c, s, p, reinterpret_cast<Bf16*>(b.y));
}

namespace {

struct BackwardTensors {
  const HalfSwinBlockState& t;
  const BackwardBuffers& b;
  template <typename T = Bf16>
  const T* at(std::uint64_t offset) const {
    return reinterpret_cast<const T*>(b.extra + offset);
  }
  template <typename T = Bf16>
  T* work(std::uint64_t offset) const {
    return reinterpret_cast<T*>(b.workspace + offset);
  }
};

// The attention's products backward, from dO's heads (bHeads) into d(qkv) rows (wide): d(P) = dO
// v^T, softmax's backward from its float32 result (the bias table's gradient summed from the float32
// d(scores)), dq = dS k through the scale, dk = dS^T q, dv = P^T dO.
Status productsBackward(const LayerContext& c, const BackwardTensors& s, Bf16* wide) {
  const HalfSwinBlockState& t = s.t;
  const Index C = t.w.channels, L = t.g.seq, dh = t.g.headDim, heads = t.w.paddedTokens() * C;
  const Bf16 *k = s.at(t.e.k), *v = s.at(t.e.v), *q = s.at(t.e.q), *dO = s.work(t.bHeads);
  REMAT_RETURN_IF_ERROR(keysAndValues(c, t, s.at(t.e.qkvOut), s.work(t.bKv), k, v));
  Bf16 *square = s.work(t.bSquare), *grads = s.work(t.bGrads);
  REMAT_RETURN_IF_ERROR(
      gemmHalfBatched(c, halfblock::headProduct(t.g, false, true, L, L, dh), dO, v, square, "dO v^T"));
  REMAT_RETURN_IF_ERROR(
      kernels::swinSoftmaxBackwardHalf(c.stream, t.g, s.at<float>(t.e.probs32), square, s.work<float>(t.bScores)));
  REMAT_RETURN_IF_ERROR(kernels::relativeBiasBackward(c.stream, t.w.side, t.g.heads, t.g.batch,
                                                      s.work<float>(t.bScores), s.b.paramGrads + t.table));
  REMAT_RETURN_IF_ERROR(
      gemmHalfBatched(c, halfblock::headProduct(t.g, false, false, L, dh, L), square, k, grads, "dS k"));
  REMAT_RETURN_IF_ERROR(kernels::scaleHalf(c.stream, heads, scaleOf(t), grads, grads));  // d(q * scale)
  REMAT_RETURN_IF_ERROR(
      gemmHalfBatched(c, halfblock::headProduct(t.g, true, false, L, dh, L), square, q, grads + heads, "dS^T q"));
  REMAT_RETURN_IF_ERROR(gemmHalfBatched(c, halfblock::headProduct(t.g, true, false, L, dh, L), s.at(t.e.probs16), dO,
                                        grads + 2 * heads, "P^T dO"));
  for (Index part = 0; part < 3; ++part)
    REMAT_RETURN_IF_ERROR(kernels::headsToRowsHalf(c.stream, t.g, grads + part * heads, wide, 3 * C, part * C));
  return Status::ok();
}

// From d(h1) (bfloat16): d(norm1's output) into rowsB, the gradients of proj, the attention (the
// bias table's included) and qkv on the way.
Status attentionBackward(const LayerContext& c, const BackwardTensors& s, const Bf16* dh1) {
  const HalfSwinBlockState& t = s.t;
  const Ops ops(t);
  const Index C = t.w.channels, perWindowImage = t.w.windows() * t.w.area() * C;
  float* g = s.b.paramGrads;
  Bf16 *rowsA = s.work(t.bRowsA), *rowsB = s.work(t.bRowsB), *wide = s.work(t.bWide), *dw = s.work(t.bWeight);
  REMAT_RETURN_IF_ERROR(kernels::windowPartitionHalf(c.stream, t.w, dh1, rowsA));  // the reverse's backward
  if (t.stochasticDepth > 0.0)
    REMAT_RETURN_IF_ERROR(
        kernels::scaleSamplesHalf(c.stream, t.w.batch, perWindowImage, s.at(t.e.noise), rowsA, rowsA));
  REMAT_RETURN_IF_ERROR(halfLinearBackward(c, ops.proj, s.at(t.e.merged), rowsA, s.at(t.e.projCopy), rowsB, dw,
                                           g + t.projW, g + t.projB));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeadsHalf(c.stream, t.g, rowsB, C, 0, s.work(t.bHeads)));
  REMAT_RETURN_IF_ERROR(productsBackward(c, s, wide));
  REMAT_RETURN_IF_ERROR(
      halfLinearBackward(c, ops.qkv, s.at(t.e.windowed), wide, s.at(t.e.qkvCopy), rowsA, dw, g + t.qkvW, g + t.qkvB));
  return kernels::windowReverseHalf(c.stream, t.w, rowsA, rowsB);  // the partition's backward
}

// From dy (its stochastic depth applied) to d(norm2's output) in rowsA: fc2, GELU, fc1.
Status mlpBackward(const LayerContext& c, const BackwardTensors& s, const Bf16* dMlp) {
  const HalfSwinBlockState& t = s.t;
  const Ops ops(t);
  float* g = s.b.paramGrads;
  Bf16 *wide = s.work(t.bWide), *dw = s.work(t.bWeight);
  REMAT_RETURN_IF_ERROR(
      halfLinearBackward(c, ops.fc2, s.at(t.e.gelu), dMlp, s.at(t.e.fc2Copy), wide, dw, g + t.fc2W, g + t.fc2B));
  REMAT_RETURN_IF_ERROR(kernels::geluBackwardHalf(c.stream, t.w.tokens() * t.hidden, false, s.at(t.e.fc), wide, wide));
  return halfLinearBackward(c, ops.fc1, s.at(t.e.ln2Out), wide, s.at(t.e.fc1Copy), s.work(t.bRowsA), dw, g + t.fc1W,
                            g + t.fc1B);
}

}  // namespace

Status backwardHalfSwinBlock(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const HalfSwinBlockState& t = *state.halfSwin;
  if (b.workspace == nullptr || b.extra == nullptr || b.x == nullptr)
    return Status::internal("gpu: " + state.label + ": the block's backward lacks x(l-1), E or its workspace");
  const BackwardTensors s{t, b};
  const float* p = b.params;
  float* g = b.paramGrads;
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C;
  const auto* x = reinterpret_cast<const Bf16*>(b.x);
  const auto* dy = reinterpret_cast<const Bf16*>(b.dy);
  Bf16 *rowsA = s.work(t.bRowsA), *dh1 = s.work(t.bDh1), *dNorm = s.work(t.bNorm);
  const Bf16* dMlp = dy;
  if (t.stochasticDepth > 0.0) {
    REMAT_RETURN_IF_ERROR(
        kernels::scaleSamplesHalf(c.stream, t.w.batch, perSample, s.at(t.e.noise) + t.w.batch, dy, rowsA));
    dMlp = rowsA;
  }
  REMAT_RETURN_IF_ERROR(mlpBackward(c, s, dMlp));
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackwardHalf(c.stream, T, C, s.at(t.e.h1), rowsA, p + t.ln2P,
                                                       s.at<float>(t.e.stats2), dNorm, g + t.ln2P, 1, false));
  // The residual: d(h1) = dy + norm2's d(input), each rounded to bfloat16 (the CPU's addHalfRounded).
  REMAT_RETURN_IF_ERROR(kernels::addHalf(c.stream, T * C, dy, dNorm, dh1));
  REMAT_RETURN_IF_ERROR(attentionBackward(c, s, dh1));
  Bf16* dx1 = b.dx != nullptr ? dNorm : nullptr;  // layer 1 has no d(input): the norm's parameters only
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackwardHalf(c.stream, T, C, x, s.work(t.bRowsB), p + t.ln1P,
                                                       s.at<float>(t.e.stats1), dx1, g + t.ln1P, 1, false));
  if (b.dx == nullptr) return Status::ok();
  return kernels::addHalf(c.stream, T * C, dh1, dNorm, reinterpret_cast<Bf16*>(b.dx));
}

}  // namespace remat::gpu
