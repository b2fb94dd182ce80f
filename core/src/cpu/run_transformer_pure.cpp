// transformer_block under pure bf16 on the CPU (the model cast with .to(torch.bfloat16);
// docs/memory-model.md 11.7 and 12.11, docs/executor.md): every tensor of the block is bfloat16,
// the residual stream included, and so are its parameters and their gradients. The four linears
// are pure HalfLinearOps (bfloat16 weights read in place, weight gradients added into the bfloat16
// buffer); attention and GELU are the bf16-mixed kernels (attention_half.hpp); the residual adds
// round each sum to bfloat16. The layer norms read and write bfloat16 and keep float32 mean and
// rstd (CUDA's acc type, what the model counts; PyTorch 1.13's CPU kernel keeps them in bfloat16):
// oneDNN's float32 layer normalization runs on a float32 widening of its bfloat16 input and
// parameters in the workspace, its output and gradients rounded to bfloat16 once.
// E holds exactly what the model counts (transformer.cpp with s = 2), in this order: ln_1's and
// ln_2's statistics, slots A to D ([N, S, d] bfloat16 each: pre-norm h1, ln_1's output, the merged
// heads, ln_2's output; post-norm (BERT) s1, s2, the merged heads, ln_1's output h), fc1's output,
// GELU's output, with p > 0 the residual branches' masks, then math: the q, k, v copies, the
// probabilities (with p > 0 the dropped probabilities and their mask) / fused: qkv's output, the
// attention's output and its float32 log-sum-exp. Dropout sites as float32's: 1, 2 the
// residuals, 3 the attention.
#include <algorithm>
#include <cstring>

#include "attention_half.hpp"
#include "block_prep.hpp"
#include "device_impl.hpp"
#include "half_block_dropout.hpp"
#include "wide_norm.hpp"

