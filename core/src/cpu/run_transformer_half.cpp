// transformer_block under bf16-mixed on the CPU (docs/memory-model.md 12.10, docs/executor.md): a
// pre-norm block with math or fused attention as PyTorch's CPU autocast runs it. The residual stream
// (x(l-1), h1, x(l)) and both layer norms are float32; the four linears are HalfLinearOps reading
// bfloat16 casts of the norms' float32 outputs (qkv, fc1) or bfloat16 inputs (the merged heads,
// GELU's output), each saving its weights' bfloat16 copy; attention and GELU run in bfloat16.
// E holds exactly what the model counts, in this order: ln_1's and ln_2's statistics, h1 (ln_2's
// float32 input), [ln_1's output's cast, qkv's weight copy], the merged heads, [out-projection's
// weight copy], [ln_2's output's cast, fc1's weight copy], fc1's output, GELU's output, [fc2's
// weight copy], then math: the q, k, v copies and the probabilities / fused: qkv's output, the
// attention's output and its float32 log-sum-exp (bracketed pairs: one HalfLinearOp's copies, as
// it lays them out). A discard-mode forward lays E out at the start of its workspace.
// The backward casts the float32 residual gradient to bfloat16 at each sublayer's output (the
// gradient of autocast's promotion) and the linears write their float32 input's gradient.
// BERT's post-norm block (postNormForward) keeps ln_1's and ln_2's float32 inputs (h1's slot, then
// s2) and qkv's cast of x(l-1) (needs_input false). With dropout (p > 0) E also holds the residual
// branches' masks (after h1 / s2; the branches' bfloat16 outputs dropped, as autocast's dropout
// follows its input) and, math only, the dropped bfloat16 probabilities and their mask; fused
// redraws its mask, as in float32. Sites as float32's: 1, 2 the residuals, 3 the attention.
#include <algorithm>

#include "attention_half.hpp"
#include "block_prep.hpp"
#include "device_impl.hpp"
#include "half_block_dropout.hpp"

