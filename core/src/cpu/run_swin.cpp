// swin_block on the CPU (docs/memory-model.md 12.6, docs/executor.md "Swin"): torchvision's
// SwinTransformerBlock, x + sd(attn(norm1(x))), then + sd(mlp(norm2(.))), where attn is
// shifted_window_attention: pad to whole windows, roll by -shift, partition into windows, qkv,
// math attention over each window with the relative position bias (gathered from its table each
// forward) and, shifted, the shift mask (made each forward, as torchvision makes it) added to the
// scores, merge heads, proj, reverse, roll back, crop. The pieces are the transformer block's:
// oneDNN's LayerNormOp and LinearOp, attention.hpp's math kernels and GELU; window.hpp's own.
//
// E holds exactly what the model says PyTorch keeps: both norms' statistics, the windowed input
// (qkv's), the q, k, v copies in heads order (bmm's; q is kept unscaled, the kernel scales the
// dot products: the same bytes), the merged heads (proj's), the probabilities [N*nW, h, L, L],
// norm2's input h1 and output, fc1's and GELU's outputs, and with stochastic depth its two noises
// [N]. With one window in the whole batch (N*nW = 1) PyTorch's bmm keeps qkv itself instead of the
// k and v copies (section 12.7): E then holds the windowed input, q, qkv and the merged heads, and
// each pass copies k and v out of qkv into its workspace. A discard-mode forward lays the same
// tensors out at the start of its workspace. Parameters in torchvision's order: norm1, the
// relative position bias table [(2M-1)^2, h], qkv (weight [3C, C], bias), proj, norm2, fc1, fc2.
#include <algorithm>

#include "attention.hpp"
#include "block_prep.hpp"
#include "device_impl.hpp"
#include "dnnl_attention.hpp"
#include "window.hpp"

