// swin_block on the GPU (docs/memory-model.md 12.6, docs/gpu.md): the CPU's run_swin.cpp op for op.
// torchvision's SwinTransformerBlock, x + sd(attn(norm1(x))), then + sd(mlp(norm2(.))), where attn
// pads to whole windows, rolls by -shift, partitions, runs qkv, math attention with the relative
// position bias (gathered each forward) and, shifted, the shift mask (made each forward), merges
// heads, proj, reverses, rolls back and crops. E is the CPU's, byte for byte: both norms'
// statistics, the windowed input, the q, k, v copies in heads order (one window in the whole
// batch: q and qkv itself, k and v copied out into the workspace each pass), the merged heads, the
// probabilities, h1, norm2's output, fc1's and GELU's outputs and, with stochastic depth, its two
// noises [N]. A discard-mode forward lays the same tensors out at the start of its workspace.
// Parameters: norm1, the table [(2M-1)^2, h], qkv, proj, norm2, fc1, fc2.
#include "cuda_swin.hpp"

#include <algorithm>

#include "cuda_attention.hpp"
#include "kernels_window.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::gpu {

struct SwinState : SwinParams {
  kernels::WindowShape w;
  kernels::AttentionShape g;  // batch N*nW, seq L
  Index hidden = 0;
  double stochasticDepth = 0.0;
  float epsilon = 1e-5f;
  bool single = false;  // N*nW = 1
  std::uint64_t st1 = 0, st2 = 0, windowed = 0, q = 0, k = 0, v = 0, qkvOut = 0, merged = 0, probs = 0;
  std::uint64_t h1 = 0, ln2Out = 0, fc = 0, gelu = 0, noise = 0, savedBytes = 0;
  std::uint64_t fLn1 = 0, fQkv = 0, fKv = 0, fAttn = 0, fProj = 0, fBias = 0, fMask = 0, discardShift = 0;
  std::uint64_t bWide = 0, bRowsA = 0, bRowsB = 0, bH1 = 0, bHeads = 0, bSquare = 0, bKv = 0, bGrads = 0;
};

namespace {

constexpr std::uint64_t kAlignBytes = 256;
std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }

struct Packed {  // E: consecutive, no padding
  std::uint64_t at = 0;
  std::uint64_t take(std::uint64_t bytes) {
    const std::uint64_t start = at;
    at += bytes;
    return start;
  }
};

struct Regions {  // workspaces: 256-byte boundaries
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    const std::uint64_t start = (end + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    end = start + bytes;
    return start;
  }
};

Index setParams(SwinState& t) {
  static_cast<SwinParams&>(t) = swinParams(t.w.channels, t.hidden, t.w.side, t.g.heads);
  return t.count;
}

Index attentionElements(const SwinState& t) { return t.g.rows() * t.g.seq; }

void layOutSaved(SwinState& t) {
  const Index T = t.w.tokens(), Tp = t.w.paddedTokens(), C = t.w.channels, H = t.hidden;
  Packed r;
  t.st1 = r.take(floats(2 * T));
  t.st2 = r.take(floats(2 * T));
  t.windowed = r.take(floats(Tp * C));
  t.q = r.take(floats(Tp * C));
  if (t.single) {
    t.qkvOut = r.take(floats(3 * Tp * C));
  } else {
    t.k = r.take(floats(Tp * C));
    t.v = r.take(floats(Tp * C));
  }
  t.merged = r.take(floats(Tp * C));
  t.probs = r.take(floats(attentionElements(t)));
  t.h1 = r.take(floats(T * C));
  t.ln2Out = r.take(floats(T * C));
  t.fc = r.take(floats(T * H));
  t.gelu = r.take(floats(T * H));
  if (t.stochasticDepth > 0.0) t.noise = r.take(floats(2 * t.w.batch));
  t.savedBytes = r.at;
}