namespace remat::cpu {

struct HalfBlockPrep : BlockGeometry, BlockParams {
  HalfLinearOp qkv, proj, fc1, fc2;
  LayerNormOp ln1, ln2;
  // E (bytes)
  std::uint64_t st1 = 0, st2 = 0, h1 = 0, qkvCopies = 0, merged = 0, projCopy = 0, fc1Copies = 0, fc = 0, gelu = 0;
  std::uint64_t fc2Copy = 0, q = 0, k = 0, v = 0, probs = 0, savedBytes = 0, discardShift = 0;
  std::uint64_t qkvOut = 0, attnOut = 0, lse = 0;                 // fused
  std::uint64_t mask1 = 0, mask2 = 0, dropped = 0, attnMask = 0;  // p > 0 (math: the last two)
  std::uint64_t s2 = 0;  // post-norm: ln_2's float32 input (h1's slot holds ln_1's)
  // forward scratch: a norm's float32 output, qkv's output, PV's heads, a linear's half output,
  // the threads' and the primitives' scratch
  std::uint64_t fNorm = 0, fQkv = 0, fHeads = 0, fBranch = 0, fThread = 0, fDnnl = 0;
  // backward scratch
  std::uint64_t bHalfRows = 0, bWide = 0, bRows = 0, bDh1 = 0, bHeads = 0, bThread = 0, bDnnl = 0;
};

namespace {

std::uint64_t layOutSaved(HalfBlockPrep& t) {
  const Index T = t.tokens, d = t.width, H = t.hidden, A = t.g.batch * t.g.heads * t.g.seq * t.g.seq;
  struct {  // packed, as the model sums E (ScratchLayout would align each region)
    std::uint64_t end = 0;
    std::uint64_t add(std::uint64_t bytes) {
      end += bytes;
      return end - bytes;
    }
    std::uint64_t bytes() const { return end; }
  } e;
  t.st1 = e.add(floats(2 * T));
  t.st2 = e.add(floats(2 * T));
  t.h1 = e.add(floats(T * d));
  if (t.postNorm) t.s2 = e.add(floats(T * d));
  t.qkvCopies = e.add(t.qkv.copies().inputCastBytes() + t.qkv.copies().weightCopyBytes());
  t.merged = e.add(halves(T * d));
  t.projCopy = e.add(t.proj.copies().weightCopyBytes());
  t.fc1Copies = e.add(t.fc1.copies().inputCastBytes() + t.fc1.copies().weightCopyBytes());
  t.fc = e.add(halves(T * H));
  t.gelu = e.add(halves(T * H));
  t.fc2Copy = e.add(t.fc2.copies().weightCopyBytes());
  if (t.dropoutP > 0.0) {  // the residual branches' masks, 1 byte per element
    t.mask1 = e.add(static_cast<std::uint64_t>(T * d));
    t.mask2 = e.add(static_cast<std::uint64_t>(T * d));
  }
  if (t.fused) {
    t.qkvOut = e.add(halves(3 * T * d));
    t.attnOut = e.add(halves(T * d));
    t.lse = e.add(floats(t.g.batch * t.g.heads * t.g.seq));
    return e.bytes();
  }
  t.q = e.add(halves(T * d));
  t.k = e.add(halves(T * d));
  t.v = e.add(halves(T * d));
  t.probs = e.add(halves(A));
  if (t.dropoutP > 0.0) {
    t.dropped = e.add(halves(A));
    t.attnMask = e.add(static_cast<std::uint64_t>(A));
  }
  return e.bytes();
}

void layOutScratch(HalfBlockPrep& t, PreparedLayer& prepared) {
  const Index T = t.tokens, d = t.width, H = t.hidden;
  const std::uint64_t threadBytes = floats(halfAttentionThreadFloats(t.g)) * static_cast<std::uint64_t>(t.g.threads);
  ScratchLayout f;
  t.fNorm = f.add(floats(T * d));
  t.fQkv = f.add(aligned(halves(3 * T * d)));
  t.fHeads = f.add(aligned(halves(T * d)));
  t.fBranch = f.add(aligned(halves(T * d)));
  t.fThread = f.add(threadBytes);
  t.fDnnl = f.add(maxLinearNormScratch(t, true));
  t.discardShift = aligned(t.savedBytes);
  prepared.requiredFwdWorkspace = t.discardShift + f.bytes();
  ScratchLayout b;
  t.bHalfRows = b.add(aligned(halves(T * d)));                   // a sublayer's bfloat16 d(output)
  t.bWide = b.add(aligned(halves(std::max(T * H, 3 * T * d))));  // d(GELU's output), d(fc1's), d(qkv)
  t.bRows = b.add(floats(T * d));                                // d(a norm's output), float32
  t.bDh1 = b.add(floats(T * d));
  t.bHeads = b.add(aligned(halves(T * d)));  // d(merged heads), then as heads
  t.bThread = b.add(threadBytes);
  t.bDnnl = b.add(maxLinearNormScratch(t, false));
  prepared.requiredBwdWorkspace = b.bytes();
}

Status createOps(const DnnlContext& context, HalfBlockPrep& t, float epsilon, bool firstLayer,
                 const std::string& label) {
  const Index T = t.tokens, d = t.width, H = t.hidden;
  auto linear = [&](HalfLinearOp& op, Index in, Index out, bool casts, const char* name,
                    InputGrad grad = InputGrad::Write) -> Status {
    return assign(HalfLinearOp::create(context, T, in, out, true, casts, grad, label + ", " + name), op);
  };
  auto norm = [&](LayerNormOp& op, InputGrad grad, const char* name) {
    return createNorm(context, T, d, epsilon, grad, label, name, op);
  };
  // Pre-norm: ln_1 reads x(l-1) and adds its gradient to the residual's; post-norm (BERT): the qkv
  // linear reads x(l-1) (its cast saved) and writes its gradient, the residual's added after.
  const InputGrad first = firstLayer ? InputGrad::None : (t.postNorm ? InputGrad::Write : InputGrad::Add);
  REMAT_RETURN_IF_ERROR(norm(t.ln1, t.postNorm ? InputGrad::Write : first, "ln_1"));
  REMAT_RETURN_IF_ERROR(linear(t.qkv, d, 3 * d, true, "qkv", t.postNorm ? first : InputGrad::Write));
  REMAT_RETURN_IF_ERROR(linear(t.proj, d, d, false, "out projection"));
  REMAT_RETURN_IF_ERROR(norm(t.ln2, InputGrad::Write, "ln_2"));
  REMAT_RETURN_IF_ERROR(linear(t.fc1, d, H, true, "fc1"));
  return linear(t.fc2, H, d, false, "fc2");
}

}  // namespace

bool hasHalfTransformerKernels(LayerKind kind) {
  return kind == LayerKind::TransformerBlock || kind == LayerKind::TokenEmbedding || kind == LayerKind::LmHead ||
         kind == LayerKind::ClsHead || kind == LayerKind::PatchEmbedding;
}

Status prepareHalfTransformerBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                   const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto t = std::make_shared<HalfBlockPrep>();
  setBlockGeometry(*t, layer.inputShape, spec);
  REMAT_RETURN_IF_ERROR(setBlockParams(*t, t->width, t->hidden, layer.paramCount, check));
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, spec.preNorm));
  REMAT_RETURN_IF_ERROR(createOps(context, *t, static_cast<float>(spec.epsilon), firstLayer, prepared.label));
  REMAT_RETURN_IF_ERROR(layOutCheckedE(*t, layer, check, prepared, layOutSaved, layOutScratch));
  prepared.halfBlock = std::move(t);
  return Status::ok();
}

