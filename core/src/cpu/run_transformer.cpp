// transformer_block on the CPU (docs/memory-model.md 12.1, docs/executor.md): a pre-norm block
// x + proj(attn(qkv(ln1(x)))), then + fc2(gelu(fc1(ln2(.)))) with oneDNN's layer normalization
// and matmul (the linears over the N*S token rows) and attention.hpp's own kernels. E holds
// exactly what the model says PyTorch keeps, in this order: ln1's and ln2's statistics, ln1's
// output, the merged heads, h1, ln2's output, fc1's output, GELU's output, then math: the q, k, v
// copies and the probabilities / fused: qkv, the attention output and its log-sum-exp. A
// discard-mode forward (no E) lays the same tensors out at the start of its workspace, so the
// forward workspace is E plus the keep-mode scratch. BERT's post-norm block (postNormForward)
// keeps the same four [T, d] tensors in the same slots (x + attention, ln_1's output, h + MLP).
// With dropout (p > 0) E also holds, after the float tensors, math's dropped probabilities, then
// the two residual dropouts' masks and math's probability mask (1 byte per element); the fused rule
// keeps no mask: its backward redraws it from the counter-based generator (attention.hpp), as
// PyTorch 2's SDPA does from its philox seed and offset. Each dropout site draws from its own
// sub-stream of the layer's dropout key (1, 2: the residuals, 3: the attention).
// Parameters in PyTorch's order: ln_1, the qkv projection (weight [3d, d], bias), the output
// projection, ln_2, fc1 ([H, d], bias), fc2.
#include <algorithm>

#include "attention.hpp"
#include "block_prep.hpp"
#include "device_impl.hpp"
#include "dnnl_attention.hpp"