namespace remat::cpu {

// The parameters' offsets (BlockParams) in bfloat16 elements (float32's order).
struct PureBlockPrep : BlockGeometry, BlockParams {
  bool firstLayer = false;
  HalfLinearOp qkv, proj, fc1, fc2;
  LayerNormOp ln1, ln2;
  // E (bytes)
  std::uint64_t st1 = 0, st2 = 0, slotA = 0, slotB = 0, merged = 0, slotD = 0, fc = 0, gelu = 0;
  std::uint64_t mask1 = 0, mask2 = 0, q = 0, k = 0, v = 0, probs = 0, dropped = 0, attnMask = 0;
  std::uint64_t qkvOut = 0, attnOut = 0, lse = 0, savedBytes = 0, discardShift = 0;
  // forward scratch: a norm's float32 input, output and parameters, qkv's output (math), PV's
  // heads, a branch's output, the threads' and the primitives' scratch
  std::uint64_t fWideIn = 0, fWideOut = 0, fParams = 0, fQkv = 0, fHeads = 0, fBranch = 0;
  std::uint64_t fThread = 0, fDnnl = 0;
  // backward scratch: bfloat16 rows (a branch's d(output), the residual's d, a norm's d(output)),
  // the wide d (GELU's, qkv's), d(heads), a norm's float32 x, dy, dx and
  // parameters and their gradient, the threads' and the primitives' scratch
  std::uint64_t bBranch = 0, bResidual = 0, bRows = 0, bWide = 0, bHeads = 0;
  std::uint64_t bX = 0, bDy = 0, bDx = 0, bParams = 0, bDParams = 0, bThread = 0, bDnnl = 0;
};

namespace {

std::uint64_t layOutPureSaved(PureBlockPrep& t) {
  const Index T = t.tokens, d = t.width, H = t.hidden, A = t.g.batch * t.g.heads * t.g.seq * t.g.seq;
  std::uint64_t end = 0;  // packed, as the model sums E
  auto add = [&end](std::uint64_t bytes) {
    end += bytes;
    return end - bytes;
  };
  t.st1 = add(floats(2 * T));
  t.st2 = add(floats(2 * T));
  t.slotA = add(halves(T * d));
  t.slotB = add(halves(T * d));
  t.merged = add(halves(T * d));
  t.slotD = add(halves(T * d));
  t.fc = add(halves(T * H));
  t.gelu = add(halves(T * H));
  if (t.dropoutP > 0.0) {
    t.mask1 = add(static_cast<std::uint64_t>(T * d));
    t.mask2 = add(static_cast<std::uint64_t>(T * d));
  }
  if (t.fused) {
    t.qkvOut = add(halves(3 * T * d));
    t.attnOut = add(halves(T * d));
    t.lse = add(floats(t.g.batch * t.g.heads * t.g.seq));
    return end;
  }
  t.q = add(halves(T * d));
  t.k = add(halves(T * d));
  t.v = add(halves(T * d));
  t.probs = add(halves(A));
  if (t.dropoutP > 0.0) {
    t.dropped = add(halves(A));
    t.attnMask = add(static_cast<std::uint64_t>(A));
  }
  return end;
}

void layOutPureScratch(PureBlockPrep& t, PreparedLayer& prepared) {
  const Index T = t.tokens, d = t.width, H = t.hidden;
  const std::uint64_t threadBytes = floats(halfAttentionThreadFloats(t.g)) * static_cast<std::uint64_t>(t.g.threads);
  ScratchLayout f;
  t.fWideIn = f.add(floats(T * d));
  t.fWideOut = f.add(floats(T * d));
  t.fParams = f.add(floats(2 * d));
  if (!t.fused) t.fQkv = f.add(aligned(halves(3 * T * d)));
  t.fHeads = f.add(aligned(halves(T * d)));
  t.fBranch = f.add(aligned(halves(T * d)));
  t.fThread = f.add(threadBytes);
  t.fDnnl = f.add(maxLinearNormScratch(t, true));
  t.discardShift = aligned(t.savedBytes);
  prepared.requiredFwdWorkspace = t.discardShift + f.bytes();
  ScratchLayout b;
  t.bBranch = b.add(aligned(halves(T * d)));
  t.bResidual = b.add(aligned(halves(T * d)));
  t.bRows = b.add(aligned(halves(T * d)));
  t.bWide = b.add(aligned(halves(std::max(T * H, 3 * T * d))));
  t.bHeads = b.add(aligned(halves(T * d)));
  t.bX = b.add(floats(T * d));
  t.bDy = b.add(floats(T * d));
  t.bDx = b.add(floats(T * d));
  t.bParams = b.add(floats(2 * d));
  t.bDParams = b.add(floats(2 * d));
  t.bThread = b.add(threadBytes);
  t.bDnnl = b.add(maxLinearNormScratch(t, false));
  prepared.requiredBwdWorkspace = b.bytes();
}

Status createPureOps(const DnnlContext& context, PureBlockPrep& t, float epsilon, const std::string& label) {
  const Index T = t.tokens, d = t.width, H = t.hidden;
  auto linear = [&](HalfLinearOp& op, Index in, Index out, const char* name, InputGrad grad) -> Status {
    return assign(HalfLinearOp::create(context, T, in, out, true, false, grad, label + ", " + name, true), op);
  };
  auto norm = [&](LayerNormOp& op, const char* name) {  // d(input) into the float32 scratch
    return createNorm(context, T, d, epsilon, InputGrad::Write, label, name, op);
  };
  // Post-norm (BERT): the qkv linear reads x(l-1) and writes its gradient (none for layer 1).
  const InputGrad qkvGrad = t.postNorm && t.firstLayer ? InputGrad::None : InputGrad::Write;
  REMAT_RETURN_IF_ERROR(norm(t.ln1, "ln_1"));
  REMAT_RETURN_IF_ERROR(linear(t.qkv, d, 3 * d, "qkv", qkvGrad));
  REMAT_RETURN_IF_ERROR(linear(t.proj, d, d, "out projection", InputGrad::Write));
  REMAT_RETURN_IF_ERROR(norm(t.ln2, "ln_2"));
  REMAT_RETURN_IF_ERROR(linear(t.fc1, d, H, "fc1", InputGrad::Write));
  return linear(t.fc2, H, d, "fc2", InputGrad::Write);
}

}  // namespace

Status preparePureTransformerBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                   const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto t = std::make_shared<PureBlockPrep>();
  setBlockGeometry(*t, layer.inputShape, spec);
  t->firstLayer = firstLayer;
  REMAT_RETURN_IF_ERROR(setBlockParams(*t, t->width, t->hidden, layer.paramCount, check));
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, true));
  REMAT_RETURN_IF_ERROR(createPureOps(context, *t, static_cast<float>(spec.epsilon), prepared.label));
  REMAT_RETURN_IF_ERROR(layOutCheckedE(*t, layer, check, prepared, layOutPureSaved, layOutPureScratch));
  prepared.pureBlock = std::move(t);
  return Status::ok();
}