namespace {

using HalfTensors = HalfBlockTensors;

// out = residual + float(branch): autocast's promotion of float32 + bfloat16.
void addPromoted(Index count, const float* residual, const BFloat16* branch, float* out) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < count; ++i) out[i] = residual[i] + branch[i].value();
}

// From qkv's float32 input (ln_1's output, or x(l-1) in a post-norm block) to the merged heads.
Status attentionForward(const DnnlContext& context, const HalfBlockPrep& t, const HalfTensors& s, const float* input,
                        const float* p) {
  const Index d = t.width;
  auto* qkv = t.fused ? s.at(t.qkvOut) : s.work(t.fQkv);
  REMAT_RETURN_IF_ERROR(
      t.qkv.forward(context, input, p + t.qkvW, p + t.qkvB, qkv, s.saved + t.qkvCopies, s.scratch + t.fDnnl));
  if (t.fused) {  // q, k, v stay in the saved projection; the output and log-sum-exp are saved
    fusedAttentionForwardHalf(t.g, qkv, s.at(t.attnOut), s.at<float>(t.lse), s.work<float>(t.fThread), s.drop.site(3));
    headsToRowsHalf(t.g, s.at(t.attnOut), s.at(t.merged), d, 0);
    return Status::ok();
  }
  rowsToHeadsHalf(t.g, qkv, 3 * d, 0, s.at(t.q));
  rowsToHeadsHalf(t.g, qkv, 3 * d, d, s.at(t.k));
  rowsToHeadsHalf(t.g, qkv, 3 * d, 2 * d, s.at(t.v));
  auto* heads = s.work(t.fHeads);
  mathAttentionForwardHalf(t.g, s.at(t.q), s.at(t.k), s.at(t.v), s.at(t.probs), heads, s.work<float>(t.fThread),
                           halfMathDropout(t, s));
  headsToRowsHalf(t.g, heads, s.at(t.merged), d, 0);
  return Status::ok();
}

// GELU in bfloat16: computed in float32 from the bfloat16 input, rounded (PyTorch's bf16 kernel),
// without a float32 copy in the workspace (geluForwardHalf).
void geluHalf(const HalfBlockPrep& t, const BFloat16* x, BFloat16* y) {
  geluForwardHalf(t.tokens * t.hidden, t.tanhGelu, x, y);
}

void geluHalfBackward(const HalfBlockPrep& t, const BFloat16* x, BFloat16* dyDx) {
  geluBackwardHalf(t.tokens * t.hidden, t.tanhGelu, x, dyDx);
}

// The attention sublayer's backward from the float32 gradient of its promoted output (`dOut`):
// its bfloat16 cast, the out-projection, the attention, qkv writing its float32 input's gradient.
Status attentionBackward(const DnnlContext& context, const HalfBlockPrep& t, const HalfTensors& s,
                         const float* /*params*/, NodeGradients<float>& g, const float* dOut, float* dInput) {
  std::byte* dnnl = s.scratch + t.bDnnl;
  const Index d = t.width;
  auto *halfRows = s.work(t.bHalfRows), *wide = s.work(t.bWide), *heads = s.work(t.bHeads);
  castToHalf(t.tokens * d, dOut, halfRows);
  halfBranchDropoutBackward(t, s, 1, halfRows);
  REMAT_RETURN_IF_ERROR(t.proj.backward(context, s.at(t.merged), halfRows, s.saved + t.projCopy, heads, g.at(t.projW),
                                        g.at(t.projB), dnnl));
  rowsToHeadsHalf(t.g, heads, d, 0, halfRows);
  if (t.fused)
    fusedAttentionBackwardHalf(t.g, s.at(t.qkvOut), s.at(t.attnOut), s.at<float>(t.lse), halfRows, wide,
                               s.work<float>(t.bThread), s.drop.site(3));
  else
    mathAttentionBackwardHalf(t.g, s.at(t.q), s.at(t.k), s.at(t.v), s.at(t.probs), halfRows, wide,
                              s.work<float>(t.bThread), halfMathDropout(t, s));
  return t.qkv.backward(context, nullptr, wide, s.saved + t.qkvCopies, dInput, g.at(t.qkvW), g.at(t.qkvB), dnnl);
}