namespace remat::cpu {

// The parameters' offsets (BlockParams) in floats.
struct TransformerBlockPrep : BlockGeometry, BlockParams {
  LinearOp qkv, proj, fc1, fc2;
  LayerNormOp ln1, ln2;
  MathAttentionOp attention;  // math only
  // the saved tensors' offsets in E (bytes), and E's size
  std::uint64_t st1 = 0, st2 = 0, ln1Out = 0, merged = 0, h1 = 0, ln2Out = 0, fc = 0, gelu = 0;
  std::uint64_t q = 0, k = 0, v = 0, probs = 0, qkvOut = 0, attnOut = 0, lse = 0, savedBytes = 0;
  std::uint64_t dropped = 0, mask1 = 0, mask2 = 0, attnMask = 0;  // p > 0 only
  // forward scratch (keep mode; a discard-mode forward adds discardShift to each)
  std::uint64_t fQkv = 0, fAttn = 0, fProj = 0, fThread = 0, fDnnl = 0, discardShift = 0;
  // backward scratch
  std::uint64_t bWide = 0, bRows = 0, bH1 = 0, bHeads = 0, bSquare = 0, bThread = 0, bDnnl = 0;
};

namespace {

// E in the model's order (file comment); returns its bytes.
std::uint64_t layOutSaved(TransformerBlockPrep& t) {
  const Index T = t.tokens, d = t.width, H = t.hidden, A = t.g.batch * t.g.heads * t.g.seq * t.g.seq;
  std::uint64_t at = 0;
  auto take = [&at](std::uint64_t bytes) {
    const std::uint64_t start = at;
    at += bytes;
    return start;
  };
  t.st1 = take(floats(2 * T));
  t.st2 = take(floats(2 * T));
  t.ln1Out = take(floats(T * d));
  t.merged = take(floats(T * d));
  t.h1 = take(floats(T * d));
  t.ln2Out = take(floats(T * d));
  t.fc = take(floats(T * H));
  t.gelu = take(floats(T * H));
  if (t.fused) {
    t.qkvOut = take(floats(3 * T * d));
    t.attnOut = take(floats(T * d));
    t.lse = take(floats(t.g.batch * t.g.heads * t.g.seq));
  } else {
    t.q = take(floats(T * d));
    t.k = take(floats(T * d));
    t.v = take(floats(T * d));
    t.probs = take(floats(A));
  }
  if (t.dropoutP > 0.0) {
    if (!t.fused) t.dropped = take(floats(A));
    t.mask1 = take(static_cast<std::uint64_t>(T * d));
    t.mask2 = take(static_cast<std::uint64_t>(T * d));
    if (!t.fused) t.attnMask = take(static_cast<std::uint64_t>(A));
  }
  return at;
}

std::uint64_t maxScratch(const TransformerBlockPrep& t, bool forward) {
  const std::uint64_t m = maxLinearNormScratch(t, forward);
  return t.fused ? m : std::max(m, t.attention.scratchBytes());
}

// The workspaces' regions; sets the layer's required wf (E + the keep-mode scratch) and wb.
void layOutScratch(TransformerBlockPrep& t, PreparedLayer& prepared) {
  const Index T = t.tokens, d = t.width, H = t.hidden, A = t.g.batch * t.g.heads * t.g.seq * t.g.seq;
  const std::uint64_t threadBytes = floats(attentionThreadFloats(t.g)) * static_cast<std::uint64_t>(t.g.threads);
  ScratchLayout f;
  if (!t.fused) {
    t.fQkv = f.add(floats(3 * T * d));  // the projection before the heads are copied out
    t.fAttn = f.add(floats(T * d));     // PV's output [N, h, S, dh]
  } else {
    t.fThread = f.add(threadBytes);
  }
  t.fProj = f.add(floats(T * d));
  t.fDnnl = f.add(maxScratch(t, true));
  t.discardShift = (t.savedBytes + 63) / 64 * 64;  // the scratch after the saved tensors, cache-line aligned
  prepared.requiredFwdWorkspace = t.discardShift + f.bytes();
  ScratchLayout b;
  t.bWide = b.add(floats(std::max(T * H, 3 * T * d)));  // d(fc1's output), later d(qkv)
  t.bRows = b.add(floats(T * d));                       // d(ln2's output), d(merged), d(ln1's output)
  t.bH1 = b.add(floats(T * d));
  t.bHeads = b.add(floats(T * d));
  t.bSquare = b.add(floats(t.fused ? t.g.batch * t.g.heads * t.g.seq : A));
  if (t.fused) t.bThread = b.add(threadBytes);
  t.bDnnl = b.add(maxScratch(t, false));
  prepared.requiredBwdWorkspace = b.bytes();
}

// Pre-norm: ln_1 reads x(l-1) and adds its gradient to the residual's; post-norm (BERT): the qkv
// linear reads x(l-1) and every op writes its input gradient (the residual is added after).
Status createOps(const DnnlContext& context, TransformerBlockPrep& t, float epsilon, bool firstLayer,
                 const std::string& label) {
  const Index T = t.tokens, d = t.width, H = t.hidden;
  const InputGrad first = firstLayer ? InputGrad::None : (t.postNorm ? InputGrad::Write : InputGrad::Add);
  auto linear = [&](LinearOp& op, Index in, Index out, const char* name, InputGrad grad = InputGrad::Write) -> Status {
    return assign(LinearOp::create(context, T, in, out, true, grad, label + ", " + name), op);
  };
  auto norm = [&](LayerNormOp& op, InputGrad grad, const char* name) {
    return createNorm(context, T, d, epsilon, grad, label, name, op);
  };
  REMAT_RETURN_IF_ERROR(norm(t.ln1, t.postNorm ? InputGrad::Write : first, "ln_1"));
  REMAT_RETURN_IF_ERROR(linear(t.qkv, d, 3 * d, "qkv", t.postNorm ? first : InputGrad::Write));
  REMAT_RETURN_IF_ERROR(linear(t.proj, d, d, "out projection"));
  REMAT_RETURN_IF_ERROR(norm(t.ln2, InputGrad::Write, "ln_2"));
  REMAT_RETURN_IF_ERROR(linear(t.fc1, d, H, "fc1"));
  REMAT_RETURN_IF_ERROR(linear(t.fc2, H, d, "fc2"));
  if (t.fused) return Status::ok();
  auto attention = MathAttentionOp::create(context, t.g, label);
  if (!attention) return attention.status();
  t.attention = std::move(attention).value();
  return Status::ok();
}

}  // namespace

Status prepareTransformerBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                               const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto t = std::make_shared<TransformerBlockPrep>();
  setBlockGeometry(*t, layer.inputShape, spec);
  REMAT_RETURN_IF_ERROR(setBlockParams(*t, t->width, t->hidden, layer.paramCount, check));
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, true));
  REMAT_RETURN_IF_ERROR(createOps(context, *t, static_cast<float>(spec.epsilon), firstLayer, prepared.label));
  REMAT_RETURN_IF_ERROR(layOutCheckedE(*t, layer, check, prepared, layOutSaved, layOutScratch));
  prepared.transformer = std::move(t);
  return Status::ok();
}