namespace remat::cpu {

struct SwinBlockPrep : SwinGeometry, BlockParams {  // the parameters' offsets in floats
  LinearOp qkv, proj, fc1, fc2;
  LayerNormOp ln1, ln2;
  MathAttentionOp attention;
  // E (bytes)
  std::uint64_t st1 = 0, st2 = 0, windowed = 0, q = 0, k = 0, v = 0, qkvOut = 0, merged = 0, probs = 0;
  std::uint64_t h1 = 0, ln2Out = 0, fc = 0, gelu = 0, noise = 0, savedBytes = 0;
  // forward scratch (keep mode; discard mode adds discardShift)
  std::uint64_t fLn1 = 0, fQkv = 0, fKv = 0, fAttn = 0, fProj = 0, fBias = 0, fMask = 0, fDnnl = 0, discardShift = 0;
  // backward scratch
  std::uint64_t bWide = 0, bRowsA = 0, bRowsB = 0, bH1 = 0, bHeads = 0, bSquare = 0, bKv = 0, bDnnl = 0;
};

namespace {

struct Region {
  std::uint64_t at = 0;
  std::uint64_t take(std::uint64_t bytes) {
    const std::uint64_t start = at;
    at += bytes;
    return start;
  }
};

Index attentionElements(const SwinBlockPrep& t) { return t.g.batch * t.g.heads * t.g.seq * t.g.seq; }

// E in the order of the file comment; returns its bytes.
std::uint64_t layOutSaved(SwinBlockPrep& t) {
  const Index T = t.w.tokens(), Tp = t.w.paddedTokens(), C = t.w.channels, H = t.hidden;
  Region r;
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
  return r.at;
}

std::uint64_t maxScratch(const SwinBlockPrep& t, bool forward) {
  return std::max(maxLinearNormScratch(t, forward), t.attention.scratchBytes());
}

// The workspaces' regions; sets the layer's required wf (E + the keep-mode scratch) and wb.
void layOutScratch(SwinBlockPrep& t, PreparedLayer& prepared) {
  const Index T = t.w.tokens(), Tp = t.w.paddedTokens(), C = t.w.channels, L = t.w.area();
  ScratchLayout f;
  t.fLn1 = f.add(floats(T * C));
  if (!t.single) t.fQkv = f.add(floats(3 * Tp * C));  // single: qkv is written into E
  if (t.single) t.fKv = f.add(floats(2 * Tp * C));
  t.fAttn = f.add(floats(Tp * C));  // PV's output, heads order
  t.fProj = f.add(floats(Tp * C));
  t.fBias = f.add(floats(t.g.heads * L * L));
  if (t.w.shifted()) t.fMask = f.add(floats(t.w.windows() * L * L));
  t.fDnnl = f.add(maxScratch(t, true));
  t.discardShift = aligned(t.savedBytes);
  prepared.requiredFwdWorkspace = t.discardShift + f.bytes();
  ScratchLayout b;
  t.bWide = b.add(floats(std::max(T * t.hidden, 3 * Tp * C)));  // d(GELU's output), later d(qkv)
  t.bRowsA = b.add(floats(std::max(T, Tp) * C));
  t.bRowsB = b.add(floats(std::max(T, Tp) * C));
  t.bH1 = b.add(floats(T * C));
  t.bHeads = b.add(floats(Tp * C));
  t.bSquare = b.add(floats(attentionElements(t)));
  if (t.single) t.bKv = b.add(floats(2 * Tp * C));
  t.bDnnl = b.add(maxScratch(t, false));
  prepared.requiredBwdWorkspace = b.bytes();
}

Status createOps(const DnnlContext& context, SwinBlockPrep& t, float epsilon, bool firstLayer,
                 const std::string& label) {
  const Index T = t.w.tokens(), Tp = t.w.paddedTokens(), C = t.w.channels, H = t.hidden;
  auto linear = [&](LinearOp& op, Index rows, Index in, Index out, const char* name) -> Status {
    return assign(LinearOp::create(context, rows, in, out, true, InputGrad::Write, label + ", " + name), op);
  };
  auto norm = [&](LayerNormOp& op, InputGrad grad, const char* name) {
    return createNorm(context, T, C, epsilon, grad, label, name, op);
  };
  REMAT_RETURN_IF_ERROR(norm(t.ln1, firstLayer ? InputGrad::None : InputGrad::Add, "norm1"));
  REMAT_RETURN_IF_ERROR(linear(t.qkv, Tp, C, 3 * C, "qkv"));
  REMAT_RETURN_IF_ERROR(linear(t.proj, Tp, C, C, "proj"));
  REMAT_RETURN_IF_ERROR(norm(t.ln2, InputGrad::Write, "norm2"));
  REMAT_RETURN_IF_ERROR(linear(t.fc1, T, C, H, "fc1"));
  REMAT_RETURN_IF_ERROR(linear(t.fc2, T, H, C, "fc2"));
  auto attention = MathAttentionOp::create(context, t.g, label);
  if (!attention) return attention.status();
  t.attention = std::move(attention).value();
  return Status::ok();
}

}  // namespace

Status prepareSwinBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                        const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto t = std::make_shared<SwinBlockPrep>();
  setSwinGeometry(*t, layer.inputShape, spec);
  REMAT_RETURN_IF_ERROR(setSwinParams(*t, *t, spec.heads, layer.paramCount, check));
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, true));
  REMAT_RETURN_IF_ERROR(createOps(context, *t, static_cast<float>(spec.epsilon), firstLayer, prepared.label));
  REMAT_RETURN_IF_ERROR(layOutCheckedE(*t, layer, check, prepared, layOutSaved, layOutScratch));
  prepared.swinBlock = std::move(t);
  return Status::ok();
}