// The MLP's backward from the float32 gradient of its promoted output into fc1's float32 input's.
Status mlpBackward(const DnnlContext& context, const HalfBlockPrep& t, const HalfTensors& s, NodeGradients<float>& g,
                   const float* dOut, float* dInput) {
  std::byte* dnnl = s.scratch + t.bDnnl;
  auto *halfRows = s.work(t.bHalfRows), *wide = s.work(t.bWide);
  castToHalf(t.tokens * t.width, dOut, halfRows);
  halfBranchDropoutBackward(t, s, 2, halfRows);
  REMAT_RETURN_IF_ERROR(
      t.fc2.backward(context, s.at(t.gelu), halfRows, s.saved + t.fc2Copy, wide, g.at(t.fc2W), g.at(t.fc2B), dnnl));
  geluHalfBackward(t, s.at(t.fc), wide);
  return t.fc1.backward(context, nullptr, wide, s.saved + t.fc1Copies, dInput, g.at(t.fc1W), g.at(t.fc1B), dnnl);
}

// BERT: s1 = x + proj(attn(qkv(x))), h = ln_1(s1), s2 = h + fc2(gelu(fc1(h))), y = ln_2(s2); E
// keeps s1 (h1's slot) and s2, and qkv's and fc1's casts of x and h.
Status postNormForward(const DnnlContext& context, const HalfBlockPrep& t, const HalfTensors& s,
                       const ForwardBuffers& b) {
  std::byte* dnnl = s.scratch + t.fDnnl;
  const float* p = b.params;
  const Index T = t.tokens, d = t.width;
  float *s1 = s.at<float>(t.h1), *s2 = s.at<float>(t.s2), *h = s.work<float>(t.fNorm);
  auto* branch = s.work(t.fBranch);
  REMAT_RETURN_IF_ERROR(attentionForward(context, t, s, b.x, p));
  REMAT_RETURN_IF_ERROR(
      t.proj.forward(context, s.at(t.merged), p + t.projW, p + t.projB, branch, s.saved + t.projCopy, dnnl));
  halfBranchDropout(t, s, 1, branch);
  addPromoted(T * d, b.x, branch, s1);
  REMAT_RETURN_IF_ERROR(t.ln1.forward(context, s1, p + t.ln1P, h, s.at<float>(t.st1), dnnl));
  REMAT_RETURN_IF_ERROR(t.fc1.forward(context, h, p + t.fc1W, p + t.fc1B, s.at(t.fc), s.saved + t.fc1Copies, dnnl));
  geluHalf(t, s.at(t.fc), s.at(t.gelu));
  REMAT_RETURN_IF_ERROR(
      t.fc2.forward(context, s.at(t.gelu), p + t.fc2W, p + t.fc2B, branch, s.saved + t.fc2Copy, dnnl));
  halfBranchDropout(t, s, 2, branch);
  addPromoted(T * d, h, branch, s2);
  return t.ln2.forward(context, s2, p + t.ln2P, b.y, s.at<float>(t.st2), dnnl);
}

Status postNormBackward(const DnnlContext& context, const HalfBlockPrep& t, const HalfTensors& s,
                        const BackwardBuffers& b) {
  std::byte* dnnl = s.scratch + t.bDnnl;
  const float* p = b.params;
  NodeGradients<float> g(t, b.paramGrads, b.freshParamGrads);
  const Index T = t.tokens, d = t.width;
  float *rows = s.work<float>(t.bRows), *residual = s.work<float>(t.bDh1);
  REMAT_RETURN_IF_ERROR(
      t.ln2.backward(context, s.at<float>(t.s2), b.dy, p + t.ln2P, s.at<float>(t.st2), residual, g.at(t.ln2P), dnnl));
  REMAT_RETURN_IF_ERROR(mlpBackward(context, t, s, g, residual, rows));
  add(T * d, rows, residual, rows);  // d(h): the MLP's and the residual's
  REMAT_RETURN_IF_ERROR(
      t.ln1.backward(context, s.at<float>(t.h1), rows, p + t.ln1P, s.at<float>(t.st1), residual, g.at(t.ln1P), dnnl));
  REMAT_RETURN_IF_ERROR(attentionBackward(context, t, s, p, g, residual, b.dx));
  if (b.dx != nullptr) add(T * d, b.dx, residual, b.dx);  // d(s1) reaches x(l-1) through the residual too
  return Status::ok();
}

}  // namespace