namespace {

// The saved tensors (in E, or at the start of a discard-mode workspace) and the scratch.
struct ForwardTensors {
  const TransformerBlockPrep& t;
  std::byte* saved;
  std::byte* scratch;
  DropoutDraw drop;  // the layer's; inactive when p = 0
  float* at(std::uint64_t offset) const { return reinterpret_cast<float*>(saved + offset); }
  float* work(std::uint64_t offset) const { return reinterpret_cast<float*>(scratch + offset); }
};

// Math attention's dropout tensors in E (or the discard-mode workspace); none when p = 0.
AttentionDropout mathDropout(const TransformerBlockPrep& t, const DropoutDraw& drop, const std::byte* saved) {
  if (!drop.active()) return {};
  auto* base = const_cast<std::byte*>(saved);  // the backward only reads them
  return {drop.site(3), reinterpret_cast<std::uint8_t*>(base + t.attnMask), reinterpret_cast<float*>(base + t.dropped)};
}

// A residual branch's dropout in place, its mask into E (site 1: attention's, 2: the MLP's).
void residualDropout(const TransformerBlockPrep& t, const ForwardTensors& s, int site, float* branch) {
  if (!s.drop.active()) return;
  auto* mask = reinterpret_cast<std::uint8_t*>(s.saved + (site == 1 ? t.mask1 : t.mask2));
  dropoutFlat(t.tokens * t.width, s.drop.site(static_cast<std::uint64_t>(site)), branch, branch, mask);
}

// The backward of a residual branch's dropout: dy itself when p = 0, else mask * dy * scale in `into`.
const float* residualDropoutBackward(const TransformerBlockPrep& t, const DropoutDraw& drop, const std::byte* saved,
                                     int site, const float* dy, float* into) {
  if (!drop.active()) return dy;
  const auto* mask = reinterpret_cast<const std::uint8_t*>(saved + (site == 1 ? t.mask1 : t.mask2));
  dropoutFlatBackward(t.tokens * t.width, drop.site(static_cast<std::uint64_t>(site)), mask, dy, into);
  return into;
}

Status attentionForward(const TransformerBlockPrep& t, const ForwardTensors& s, const float* ln1Out,
                        const DnnlContext& context, const float* p) {
  std::byte* dnnl = s.scratch + t.fDnnl;
  const Index d = t.width;
  float* attn;
  if (t.fused) {
    REMAT_RETURN_IF_ERROR(t.qkv.forward(context, ln1Out, p + t.qkvW, p + t.qkvB, s.at(t.qkvOut), dnnl));
    attn = s.at(t.attnOut);
    flashAttentionForward(t.g, s.drop.site(3), s.at(t.qkvOut), attn, s.at(t.lse), s.work(t.fThread));
  } else {
    float* qkv = s.work(t.fQkv);
    REMAT_RETURN_IF_ERROR(t.qkv.forward(context, ln1Out, p + t.qkvW, p + t.qkvB, qkv, dnnl));
    rowsToHeads(t.g, qkv, 3 * d, 0, s.at(t.q));
    rowsToHeads(t.g, qkv, 3 * d, d, s.at(t.k));
    rowsToHeads(t.g, qkv, 3 * d, 2 * d, s.at(t.v));
    attn = s.work(t.fAttn);
    REMAT_RETURN_IF_ERROR(t.attention.forward(context, s.at(t.q), s.at(t.k), s.at(t.v), s.at(t.probs),
                                              mathDropout(t, s.drop, s.saved), attn, {}, s.scratch + t.fDnnl));
  }
  headsToRows(t.g, attn, s.at(t.merged), d, 0);
  return Status::ok();
}

// BERT: s1 = x + proj(attn(qkv(x))), h = ln_1(s1), s2 = h + fc2(gelu(fc1(h))), y = ln_2(s2). The
// pre-norm slots of E hold s1 (ln_1Out's), h (h1's) and s2 (ln_2Out's): the same four [T, d].
Status postNormForward(const DnnlContext& context, const TransformerBlockPrep& t, const ForwardTensors& s,
                       const ForwardBuffers& b) {
  std::byte* dnnl = s.scratch + t.fDnnl;
  const float* p = b.params;
  const Index T = t.tokens, d = t.width;
  float *s1 = s.at(t.ln1Out), *h = s.at(t.h1), *s2 = s.at(t.ln2Out), *projected = s.work(t.fProj);
  REMAT_RETURN_IF_ERROR(attentionForward(t, s, b.x, context, p));
  REMAT_RETURN_IF_ERROR(t.proj.forward(context, s.at(t.merged), p + t.projW, p + t.projB, projected, dnnl));
  residualDropout(t, s, 1, projected);
  add(T * d, b.x, projected, s1);
  REMAT_RETURN_IF_ERROR(t.ln1.forward(context, s1, p + t.ln1P, h, s.at(t.st1), dnnl));
  REMAT_RETURN_IF_ERROR(t.fc1.forward(context, h, p + t.fc1W, p + t.fc1B, s.at(t.fc), dnnl));
  geluForward(T * t.hidden, t.tanhGelu, s.at(t.fc), s.at(t.gelu));
  REMAT_RETURN_IF_ERROR(t.fc2.forward(context, s.at(t.gelu), p + t.fc2W, p + t.fc2B, projected, dnnl));
  residualDropout(t, s, 2, projected);
  add(T * d, h, projected, s2);
  return t.ln2.forward(context, s2, p + t.ln2P, b.y, s.at(t.st2), dnnl);
}

// The attention's backward from d(merged heads) in `rows`: d(qkv) into the wide region.
Status attentionBackward(const DnnlContext& context, const TransformerBlockPrep& t, const DropoutDraw& drop,
                         const std::byte* saved, std::byte* workspace, float* rows) {
  auto at = [saved](std::uint64_t offset) { return reinterpret_cast<const float*>(saved + offset); };
  auto work = [workspace](std::uint64_t offset) { return reinterpret_cast<float*>(workspace + offset); };
  float *wide = work(t.bWide), *heads = work(t.bHeads);
  rowsToHeads(t.g, rows, t.width, 0, heads);
  if (!t.fused)
    return t.attention.backward(context, at(t.q), at(t.k), at(t.v), at(t.probs), mathDropout(t, drop, saved), heads,
                                work(t.bSquare), wide, workspace + t.bDnnl);
  flashAttentionBackward(t.g, drop.site(3), at(t.qkvOut), at(t.attnOut), at(t.lse), heads, wide, work(t.bSquare),
                         work(t.bThread));
  return Status::ok();
}

Status postNormBackward(const DnnlContext& context, const TransformerBlockPrep& t, const DropoutDraw& drop,
                        const BackwardBuffers& b) {
  auto at = [&b](std::uint64_t offset) { return reinterpret_cast<const float*>(b.extra + offset); };
  auto work = [&b](std::uint64_t offset) { return reinterpret_cast<float*>(b.workspace + offset); };
  std::byte* dnnl = b.workspace + t.bDnnl;
  const float* p = b.params;
  NodeGradients<float> g(t, b.paramGrads, b.freshParamGrads);
  const Index T = t.tokens, d = t.width;
  float *wide = work(t.bWide), *rows = work(t.bRows), *residual = work(t.bH1);
  REMAT_RETURN_IF_ERROR(
      t.ln2.backward(context, at(t.ln2Out), b.dy, p + t.ln2P, at(t.st2), residual, g.at(t.ln2P), dnnl));
  const float* dFc2 = residualDropoutBackward(t, drop, b.extra, 2, residual, rows);
  REMAT_RETURN_IF_ERROR(t.fc2.backward(context, at(t.gelu), dFc2, p + t.fc2W, wide, g.at(t.fc2W), g.at(t.fc2B), dnnl));
  geluBackward(T * t.hidden, t.tanhGelu, at(t.fc), wide, wide);
  REMAT_RETURN_IF_ERROR(t.fc1.backward(context, at(t.h1), wide, p + t.fc1W, rows, g.at(t.fc1W), g.at(t.fc1B), dnnl));
  add(T * d, rows, residual, rows);  // d(h): the MLP's and the residual's
  REMAT_RETURN_IF_ERROR(
      t.ln1.backward(context, at(t.ln1Out), rows, p + t.ln1P, at(t.st1), residual, g.at(t.ln1P), dnnl));
  const float* dProj = residualDropoutBackward(t, drop, b.extra, 1, residual, work(t.bHeads));
  REMAT_RETURN_IF_ERROR(
      t.proj.backward(context, at(t.merged), dProj, p + t.projW, rows, g.at(t.projW), g.at(t.projB), dnnl));
  REMAT_RETURN_IF_ERROR(attentionBackward(context, t, drop, b.extra, b.workspace, rows));
  REMAT_RETURN_IF_ERROR(t.qkv.backward(context, b.x, wide, p + t.qkvW, b.dx, g.at(t.qkvW), g.at(t.qkvB), dnnl));
  if (b.dx != nullptr) add(T * d, b.dx, residual, b.dx);  // d(s1) reaches x(l-1) through the residual too
  return Status::ok();
}

}  // namespace