namespace {

struct PureTensors : HalfBlockTensors {
  const BFloat16* params;
  NodeGradients<BFloat16>* grads;  // null in the forward
  // The float pointers HalfLinearOp takes carry bfloat16 under pure bf16.
  const float* param(Index offset) const { return reinterpret_cast<const float*>(params + offset); }
  float* grad(Index offset) const { return reinterpret_cast<float*>(grads->at(offset)); }
};

// A layer norm on bfloat16 x: its input and parameters widened, oneDNN's float32 forward, the
// output rounded to bfloat16; the float32 statistics into E (or the primitive's scratch).
Status normForward(const DnnlContext& context, const PureBlockPrep& t, const LayerNormOp& op, const PureTensors& s,
                   Index params, const BFloat16* x, BFloat16* y, float* stats) {
  const Index count = t.tokens * t.width;
  auto *wideIn = s.work<float>(t.fWideIn), *wideOut = s.work<float>(t.fWideOut), *p = s.work<float>(t.fParams);
  castToFloat(count, x, wideIn);
  castToFloat(2 * t.width, s.params + params, p);
  REMAT_RETURN_IF_ERROR(op.forward(context, wideIn, p, wideOut, stats, s.scratch + t.fDnnl));
  castToHalf(count, wideOut, y);
  return Status::ok();
}

// Its backward: d(x) = residual + round(the norm's d(x)) into dx (bfloat16; residual may alias
// dx, or be null: d(x) is the norm's alone); the parameters' gradients rounded into theirs.
Status normBackward(const DnnlContext& context, const PureBlockPrep& t, const LayerNormOp& op, const PureTensors& s,
                    Index params, const BFloat16* x, const BFloat16* dy, const float* stats, const BFloat16* residual,
                    BFloat16* dx) {
  const Index count = t.tokens * t.width;
  const WideNormWork work{s.work<float>(t.bX),      s.work<float>(t.bDy),      s.work<float>(t.bDx),
                          s.work<float>(t.bParams), s.work<float>(t.bDParams), s.scratch + t.bDnnl};
  REMAT_RETURN_IF_ERROR(
      wideNormBackward(context, op, count, t.width, x, dy, s.params + params, stats, s.grads->at(params), work));
  const float* wideDx = work.dx;
  if (dx == nullptr) return Status::ok();
  if (residual == nullptr) {
    castToHalf(count, wideDx, dx);
    return Status::ok();
  }
  if (residual != dx) std::memcpy(dx, residual, static_cast<std::size_t>(halves(count)));
  addFloatIntoHalf(count, wideDx, dx);
  return Status::ok();
}

// qkv(input) -> attention -> the merged heads (E) -> the out projection into `branch`, dropped.
Status pureAttentionForward(const DnnlContext& context, const PureBlockPrep& t, const PureTensors& s,
                            const BFloat16* input, BFloat16* branch) {
  const Index d = t.width;
  std::byte* dnnl = s.scratch + t.fDnnl;
  auto* qkv = t.fused ? s.at(t.qkvOut) : s.work(t.fQkv);
  REMAT_RETURN_IF_ERROR(t.qkv.forward(context, input, s.param(t.qkvW), s.param(t.qkvB), qkv, s.saved, dnnl));
  if (t.fused) {
    fusedAttentionForwardHalf(t.g, qkv, s.at(t.attnOut), s.at<float>(t.lse), s.work<float>(t.fThread), s.drop.site(3));
    headsToRowsHalf(t.g, s.at(t.attnOut), s.at(t.merged), d, 0);
  } else {
    rowsToHeadsHalf(t.g, qkv, 3 * d, 0, s.at(t.q));
    rowsToHeadsHalf(t.g, qkv, 3 * d, d, s.at(t.k));
    rowsToHeadsHalf(t.g, qkv, 3 * d, 2 * d, s.at(t.v));
    auto* heads = s.work(t.fHeads);
    mathAttentionForwardHalf(t.g, s.at(t.q), s.at(t.k), s.at(t.v), s.at(t.probs), heads, s.work<float>(t.fThread),
                             halfMathDropout(t, s));
    headsToRowsHalf(t.g, heads, s.at(t.merged), d, 0);
  }
  REMAT_RETURN_IF_ERROR(
      t.proj.forward(context, s.at(t.merged), s.param(t.projW), s.param(t.projB), branch, s.saved, dnnl));
  halfBranchDropout(t, s, 1, branch);
  return Status::ok();
}

// fc1(input) -> GELU (computed in float32 from bfloat16, rounded) -> fc2 into `branch`, dropped.
Status pureMlpForward(const DnnlContext& context, const PureBlockPrep& t, const PureTensors& s, const BFloat16* input,
                      BFloat16* branch) {
  std::byte* dnnl = s.scratch + t.fDnnl;
  const Index count = t.tokens * t.hidden;
  REMAT_RETURN_IF_ERROR(t.fc1.forward(context, input, s.param(t.fc1W), s.param(t.fc1B), s.at(t.fc), s.saved, dnnl));
  geluForwardHalf(count, t.tanhGelu, s.at(t.fc), s.at(t.gelu));
  REMAT_RETURN_IF_ERROR(t.fc2.forward(context, s.at(t.gelu), s.param(t.fc2W), s.param(t.fc2B), branch, s.saved, dnnl));
  halfBranchDropout(t, s, 2, branch);
  return Status::ok();
}

// The MLP's backward from its output's gradient dOut into d(its input) (bfloat16 rows).
Status pureMlpBackward(const DnnlContext& context, const PureBlockPrep& t, const PureTensors& s, const BFloat16* input,
                       const BFloat16* dOut, BFloat16* dInput) {
  std::byte* dnnl = s.scratch + t.bDnnl;
  const Index count = t.tokens * t.hidden;
  auto *branch = s.work(t.bBranch), *wide = s.work(t.bWide);
  std::memcpy(branch, dOut, static_cast<std::size_t>(halves(t.tokens * t.width)));
  halfBranchDropoutBackward(t, s, 2, branch);
  REMAT_RETURN_IF_ERROR(t.fc2.backward(context, s.at(t.gelu), branch, s.saved, wide, s.grad(t.fc2W), s.grad(t.fc2B),
                                       dnnl, s.params + t.fc2W));
  geluBackwardHalf(count, t.tanhGelu, s.at(t.fc), wide);
  return t.fc1.backward(context, input, wide, s.saved, dInput, s.grad(t.fc1W), s.grad(t.fc1B), dnnl, s.params + t.fc1W);
}

// The attention sublayer's backward from its output's gradient dOut into d(qkv's input).
Status pureAttentionBackward(const DnnlContext& context, const PureBlockPrep& t, const PureTensors& s,
                             const BFloat16* input, const BFloat16* dOut, BFloat16* dInput) {
  std::byte* dnnl = s.scratch + t.bDnnl;
  const Index d = t.width;
  auto *branch = s.work(t.bBranch), *wide = s.work(t.bWide), *heads = s.work(t.bHeads);
  std::memcpy(branch, dOut, static_cast<std::size_t>(halves(t.tokens * d)));
  halfBranchDropoutBackward(t, s, 1, branch);
  REMAT_RETURN_IF_ERROR(t.proj.backward(context, s.at(t.merged), branch, s.saved, heads, s.grad(t.projW),
                                        s.grad(t.projB), dnnl, s.params + t.projW));
  rowsToHeadsHalf(t.g, heads, d, 0, branch);
  if (t.fused)
    fusedAttentionBackwardHalf(t.g, s.at(t.qkvOut), s.at(t.attnOut), s.at<float>(t.lse), branch, wide,
                               s.work<float>(t.bThread), s.drop.site(3));
  else
    mathAttentionBackwardHalf(t.g, s.at(t.q), s.at(t.k), s.at(t.v), s.at(t.probs), branch, wide,
                              s.work<float>(t.bThread), halfMathDropout(t, s));
  return t.qkv.backward(context, input, wide, s.saved, dInput, s.grad(t.qkvW), s.grad(t.qkvB), dnnl, s.params + t.qkvW);
}

// Pre-norm: h1 = x + attn(ln_1(x)), y = h1 + mlp(ln_2(h1)); slots A = h1, B = ln_1's output,
// D = ln_2's output.
Status preNormForward(const DnnlContext& context, const PureBlockPrep& t, const PureTensors& s, const BFloat16* x,
                      BFloat16* y) {
  const Index count = t.tokens * t.width;
  auto* branch = s.work(t.fBranch);
  REMAT_RETURN_IF_ERROR(normForward(context, t, t.ln1, s, t.ln1P, x, s.at(t.slotB), s.at<float>(t.st1)));
  REMAT_RETURN_IF_ERROR(pureAttentionForward(context, t, s, s.at(t.slotB), branch));
  add(count, x, branch, s.at(t.slotA));
  REMAT_RETURN_IF_ERROR(normForward(context, t, t.ln2, s, t.ln2P, s.at(t.slotA), s.at(t.slotD), s.at<float>(t.st2)));
  REMAT_RETURN_IF_ERROR(pureMlpForward(context, t, s, s.at(t.slotD), branch));
  add(count, s.at(t.slotA), branch, y);
  return Status::ok();
}

Status preNormBackward(const DnnlContext& context, const PureBlockPrep& t, const PureTensors& s, const BFloat16* x,
                       const BFloat16* dy, BFloat16* dx) {
  auto *rows = s.work(t.bRows), *residual = s.work(t.bResidual);
  REMAT_RETURN_IF_ERROR(pureMlpBackward(context, t, s, s.at(t.slotD), dy, rows));
  // d(h1) = dy (the residual) + ln_2's, rounded once
  REMAT_RETURN_IF_ERROR(
      normBackward(context, t, t.ln2, s, t.ln2P, s.at(t.slotA), rows, s.at<float>(t.st2), dy, residual));
  REMAT_RETURN_IF_ERROR(pureAttentionBackward(context, t, s, s.at(t.slotB), residual, rows));
  return normBackward(context, t, t.ln1, s, t.ln1P, x, rows, s.at<float>(t.st1), residual, dx);
}

// Post-norm (BERT): s1 = x + attn(x), h = ln_1(s1), s2 = h + mlp(h), y = ln_2(s2); slots A = s1,
// B = s2, D = h; qkv reads x(l-1).
Status postNormForward(const DnnlContext& context, const PureBlockPrep& t, const PureTensors& s, const BFloat16* x,
                       BFloat16* y) {
  const Index count = t.tokens * t.width;
  auto* branch = s.work(t.fBranch);
  REMAT_RETURN_IF_ERROR(pureAttentionForward(context, t, s, x, branch));
  add(count, x, branch, s.at(t.slotA));
  REMAT_RETURN_IF_ERROR(normForward(context, t, t.ln1, s, t.ln1P, s.at(t.slotA), s.at(t.slotD), s.at<float>(t.st1)));
  REMAT_RETURN_IF_ERROR(pureMlpForward(context, t, s, s.at(t.slotD), branch));
  add(count, s.at(t.slotD), branch, s.at(t.slotB));
  return normForward(context, t, t.ln2, s, t.ln2P, s.at(t.slotB), y, s.at<float>(t.st2));
}

Status postNormBackward(const DnnlContext& context, const PureBlockPrep& t, const PureTensors& s, const BFloat16* x,
                        const BFloat16* dy, BFloat16* dx) {
  const Index count = t.tokens * t.width;
  auto *rows = s.work(t.bRows), *residual = s.work(t.bResidual);
  REMAT_RETURN_IF_ERROR(
      normBackward(context, t, t.ln2, s, t.ln2P, s.at(t.slotB), dy, s.at<float>(t.st2), nullptr, residual));
  REMAT_RETURN_IF_ERROR(pureMlpBackward(context, t, s, s.at(t.slotD), residual, rows));
  add(count, rows, residual, rows);  // d(h): the MLP's and the residual's
  REMAT_RETURN_IF_ERROR(
      normBackward(context, t, t.ln1, s, t.ln1P, s.at(t.slotA), rows, s.at<float>(t.st1), nullptr, residual));
  REMAT_RETURN_IF_ERROR(pureAttentionBackward(context, t, s, x, residual, dx));
  if (dx != nullptr) add(count, dx, residual, dx);  // d(s1) reaches x(l-1) through the residual too
  return Status::ok();
}

const BFloat16* halfOf(const float* p) { return reinterpret_cast<const BFloat16*>(p); }
BFloat16* halfOf(float* p) { return reinterpret_cast<BFloat16*>(p); }

}  // namespace