void layOutScratch(SwinState& t, LayerState& state) {
  const Index T = t.w.tokens(), Tp = t.w.paddedTokens(), C = t.w.channels, L = t.w.area();
  t.discardShift = (t.savedBytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  Regions f;
  f.end = t.discardShift;
  auto add = [&](std::uint64_t bytes) { return f.add(bytes) - t.discardShift; };
  t.fLn1 = add(floats(T * C));
  if (!t.single) t.fQkv = add(floats(3 * Tp * C));  // single: qkv is written into E
  if (t.single) t.fKv = add(floats(2 * Tp * C));
  t.fAttn = add(floats(Tp * C));  // PV's output, heads order
  t.fProj = add(floats(Tp * C));
  t.fBias = add(floats(t.g.heads * L * L));
  if (t.w.shifted()) t.fMask = add(floats(t.w.windows() * L * L));
  state.requiredFwdWorkspace = f.end;
  Regions b;
  t.bWide = b.add(floats(std::max(T * t.hidden, 3 * Tp * C)));  // d(GELU's output), later d(qkv)
  t.bRowsA = b.add(floats(std::max(T, Tp) * C));
  t.bRowsB = b.add(floats(std::max(T, Tp) * C));
  t.bH1 = b.add(floats(T * C));
  t.bHeads = b.add(floats(Tp * C));
  t.bSquare = b.add(floats(attentionElements(t)));
  if (t.single) t.bKv = b.add(floats(2 * Tp * C));
  t.bGrads = b.add(floats(3 * Tp * C));  // dq, dk, dv per head before the merge
  state.requiredBwdWorkspace = b.end;
}

}  // namespace

SwinParams swinParams(Index C, Index H, Index side, Index heads) {
  const Index tableSide = 2 * side - 1;
  SwinParams t;
  Packed r;
  auto take = [&r](Index n) { return static_cast<Index>(r.take(static_cast<std::uint64_t>(n))); };
  t.ln1P = take(2 * C), t.table = take(tableSide * tableSide * heads), t.qkvW = take(3 * C * C), t.qkvB = take(3 * C);
  t.projW = take(C * C), t.projB = take(C), t.ln2P = take(2 * C), t.fc1W = take(H * C), t.fc1B = take(H);
  t.fc2W = take(C * H), t.fc2B = take(C);
  t.count = static_cast<Index>(r.at);
  return t;
}

Status prepareSwinBlock(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state) {
  const Shape& in = layer.inputShape;
  if (in.size() != 4 || spec.heads <= 0 || in[3] % spec.heads != 0 || spec.window <= 0)
    return check.fail("swin_block needs an [N, H, W, C] input with C divisible by the heads, got " + shapeToString(in));
  auto t = std::make_shared<SwinState>();
  t->w = kernels::windowShape(in[0], in[1], in[2], in[3], spec.window, spec.shift);
  t->g = kernels::AttentionShape{in[0] * t->w.windows(), t->w.area(), spec.heads, in[3] / spec.heads, false};
  t->hidden = spec.hidden;
  t->stochasticDepth = spec.stochasticDepth;
  t->epsilon = static_cast<float>(spec.epsilon);
  t->single = t->g.batch == 1;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(setParams(*t))));
  layOutSaved(*t);
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, t->savedBytes));
  layOutScratch(*t, state);
  state.swin = std::move(t);
  return Status::ok();
}

namespace {

struct Tensors {
  const SwinState& t;
  std::byte* saved;
  std::byte* scratch;
  float* at(std::uint64_t offset) const { return reinterpret_cast<float*>(saved + offset); }
  float* work(std::uint64_t offset) const { return reinterpret_cast<float*>(scratch + offset); }
};

struct Ops {
  Linear qkv, proj, fc1, fc2;
  explicit Ops(const SwinState& t)
      : qkv{t.w.paddedTokens(), t.w.channels, 3 * t.w.channels, "qkv"},
        proj{t.w.paddedTokens(), t.w.channels, t.w.channels, "proj"},
        fc1{t.w.tokens(), t.w.channels, t.hidden, "fc1"},
        fc2{t.w.tokens(), t.hidden, t.w.channels, "fc2"} {}
};

// k and v in heads order: E's copies, or (one window in the batch) copies out of E's qkv into kv.
Status keysAndValues(const LayerContext& c, const SwinState& t, const float* qkv, float* kv, const float*& k,
                     const float*& v) {
  if (!t.single) return Status::ok();
  const Index C = t.w.channels, vOffset = t.w.paddedTokens() * C;
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, qkv, 3 * C, C, kv));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, qkv, 3 * C, 2 * C, kv + vOffset));
  k = kv;
  v = kv + vOffset;
  return Status::ok();
}