Status forwardTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                               std::uint64_t dropoutKey, const ForwardBuffers& b) {
  if (prepared.halfBlock) return forwardHalfTransformerBlock(context, prepared, mode, dropoutKey, b);  // bf16-mixed
  if (prepared.pureBlock) return forwardPureTransformerBlock(context, prepared, mode, dropoutKey, b);  // pure bf16
  const TransformerBlockPrep& t = *prepared.transformer;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the block's forward lacks its workspace or E");
  const ForwardTensors s{t, keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : t.discardShift),
                         DropoutDraw(dropoutKey, t.dropoutP)};
  if (t.postNorm) return postNormForward(context, t, s, b);
  std::byte* dnnl = s.scratch + t.fDnnl;
  const float* p = b.params;
  const Index T = t.tokens, d = t.width;
  REMAT_RETURN_IF_ERROR(t.ln1.forward(context, b.x, p + t.ln1P, s.at(t.ln1Out), s.at(t.st1), dnnl));
  REMAT_RETURN_IF_ERROR(attentionForward(t, s, s.at(t.ln1Out), context, p));
  float* projected = s.work(t.fProj);
  REMAT_RETURN_IF_ERROR(t.proj.forward(context, s.at(t.merged), p + t.projW, p + t.projB, projected, dnnl));
  residualDropout(t, s, 1, projected);
  add(T * d, b.x, projected, s.at(t.h1));
  REMAT_RETURN_IF_ERROR(t.ln2.forward(context, s.at(t.h1), p + t.ln2P, s.at(t.ln2Out), s.at(t.st2), dnnl));
  REMAT_RETURN_IF_ERROR(t.fc1.forward(context, s.at(t.ln2Out), p + t.fc1W, p + t.fc1B, s.at(t.fc), dnnl));
  geluForward(T * t.hidden, t.tanhGelu, s.at(t.fc), s.at(t.gelu));
  REMAT_RETURN_IF_ERROR(t.fc2.forward(context, s.at(t.gelu), p + t.fc2W, p + t.fc2B, b.y, dnnl));
  residualDropout(t, s, 2, b.y);
  add(T * d, b.y, s.at(t.h1), b.y);
  return Status::ok();
}