Status forwardHalfTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                   std::uint64_t dropoutKey, const ForwardBuffers& b) {
  const HalfBlockPrep& t = *prepared.halfBlock;
  auto tensors = halfForwardTensors(prepared, mode, b, t.discardShift, DropoutDraw(dropoutKey, t.dropoutP));
  if (!tensors) return tensors.status();
  const HalfTensors& s = *tensors;
  if (t.postNorm) return postNormForward(context, t, s, b);
  std::byte* dnnl = s.scratch + t.fDnnl;
  const float* p = b.params;
  const Index T = t.tokens, d = t.width;
  float* norm = s.work<float>(t.fNorm);
  REMAT_RETURN_IF_ERROR(t.ln1.forward(context, b.x, p + t.ln1P, norm, s.at<float>(t.st1), dnnl));
  REMAT_RETURN_IF_ERROR(attentionForward(context, t, s, norm, p));
  auto* branch = s.work(t.fBranch);
  REMAT_RETURN_IF_ERROR(
      t.proj.forward(context, s.at(t.merged), p + t.projW, p + t.projB, branch, s.saved + t.projCopy, dnnl));
  halfBranchDropout(t, s, 1, branch);
  addPromoted(T * d, b.x, branch, s.at<float>(t.h1));
  REMAT_RETURN_IF_ERROR(t.ln2.forward(context, s.at<float>(t.h1), p + t.ln2P, norm, s.at<float>(t.st2), dnnl));
  REMAT_RETURN_IF_ERROR(t.fc1.forward(context, norm, p + t.fc1W, p + t.fc1B, s.at(t.fc), s.saved + t.fc1Copies, dnnl));
  geluHalf(t, s.at(t.fc), s.at(t.gelu));
  REMAT_RETURN_IF_ERROR(
      t.fc2.forward(context, s.at(t.gelu), p + t.fc2W, p + t.fc2B, branch, s.saved + t.fc2Copy, dnnl));
  halfBranchDropout(t, s, 2, branch);
  addPromoted(T * d, s.at<float>(t.h1), branch, b.y);
  return Status::ok();
}

Status backwardHalfTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, std::uint64_t dropoutKey,
                                    const BackwardBuffers& b) {
  const HalfBlockPrep& t = *prepared.halfBlock;
  auto tensors = halfBackwardTensors(prepared, b, !t.postNorm, DropoutDraw(dropoutKey, t.dropoutP));
  if (!tensors) return tensors.status();
  const HalfTensors& s = *tensors;
  if (t.postNorm) return postNormBackward(context, t, s, b);
  const float* p = b.params;
  NodeGradients<float> g(t, b.paramGrads, b.freshParamGrads);
  const Index T = t.tokens, d = t.width;
  float *rows = s.work<float>(t.bRows), *dh1 = s.work<float>(t.bDh1);
  REMAT_RETURN_IF_ERROR(mlpBackward(context, t, s, g, b.dy, rows));
  REMAT_RETURN_IF_ERROR(t.ln2.backward(context, s.at<float>(t.h1), rows, p + t.ln2P, s.at<float>(t.st2), dh1,
                                       g.at(t.ln2P), s.scratch + t.bDnnl));
  add(T * d, dh1, b.dy, dh1);  // the residual: d(h1) = dy + ln_2's
  REMAT_RETURN_IF_ERROR(attentionBackward(context, t, s, p, g, dh1, rows));
  if (b.dx != nullptr) copyOrAdd(T * d, dh1, b.dx, false);  // ln_1's gradient is added to the residual's
  return t.ln1.backward(context, b.x, rows, p + t.ln1P, s.at<float>(t.st1), b.dx, g.at(t.ln1P), s.scratch + t.bDnnl);
}

}  // namespace remat::cpu