namespace {

struct Tensors {
  const SwinBlockPrep& t;
  std::byte* saved;
  std::byte* scratch;
  float* at(std::uint64_t offset) const { return reinterpret_cast<float*>(saved + offset); }
  float* work(std::uint64_t offset) const { return reinterpret_cast<float*>(scratch + offset); }
};

// k and v in heads order: E's copies, or (one window in the batch) copies out of E's qkv.
void keysAndValues(const SwinBlockPrep& t, const float* saved, float* kv, const float*& k, const float*& v) {
  const Index C = t.w.channels, vOffset = t.w.paddedTokens() * C;
  if (!t.single) return;
  rowsToHeads(t.g, saved, 3 * C, C, kv);
  rowsToHeads(t.g, saved, 3 * C, 2 * C, kv + vOffset);
  k = kv;
  v = kv + vOffset;
}

// torchvision's StochasticDepth(p, "row"): per sample 0 or 1/(1-p), drawn from the layer's stream
// (site 1: the attention's branch, 2: the MLP's), so a recompute draws the same noise.
void drawNoise(const SwinBlockPrep& t, std::uint64_t dropoutKey, float* noise) {
  const DropoutDraw draw(dropoutKey, t.stochasticDepth);
  for (Index site = 0; site < 2; ++site)
    for (Index n = 0; n < t.w.batch; ++n)
      noise[site * t.w.batch + n] =
          draw.site(static_cast<std::uint64_t>(site + 1)).keep(static_cast<std::uint64_t>(n)) ? draw.scale : 0.0f;
}

Status attentionForward(const DnnlContext& context, const Tensors& s, const float* params) {
  const SwinBlockPrep& t = s.t;
  const Index C = t.w.channels;
  std::byte* dnnl = s.scratch + t.fDnnl;
  windowPartition(t.w, s.work(t.fLn1), s.at(t.windowed));
  float* qkv = t.single ? s.at(t.qkvOut) : s.work(t.fQkv);
  REMAT_RETURN_IF_ERROR(t.qkv.forward(context, s.at(t.windowed), params + t.qkvW, params + t.qkvB, qkv, dnnl));
  rowsToHeads(t.g, qkv, 3 * C, 0, s.at(t.q));
  const float *k = s.at(t.k), *v = s.at(t.v);
  if (t.single) {
    keysAndValues(t, qkv, s.work(t.fKv), k, v);
  } else {
    rowsToHeads(t.g, qkv, 3 * C, C, s.at(t.k));
    rowsToHeads(t.g, qkv, 3 * C, 2 * C, s.at(t.v));
  }
  ScoreBias bias{s.work(t.fBias), nullptr, t.w.windows()};
  relativeBiasGather(t.w.side, t.g.heads, params + t.table, s.work(t.fBias));
  if (t.w.shifted()) {
    shiftMask(t.w, s.work(t.fMask));
    bias.perWindow = s.work(t.fMask);
  }
  REMAT_RETURN_IF_ERROR(t.attention.forward(context, s.at(t.q), k, v, s.at(t.probs), {}, s.work(t.fAttn), bias, dnnl));
  headsToRows(t.g, s.work(t.fAttn), s.at(t.merged), C, 0);
  return t.proj.forward(context, s.at(t.merged), params + t.projW, params + t.projB, s.work(t.fProj), dnnl);
}

}  // namespace

Status forwardSwinBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                        std::uint64_t dropoutKey, const ForwardBuffers& b) {
  if (prepared.halfSwinBlock) return forwardHalfSwinBlock(context, prepared, mode, dropoutKey, b);  // bf16-mixed
  const SwinBlockPrep& t = *prepared.swinBlock;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the block's forward lacks its workspace or E");
  const Tensors s{t, keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : t.discardShift)};
  std::byte* dnnl = s.scratch + t.fDnnl;
  const float* p = b.params;
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C;
  REMAT_RETURN_IF_ERROR(t.ln1.forward(context, b.x, p + t.ln1P, s.work(t.fLn1), s.at(t.st1), dnnl));
  REMAT_RETURN_IF_ERROR(attentionForward(context, s, p));
  float* h1 = s.at(t.h1);
  windowReverse(t.w, s.work(t.fProj), h1);  // the branch, then sd and + x in place
  if (t.stochasticDepth > 0.0) {
    drawNoise(t, dropoutKey, s.at(t.noise));
    scaleSamples(t.w.batch, perSample, s.at(t.noise), h1, h1);
  }
  add(T * C, b.x, h1, h1);
  REMAT_RETURN_IF_ERROR(t.ln2.forward(context, h1, p + t.ln2P, s.at(t.ln2Out), s.at(t.st2), dnnl));
  REMAT_RETURN_IF_ERROR(t.fc1.forward(context, s.at(t.ln2Out), p + t.fc1W, p + t.fc1B, s.at(t.fc), dnnl));
  geluForward(T * t.hidden, false, s.at(t.fc), s.at(t.gelu));
  REMAT_RETURN_IF_ERROR(t.fc2.forward(context, s.at(t.gelu), p + t.fc2W, p + t.fc2B, b.y, dnnl));
  if (t.stochasticDepth > 0.0) scaleSamples(t.w.batch, perSample, s.at(t.noise) + t.w.batch, b.y, b.y);
  add(T * C, b.y, h1, b.y);
  return Status::ok();
}