Status backwardTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, std::uint64_t dropoutKey,
                                const BackwardBuffers& b) {
  if (prepared.halfBlock) return backwardHalfTransformerBlock(context, prepared, dropoutKey, b);  // bf16-mixed
  if (prepared.pureBlock) return backwardPureTransformerBlock(context, prepared, dropoutKey, b);  // pure bf16
  const TransformerBlockPrep& t = *prepared.transformer;
  if (b.workspace == nullptr || b.extra == nullptr || b.x == nullptr)
    return Status::internal("cpu: " + prepared.label + ": the block's backward lacks x(l-1), E or its workspace");
  const DropoutDraw drop(dropoutKey, t.dropoutP);
  if (t.postNorm) return postNormBackward(context, t, drop, b);
  const auto* saved = const_cast<std::byte*>(b.extra);
  auto at = [saved](std::uint64_t offset) { return reinterpret_cast<const float*>(saved + offset); };
  auto work = [&b](std::uint64_t offset) { return reinterpret_cast<float*>(b.workspace + offset); };
  std::byte* dnnl = b.workspace + t.bDnnl;
  const float* p = b.params;
  NodeGradients<float> g(t, b.paramGrads, b.freshParamGrads);
  const Index T = t.tokens, d = t.width;
  float *wide = work(t.bWide), *rows = work(t.bRows), *dh1 = work(t.bH1);
  const float* dFc2 = residualDropoutBackward(t, drop, saved, 2, b.dy, rows);
  REMAT_RETURN_IF_ERROR(t.fc2.backward(context, at(t.gelu), dFc2, p + t.fc2W, wide, g.at(t.fc2W), g.at(t.fc2B), dnnl));
  geluBackward(T * t.hidden, t.tanhGelu, at(t.fc), wide, wide);
  REMAT_RETURN_IF_ERROR(
      t.fc1.backward(context, at(t.ln2Out), wide, p + t.fc1W, rows, g.at(t.fc1W), g.at(t.fc1B), dnnl));
  REMAT_RETURN_IF_ERROR(t.ln2.backward(context, at(t.h1), rows, p + t.ln2P, at(t.st2), dh1, g.at(t.ln2P), dnnl));
  add(T * d, dh1, b.dy, dh1);  // the residual: d(h1) = dy + ln_2's
  const float* dProj = residualDropoutBackward(t, drop, saved, 1, dh1, work(t.bHeads));
  REMAT_RETURN_IF_ERROR(
      t.proj.backward(context, at(t.merged), dProj, p + t.projW, rows, g.at(t.projW), g.at(t.projB), dnnl));
  REMAT_RETURN_IF_ERROR(attentionBackward(context, t, drop, b.extra, b.workspace, rows));
  const float* ln1Out = at(t.ln1Out);
  REMAT_RETURN_IF_ERROR(t.qkv.backward(context, ln1Out, wide, p + t.qkvW, rows, g.at(t.qkvW), g.at(t.qkvB), dnnl));
  if (b.dx != nullptr) copyOrAdd(T * d, dh1, b.dx, false);  // ln_1's gradient is added to the residual's
  return t.ln1.backward(context, b.x, rows, p + t.ln1P, at(t.st1), b.dx, g.at(t.ln1P), dnnl);
}

}  // namespace remat::cpu