Status forwardPureTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                   std::uint64_t dropoutKey, const ForwardBuffers& b) {
  const PureBlockPrep& t = *prepared.pureBlock;
  auto tensors = halfForwardTensors(prepared, mode, b, t.discardShift, DropoutDraw(dropoutKey, t.dropoutP));
  if (!tensors) return tensors.status();
  const PureTensors s{*tensors, halfOf(b.params), nullptr};
  if (t.postNorm) return postNormForward(context, t, s, halfOf(b.x), halfOf(b.y));
  return preNormForward(context, t, s, halfOf(b.x), halfOf(b.y));
}

Status backwardPureTransformerBlock(const DnnlContext& context, const PreparedLayer& prepared, std::uint64_t dropoutKey,
                                    const BackwardBuffers& b) {
  const PureBlockPrep& t = *prepared.pureBlock;
  auto tensors = halfBackwardTensors(prepared, b, true, DropoutDraw(dropoutKey, t.dropoutP));
  if (!tensors) return tensors.status();
  NodeGradients<BFloat16> grads(t, halfOf(b.paramGrads), b.freshParamGrads);
  const PureTensors s{*tensors, halfOf(b.params), &grads};
  if (t.postNorm) return postNormBackward(context, t, s, halfOf(b.x), halfOf(b.dy), halfOf(b.dx));
  return preNormBackward(context, t, s, halfOf(b.x), halfOf(b.dy), halfOf(b.dx));
}

}  // namespace remat::cpu