namespace {

struct BackwardTensors {
  const SwinBlockPrep& t;
  const BackwardBuffers& b;
  const float* at(std::uint64_t offset) const { return reinterpret_cast<const float*>(b.extra + offset); }
  float* work(std::uint64_t offset) const { return reinterpret_cast<float*>(b.workspace + offset); }
  std::byte* dnnl() const { return b.workspace + t.bDnnl; }
};

// From d(h1) (dh1, which the residual keeps): d(norm1's output) into rowsB, the parameters'
// gradients of proj, the attention (the bias table's included) and qkv on the way.
Status attentionBackward(const DnnlContext& context, const BackwardTensors& s, const float* dh1) {
  const SwinBlockPrep& t = s.t;
  const Index C = t.w.channels, perWindowImage = t.w.windows() * t.w.area() * C;
  const float* p = s.b.params;
  float* g = s.b.paramGrads;
  float *rowsA = s.work(t.bRowsA), *rowsB = s.work(t.bRowsB), *wide = s.work(t.bWide);
  windowPartition(t.w, dh1, rowsA);  // d(proj's output): the reverse's backward
  if (t.stochasticDepth > 0.0) scaleSamples(t.w.batch, perWindowImage, s.at(t.noise), rowsA, rowsA);
  REMAT_RETURN_IF_ERROR(
      t.proj.backward(context, s.at(t.merged), rowsA, p + t.projW, rowsB, g + t.projW, g + t.projB, s.dnnl()));
  rowsToHeads(t.g, rowsB, C, 0, s.work(t.bHeads));
  const float *k = s.at(t.k), *v = s.at(t.v);
  keysAndValues(t, s.at(t.qkvOut), s.work(t.bKv), k, v);
  REMAT_RETURN_IF_ERROR(t.attention.backward(context, s.at(t.q), k, v, s.at(t.probs), {}, s.work(t.bHeads),
                                             s.work(t.bSquare), wide, s.dnnl()));
  relativeBiasBackward(t.w.side, t.g.heads, t.g.batch, s.work(t.bSquare), g + t.table);
  REMAT_RETURN_IF_ERROR(
      t.qkv.backward(context, s.at(t.windowed), wide, p + t.qkvW, rowsA, g + t.qkvW, g + t.qkvB, s.dnnl()));
  windowReverse(t.w, rowsA, rowsB);  // the partition's backward: the padding's rows dropped
  return Status::ok();
}

}  // namespace

Status backwardSwinBlock(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  if (prepared.halfSwinBlock) return backwardHalfSwinBlock(context, prepared, b);  // bf16-mixed
  const SwinBlockPrep& t = *prepared.swinBlock;
  if (b.workspace == nullptr || b.extra == nullptr || b.x == nullptr)
    return Status::internal("cpu: " + prepared.label + ": the block's backward lacks x(l-1), E or its workspace");
  const BackwardTensors s{t, b};
  const float* p = b.params;
  float* g = b.paramGrads;
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C;
  float *wide = s.work(t.bWide), *rowsA = s.work(t.bRowsA), *dh1 = s.work(t.bH1);
  const float* dMlp = b.dy;
  if (t.stochasticDepth > 0.0) {
    scaleSamples(t.w.batch, perSample, s.at(t.noise) + t.w.batch, b.dy, rowsA);
    dMlp = rowsA;
  }
  REMAT_RETURN_IF_ERROR(
      t.fc2.backward(context, s.at(t.gelu), dMlp, p + t.fc2W, wide, g + t.fc2W, g + t.fc2B, s.dnnl()));
  geluBackward(T * t.hidden, false, s.at(t.fc), wide, wide);
  REMAT_RETURN_IF_ERROR(
      t.fc1.backward(context, s.at(t.ln2Out), wide, p + t.fc1W, rowsA, g + t.fc1W, g + t.fc1B, s.dnnl()));
  REMAT_RETURN_IF_ERROR(t.ln2.backward(context, s.at(t.h1), rowsA, p + t.ln2P, s.at(t.st2), dh1, g + t.ln2P, s.dnnl()));
  add(T * C, dh1, b.dy, dh1);  // the residual: d(h1) = dy + norm2's
  REMAT_RETURN_IF_ERROR(attentionBackward(context, s, dh1));
  if (b.dx != nullptr) copyOrAdd(T * C, dh1, b.dx, false);  // norm1's gradient is added to the residual's
  return t.ln1.backward(context, b.x, s.work(t.bRowsB), p + t.ln1P, s.at(t.st1), b.dx, g + t.ln1P, s.dnnl());
}

}  // namespace remat::cpu