Status attentionForward(const LayerContext& c, const Tensors& s, const float* params) {
  const SwinState& t = s.t;
  const Ops ops(t);
  const Index C = t.w.channels;
  REMAT_RETURN_IF_ERROR(kernels::windowPartition(c.stream, t.w, s.work(t.fLn1), s.at(t.windowed)));
  float* qkv = t.single ? s.at(t.qkvOut) : s.work(t.fQkv);
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.qkv, s.at(t.windowed), params + t.qkvW, params + t.qkvB, qkv));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, qkv, 3 * C, 0, s.at(t.q)));
  const float *k = s.at(t.k), *v = s.at(t.v);
  if (t.single) {
    REMAT_RETURN_IF_ERROR(keysAndValues(c, t, qkv, s.work(t.fKv), k, v));
  } else {
    REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, qkv, 3 * C, C, s.at(t.k)));
    REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, qkv, 3 * C, 2 * C, s.at(t.v)));
  }
  kernels::ScoreBias bias{s.work(t.fBias), nullptr, t.w.windows()};
  REMAT_RETURN_IF_ERROR(kernels::relativeBiasGather(c.stream, t.w.side, t.g.heads, params + t.table, s.work(t.fBias)));
  if (t.w.shifted()) {
    REMAT_RETURN_IF_ERROR(kernels::shiftMask(c.stream, t.w, s.work(t.fMask)));
    bias.perWindow = s.work(t.fMask);
  }
  REMAT_RETURN_IF_ERROR(
      mathAttentionForward(c, t.g, MathAttention{s.at(t.q), k, v, s.at(t.probs), {}}, bias, s.work(t.fAttn)));
  REMAT_RETURN_IF_ERROR(kernels::headsToRows(c.stream, t.g, s.work(t.fAttn), s.at(t.merged), C, 0));
  return linearForward(c, ops.proj, s.at(t.merged), params + t.projW, params + t.projB, s.work(t.fProj));
}

}  // namespace

Status forwardSwinBlock(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                        const LayerContext& c, const ForwardBuffers& b) {
  const SwinState& t = *state.swin;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the block's forward lacks its workspace or E");
  const Tensors s{t, keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : t.discardShift)};
  const Ops ops(t);
  const float* p = b.params;
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C, N = t.w.batch;
  REMAT_RETURN_IF_ERROR(
      kernels::layerNormForward(c.stream, T, C, t.epsilon, b.x, p + t.ln1P, s.work(t.fLn1), s.at(t.st1)));
  REMAT_RETURN_IF_ERROR(attentionForward(c, s, p));
  float* h1 = s.at(t.h1);
  REMAT_RETURN_IF_ERROR(kernels::windowReverse(c.stream, t.w, s.work(t.fProj), h1));  // the branch, then sd and + x
  if (t.stochasticDepth > 0.0) {
    const std::uint64_t key = rng::streamKey(seed, rng::Purpose::Dropout, l);
    REMAT_RETURN_IF_ERROR(kernels::stochasticDepthNoise(c.stream, N, t.stochasticDepth, key, s.at(t.noise)));
    REMAT_RETURN_IF_ERROR(kernels::scaleSamples(c.stream, N, perSample, s.at(t.noise), h1, h1));
  }
  REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * C, b.x, h1, h1));
  REMAT_RETURN_IF_ERROR(
      kernels::layerNormForward(c.stream, T, C, t.epsilon, h1, p + t.ln2P, s.at(t.ln2Out), s.at(t.st2)));
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.fc1, s.at(t.ln2Out), p + t.fc1W, p + t.fc1B, s.at(t.fc)));
  REMAT_RETURN_IF_ERROR(kernels::geluForward(c.stream, T * t.hidden, false, s.at(t.fc), s.at(t.gelu)));
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.fc2, s.at(t.gelu), p + t.fc2W, p + t.fc2B, b.y));
  if (t.stochasticDepth > 0.0)
    REMAT_RETURN_IF_ERROR(kernels::scaleSamples(c.stream, N, perSample, s.at(t.noise) + N, b.y, b.y));
  return kernels::add(c.stream, T * C, b.y, h1, b.y);
}

namespace {

struct BackwardTensors {
  const SwinState& t;
  const BackwardBuffers& b;
  const float* at(std::uint64_t offset) const { return reinterpret_cast<const float*>(b.extra + offset); }
  float* work(std::uint64_t offset) const { return reinterpret_cast<float*>(b.workspace + offset); }
};

// From d(h1): d(norm1's output) into rowsB, the gradients of proj, the attention (the bias
// table's included) and qkv on the way.
Status attentionBackward(const LayerContext& c, const BackwardTensors& s, const float* dh1) {
  const SwinState& t = s.t;
  const Ops ops(t);
  const Index C = t.w.channels, perWindowImage = t.w.windows() * t.w.area() * C;
  const float* p = s.b.params;
  float* g = s.b.paramGrads;
  float *rowsA = s.work(t.bRowsA), *rowsB = s.work(t.bRowsB), *wide = s.work(t.bWide);
  REMAT_RETURN_IF_ERROR(kernels::windowPartition(c.stream, t.w, dh1, rowsA));  // the reverse's backward
  if (t.stochasticDepth > 0.0)
    REMAT_RETURN_IF_ERROR(kernels::scaleSamples(c.stream, t.w.batch, perWindowImage, s.at(t.noise), rowsA, rowsA));
  REMAT_RETURN_IF_ERROR(
      linearBackward(c, ops.proj, s.at(t.merged), rowsA, p + t.projW, rowsB, g + t.projW, g + t.projB));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, rowsB, C, 0, s.work(t.bHeads)));
  const float *k = s.at(t.k), *v = s.at(t.v);
  REMAT_RETURN_IF_ERROR(keysAndValues(c, t, s.at(t.qkvOut), s.work(t.bKv), k, v));
  const MathAttention m{s.at(t.q), k, v, const_cast<float*>(s.at(t.probs)), {}};  // read only
  REMAT_RETURN_IF_ERROR(mathAttentionBackward(c, t.g, m, s.work(t.bHeads), s.work(t.bSquare), s.work(t.bGrads), wide));
  REMAT_RETURN_IF_ERROR(
      kernels::relativeBiasBackward(c.stream, t.w.side, t.g.heads, t.g.batch, s.work(t.bSquare), g + t.table));
  REMAT_RETURN_IF_ERROR(linearBackward(c, ops.qkv, s.at(t.windowed), wide, p + t.qkvW, rowsA, g + t.qkvW, g + t.qkvB));
  return kernels::windowReverse(c.stream, t.w, rowsA, rowsB);  // the partition's backward
}

}  // namespace

Status backwardSwinBlock(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const SwinState& t = *state.swin;
  if (b.workspace == nullptr || b.extra == nullptr || b.x == nullptr)
    return Status::internal("gpu: " + state.label + ": the block's backward lacks x(l-1), E or its workspace");
  const BackwardTensors s{t, b};
  const Ops ops(t);
  const float* p = b.params;
  float* g = b.paramGrads;
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C, N = t.w.batch;
  float *wide = s.work(t.bWide), *rowsA = s.work(t.bRowsA), *dh1 = s.work(t.bH1);
  const float* dMlp = b.dy;
  if (t.stochasticDepth > 0.0) {
    REMAT_RETURN_IF_ERROR(kernels::scaleSamples(c.stream, N, perSample, s.at(t.noise) + N, b.dy, rowsA));
    dMlp = rowsA;
  }
  REMAT_RETURN_IF_ERROR(linearBackward(c, ops.fc2, s.at(t.gelu), dMlp, p + t.fc2W, wide, g + t.fc2W, g + t.fc2B));
  REMAT_RETURN_IF_ERROR(kernels::geluBackward(c.stream, T * t.hidden, false, s.at(t.fc), wide, wide));
  REMAT_RETURN_IF_ERROR(linearBackward(c, ops.fc1, s.at(t.ln2Out), wide, p + t.fc1W, rowsA, g + t.fc1W, g + t.fc1B));
  REMAT_RETURN_IF_ERROR(
      kernels::layerNormBackward(c.stream, T, C, s.at(t.h1), rowsA, p + t.ln2P, s.at(t.st2), dh1, g + t.ln2P));
  REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * C, dh1, b.dy, dh1));  // the residual: d(h1) = dy + norm2's
  REMAT_RETURN_IF_ERROR(attentionBackward(c, s, dh1));
  if (b.dx != nullptr) REMAT_RETURN_IF_ERROR(kernels::copyOrAdd(c.stream, T * C, dh1, b.dx, false));
  // norm1's input gradient is added to the residual's (none for layer 1).
  return kernels::layerNormBackward(c.stream, T, C, b.x, s.work(t.bRowsB), p + t.ln1P, s.at(t.st1), b.dx, g + t.ln1P, 1,
                                    /*accumulate=*/true);
}

}  // namespace remat::gpu
