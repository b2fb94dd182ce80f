// swin_block under bf16-mixed on the CPU (docs/memory-model.md 12.10, "Swin under autocast";
// docs/executor.md): torchvision's SwinTransformerBlock as PyTorch 2's CPU autocast runs it on the
// bfloat16 stream. The norms take a bfloat16 input with float32 weights (computed here in float32
// from its widened copy in the scratch, the output rounded), the four linears are HalfLinearOps on
// bfloat16 inputs (no input cast; each saves its weight's copy), q * scale and q k^T are bfloat16,
// the float32 bias gather promotes the scores, softmax runs and saves in float32, P @ v reads P's
// bfloat16 cast (saved too), GELU and the residual adds are bfloat16 (window_half.hpp).
// E holds exactly what the model counts, in this order: both norms' float32 statistics, the windowed
// input, [qkv's weight copy], q * scale, the k and v copies (one window in the batch: qkv's output
// instead), the merged heads, [proj's weight copy], softmax's float32 result, its bfloat16 cast,
// h1, norm2's output, [fc1's weight copy], fc1's output, GELU's output, [fc2's weight copy], and
// with stochastic depth its two bfloat16 noises [N]. A discard-mode forward lays E out at the start
// of its workspace. Parameters as float32's (run_swin.cpp).
// Pure bf16 (the model cast to bfloat16, memory-model.md 11.7): the same kernels on bfloat16
// parameters and gradients (the HalfLinearOps' `pure`, no weight copies); the scores stay bfloat16
// (the table is bfloat16: each add rounds), softmax saves its bfloat16 result only (no float32
// one, no cast); the norms' and the table's bfloat16 parameters are widened into the scratch and
// their float32 gradients added into the bfloat16 buffer with one rounding.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "attention_half.hpp"
#include "block_prep.hpp"
#include "device_impl.hpp"
#include "window_half.hpp"

namespace remat::cpu {

struct HalfSwinBlockPrep : SwinGeometry, BlockParams {
  bool pure = false;  // pure bf16: bfloat16 parameters and gradients
  HalfLinearOp qkv, proj, fc1, fc2;
  LayerNormOp ln1, ln2;
  // E (bytes)
  std::uint64_t st1 = 0, st2 = 0, windowed = 0, qkvCopy = 0, q = 0, k = 0, v = 0, qkvOut = 0, merged = 0;
  std::uint64_t projCopy = 0, probs32 = 0, probs16 = 0, h1 = 0, ln2Out = 0, fc1Copy = 0, fc = 0, gelu = 0;
  std::uint64_t fc2Copy = 0, noise = 0, savedBytes = 0, discardShift = 0;
  // forward scratch
  std::uint64_t fWide = 0, fNorm = 0, fNormHalf = 0, fQkv = 0, fKv = 0, fAttn = 0, fProj = 0, fBranch = 0;
  std::uint64_t fBias = 0, fMask = 0, fGelu = 0, fThread = 0, fDnnl = 0;
  // backward scratch
  std::uint64_t bX = 0, bDy = 0, bDx = 0, bH1 = 0, bRowsA = 0, bRowsB = 0, bWide = 0, bGelu = 0, bHeads = 0;
  std::uint64_t bScores = 0, bKv = 0, bThread = 0, bDnnl = 0;
  std::uint64_t fParams = 0, bParams = 0, bGrads = 0;  // pure: the widened norms' and table's parameters
  Index tableCount = 0;
};

namespace {

struct Packed {  // E packed, as the model sums it (ScratchLayout would align each region)
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    end += bytes;
    return end - bytes;
  }
};

Index attentionElements(const HalfSwinBlockPrep& t) { return t.g.batch * t.g.heads * t.g.seq * t.g.seq; }

std::uint64_t layOutSaved(HalfSwinBlockPrep& t) {
  const Index T = t.w.tokens(), Tp = t.w.paddedTokens(), C = t.w.channels, H = t.hidden, A = attentionElements(t);
  Packed e;
  t.st1 = e.add(floats(2 * T));
  t.st2 = e.add(floats(2 * T));
  t.windowed = e.add(halves(Tp * C));
  t.qkvCopy = e.add(t.qkv.copies().weightCopyBytes());
  t.q = e.add(halves(Tp * C));
  if (t.single) {
    t.qkvOut = e.add(halves(3 * Tp * C));
  } else {
    t.k = e.add(halves(Tp * C));
    t.v = e.add(halves(Tp * C));
  }
  t.merged = e.add(halves(Tp * C));
  t.projCopy = e.add(t.proj.copies().weightCopyBytes());
  if (!t.pure) t.probs32 = e.add(floats(A));  // pure: softmax's bfloat16 result only
  t.probs16 = e.add(halves(A));
  t.h1 = e.add(halves(T * C));
  t.ln2Out = e.add(halves(T * C));
  t.fc1Copy = e.add(t.fc1.copies().weightCopyBytes());
  t.fc = e.add(halves(T * H));
  t.gelu = e.add(halves(T * H));
  t.fc2Copy = e.add(t.fc2.copies().weightCopyBytes());
  if (t.stochasticDepth > 0.0) t.noise = e.add(halves(2 * t.w.batch));
  return e.end;
}

void layOutScratch(HalfSwinBlockPrep& t, PreparedLayer& prepared) {
  const Index T = t.w.tokens(), Tp = t.w.paddedTokens(), C = t.w.channels, L = t.w.area(), H = t.hidden;
  const Index rows = std::max(T, Tp);
  ScratchLayout f;
  t.fWide = f.add(floats(T * C));  // a norm's widened input
  t.fNorm = f.add(floats(T * C));  // a norm's float32 output
  t.fNormHalf = f.add(halves(T * C));
  if (!t.single) t.fQkv = f.add(halves(3 * Tp * C));  // single: qkv is written into E
  if (t.single) t.fKv = f.add(halves(2 * Tp * C));
  t.fAttn = f.add(halves(Tp * C));  // P @ v, heads order
  t.fProj = f.add(halves(Tp * C));
  t.fBranch = f.add(halves(T * C));
  t.fBias = f.add(floats(t.g.heads * L * L));
  if (t.w.shifted()) t.fMask = f.add(floats(t.w.windows() * L * L));
  t.fGelu = f.add(floats(T * H));
  const Index widened = t.pure ? 4 * C + t.tableCount : 0;  // norm1's, norm2's, the table
  t.fParams = f.add(floats(widened));
  t.fThread = f.add(floats(swinAttentionThreadFloats(t.g)) * static_cast<std::uint64_t>(t.g.threads));
  t.fDnnl = f.add(maxLinearNormScratch(t, true));
  t.discardShift = aligned(t.savedBytes);
  prepared.requiredFwdWorkspace = t.discardShift + f.bytes();
  ScratchLayout b;
  t.bX = b.add(floats(T * C));
  t.bDy = b.add(floats(T * C));
  t.bDx = b.add(floats(T * C));
  t.bH1 = b.add(halves(T * C));
  t.bRowsA = b.add(halves(rows * C));
  t.bRowsB = b.add(halves(rows * C));
  t.bWide = b.add(halves(std::max(T * H, 3 * Tp * C)));  // d(GELU's output), later d(qkv)
  t.bGelu = b.add(floats(2 * T * H));
  t.bHeads = b.add(halves(Tp * C));
  t.bScores = b.add(floats(attentionElements(t)));
  if (t.single) t.bKv = b.add(halves(2 * Tp * C));
  t.bThread = b.add(floats(swinAttentionThreadFloats(t.g)) * static_cast<std::uint64_t>(t.g.threads));
  t.bParams = b.add(floats(widened));
  t.bGrads = b.add(floats(widened));
  t.bDnnl = b.add(maxLinearNormScratch(t, false));
  prepared.requiredBwdWorkspace = b.bytes();
}

Status createOps(const DnnlContext& context, HalfSwinBlockPrep& t, float epsilon, const std::string& label) {
  const Index T = t.w.tokens(), Tp = t.w.paddedTokens(), C = t.w.channels, H = t.hidden;
  auto linear = [&](HalfLinearOp& op, Index rows, Index in, Index out, const char* name) -> Status {
    return assign(
        HalfLinearOp::create(context, rows, in, out, true, false, InputGrad::Write, label + ", " + name, t.pure), op);
  };
  auto norm = [&](LayerNormOp& op, const char* name) {
    return createNorm(context, T, C, epsilon, InputGrad::Write, label, name, op);
  };
  REMAT_RETURN_IF_ERROR(norm(t.ln1, "norm1"));
  REMAT_RETURN_IF_ERROR(linear(t.qkv, Tp, C, 3 * C, "qkv"));
  REMAT_RETURN_IF_ERROR(linear(t.proj, Tp, C, C, "proj"));
  REMAT_RETURN_IF_ERROR(norm(t.ln2, "norm2"));
  REMAT_RETURN_IF_ERROR(linear(t.fc1, T, C, H, "fc1"));
  return linear(t.fc2, T, H, C, "fc2");
}

}  // namespace

Status prepareHalfSwinBlock(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                            const LayerChecks& check, bool pure, PreparedLayer& prepared) {
  const Shape& in = layer.inputShape;
  if (in[3] % 2 != 0)  // the window gathers move a bfloat16 row as C / 2 float32 words
    return check.fail("the CPU's bfloat16 Swin kernels need an even channel count C, got " + std::to_string(in[3]) +
                      "; run it as fp32");
  auto t = std::make_shared<HalfSwinBlockPrep>();
  setSwinGeometry(*t, in, spec);
  t->pure = pure;
  t->tableCount = (2 * spec.window - 1) * (2 * spec.window - 1) * spec.heads;
  REMAT_RETURN_IF_ERROR(setSwinParams(*t, *t, spec.heads, layer.paramCount, check));
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, true));
  REMAT_RETURN_IF_ERROR(createOps(context, *t, static_cast<float>(spec.epsilon), prepared.label));
  REMAT_RETURN_IF_ERROR(layOutCheckedE(*t, layer, check, prepared, layOutSaved, layOutScratch));
  prepared.halfSwinBlock = std::move(t);
  return Status::ok();
}

namespace {

// The block's tensors (drop stays inactive: stochastic depth draws its noise itself, drawNoise).
struct HalfTensors : HalfBlockTensors {
  const HalfSwinBlockPrep& t;
};

// The norms' and the table's parameters as float32 (pure: widened into `wide`).
struct SmallParams {
  const float *ln1, *ln2, *table;
};
SmallParams smallParams(const HalfSwinBlockPrep& t, const float* p, float* wide) {
  if (!t.pure) return {p + t.ln1P, p + t.ln2P, p + t.table};
  const Index C = t.w.channels;
  auto half = [&](Index offset) { return reinterpret_cast<const BFloat16*>(paramAt(p, offset, true)); };
  castToFloat(2 * C, half(t.ln1P), wide);
  castToFloat(2 * C, half(t.ln2P), wide + 2 * C);
  castToFloat(t.tableCount, half(t.table), wide + 4 * C);
  return {wide, wide + 2 * C, wide + 4 * C};
}

// Where their float32 gradients go: the masters (bf16-mixed), or `work`, zeroed, which
// addSmallGrads adds into pure bf16's bfloat16 buffer with one rounding.
struct SmallGrads {
  float *ln1, *ln2, *table;
};
SmallGrads smallGrads(const HalfSwinBlockPrep& t, float* g, float* work) {
  if (!t.pure) return {g + t.ln1P, g + t.ln2P, g + t.table};
  const Index C = t.w.channels;
  std::fill_n(work, 4 * C + t.tableCount, 0.0f);
  return {work, work + 2 * C, work + 4 * C};
}
void addSmallGrads(const HalfSwinBlockPrep& t, const SmallGrads& grads, float* g) {
  if (!t.pure) return;
  auto half = [&](Index offset) { return reinterpret_cast<BFloat16*>(paramAt(g, offset, true)); };
  addFloatIntoHalf(2 * t.w.channels, grads.ln1, half(t.ln1P));
  addFloatIntoHalf(2 * t.w.channels, grads.ln2, half(t.ln2P));
  addFloatIntoHalf(t.tableCount, grads.table, half(t.table));
}

// A norm on a bfloat16 input with float32 weights: widened into `wide`, normalised into the float32
// `out`, rounded into `y`.
Status normForward(const DnnlContext& context, const LayerNormOp& op, Index count, const BFloat16* x,
                   const float* params, float* stats, float* wide, float* out, BFloat16* y, std::byte* dnnl) {
  castToFloat(count, x, wide);
  REMAT_RETURN_IF_ERROR(op.forward(context, wide, params, out, stats, dnnl));
  castToHalf(count, out, y);
  return Status::ok();
}

// Its backward: x and dy widened into xWide, dyWide; d(x) float32 into dx (rounded by the caller).
Status normBackward(const DnnlContext& context, const LayerNormOp& op, Index count, const BFloat16* x,
                    const BFloat16* dy, const float* params, const float* stats, float* xWide, float* dyWide, float* dx,
                    float* grads, std::byte* dnnl) {
  castToFloat(count, x, xWide);
  castToFloat(count, dy, dyWide);
  return op.backward(context, xWide, dyWide, params, stats, dx, grads, dnnl);
}

// torchvision's StochasticDepth: per sample 0 or 1/(1-p) in bfloat16 (the noise takes the input's
// dtype), drawn from the layer's stream as in float32 (run_swin.cpp), sites 1 and 2.
void drawNoise(const HalfSwinBlockPrep& t, std::uint64_t dropoutKey, BFloat16* noise) {
  const DropoutDraw draw(dropoutKey, t.stochasticDepth);
  for (Index site = 0; site < 2; ++site)
    for (Index n = 0; n < t.w.batch; ++n)
      noise[site * t.w.batch + n] = BFloat16(
          draw.site(static_cast<std::uint64_t>(site + 1)).keep(static_cast<std::uint64_t>(n)) ? draw.scale : 0.0f);
}

// k and v in heads order: E's copies, or (one window in the batch) copies out of E's qkv into kv.
void keysAndValues(const HalfSwinBlockPrep& t, const BFloat16* qkv, BFloat16* kv, const BFloat16*& k,
                   const BFloat16*& v) {
  if (!t.single) return;
  const Index C = t.w.channels, vOffset = t.w.paddedTokens() * C;
  rowsToHeadsHalf(t.g, qkv, 3 * C, C, kv);
  rowsToHeadsHalf(t.g, qkv, 3 * C, 2 * C, kv + vOffset);
  k = kv;
  v = kv + vOffset;
}

float scaleOf(const HalfSwinBlockPrep& t) { return 1.0f / std::sqrt(static_cast<float>(t.g.headDim)); }

// From norm1's bfloat16 output (fNormHalf) to proj's bfloat16 output (fProj).
Status attentionForward(const DnnlContext& context, const HalfTensors& s, const float* p, const float* table) {
  const HalfSwinBlockPrep& t = s.t;
  const Index C = t.w.channels, Tp = t.w.paddedTokens();
  std::byte* dnnl = s.scratch + t.fDnnl;
  windowPartitionHalf(t.w, s.work(t.fNormHalf), s.at(t.windowed));
  BFloat16* qkv = t.single ? s.at(t.qkvOut) : s.work(t.fQkv);
  REMAT_RETURN_IF_ERROR(t.qkv.forward(context, s.at(t.windowed), paramAt(p, t.qkvW, t.pure), paramAt(p, t.qkvB, t.pure),
                                      qkv, s.saved + t.qkvCopy, dnnl));
  BFloat16* q = s.at(t.q);
  rowsToHeadsHalf(t.g, qkv, 3 * C, 0, q);
  const float scale = scaleOf(t);
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < Tp * C; ++i) q[i] = BFloat16(q[i].value() * scale);  // q * scale, a bfloat16 mul
  const BFloat16 *k = s.at(t.k), *v = s.at(t.v);
  if (t.single) {
    keysAndValues(t, qkv, s.work(t.fKv), k, v);
  } else {
    rowsToHeadsHalf(t.g, qkv, 3 * C, C, s.at(t.k));
    rowsToHeadsHalf(t.g, qkv, 3 * C, 2 * C, s.at(t.v));
  }
  relativeBiasGather(t.w.side, t.g.heads, table, s.work<float>(t.fBias));
  const float* mask = nullptr;
  if (t.w.shifted()) {
    shiftMask(t.w, s.work<float>(t.fMask));
    mask = s.work<float>(t.fMask);
  }
  const SwinHalfAttention a{t.g, q, k, v, s.work<float>(t.fBias), mask, t.w.windows(), t.pure};
  swinAttentionForwardHalf(a, t.pure ? nullptr : s.at<float>(t.probs32), s.at(t.probs16), s.work(t.fAttn),
                           s.work<float>(t.fThread));
  headsToRowsHalf(t.g, s.work(t.fAttn), s.at(t.merged), C, 0);
  return t.proj.forward(context, s.at(t.merged), paramAt(p, t.projW, t.pure), paramAt(p, t.projB, t.pure),
                        s.work(t.fProj), s.saved + t.projCopy, dnnl);
}

void geluHalf(Index count, const BFloat16* x, BFloat16* y, float* work) {
  castToFloat(count, x, work);
  geluForward(count, false, work, work);
  castToHalf(count, work, y);
}

// y = h1 + sd(fc2(gelu(fc1(norm2(h1))))), from h1 in E.
Status mlpForward(const DnnlContext& context, const HalfTensors& s, const float* p, const float* ln2, BFloat16* y) {
  const HalfSwinBlockPrep& t = s.t;
  std::byte* dnnl = s.scratch + t.fDnnl;
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C;
  BFloat16 *branch = s.work(t.fBranch), *h1 = s.at(t.h1);
  REMAT_RETURN_IF_ERROR(normForward(context, t.ln2, T * C, h1, ln2, s.at<float>(t.st2), s.work<float>(t.fWide),
                                    s.work<float>(t.fNorm), s.at(t.ln2Out), dnnl));
  REMAT_RETURN_IF_ERROR(t.fc1.forward(context, s.at(t.ln2Out), paramAt(p, t.fc1W, t.pure), paramAt(p, t.fc1B, t.pure),
                                      s.at(t.fc), s.saved + t.fc1Copy, dnnl));
  geluHalf(T * t.hidden, s.at(t.fc), s.at(t.gelu), s.work<float>(t.fGelu));
  REMAT_RETURN_IF_ERROR(t.fc2.forward(context, s.at(t.gelu), paramAt(p, t.fc2W, t.pure), paramAt(p, t.fc2B, t.pure),
                                      branch, s.saved + t.fc2Copy, dnnl));
  if (t.stochasticDepth > 0.0) scaleSamplesHalf(t.w.batch, perSample, s.at(t.noise) + t.w.batch, branch, branch);
  addHalf(T * C, h1, branch, y);
  return Status::ok();
}

}  // namespace

Status forwardHalfSwinBlock(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                            std::uint64_t dropoutKey, const ForwardBuffers& b) {
  const HalfSwinBlockPrep& t = *prepared.halfSwinBlock;
  auto tensors = halfForwardTensors(prepared, mode, b, t.discardShift);
  if (!tensors) return tensors.status();
  const HalfTensors s{*tensors, t};
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C;
  const auto* x = reinterpret_cast<const BFloat16*>(b.x);
  const SmallParams small = smallParams(t, b.params, s.work<float>(t.fParams));
  REMAT_RETURN_IF_ERROR(normForward(context, t.ln1, T * C, x, small.ln1, s.at<float>(t.st1), s.work<float>(t.fWide),
                                    s.work<float>(t.fNorm), s.work(t.fNormHalf), s.scratch + t.fDnnl));
  REMAT_RETURN_IF_ERROR(attentionForward(context, s, b.params, small.table));
  BFloat16* branch = s.work(t.fBranch);
  windowReverseHalf(t.w, s.work(t.fProj), branch);
  if (t.stochasticDepth > 0.0) {
    drawNoise(t, dropoutKey, s.at(t.noise));
    scaleSamplesHalf(t.w.batch, perSample, s.at(t.noise), branch, branch);
  }
  addHalf(T * C, x, branch, s.at(t.h1));
  return mlpForward(context, s, b.params, small.ln2, reinterpret_cast<BFloat16*>(b.y));
}

namespace {

struct BackwardParams {
  const float* p;  // the layer's parameters (float32, or pure bf16's bfloat16)
  float* g;        // their gradients
  SmallParams small;
  SmallGrads smallGrads;
};

// From d(h1) (bfloat16): d(norm1's output) into rowsB, the gradients of proj, the attention (the bias
// table's included) and qkv on the way.
Status attentionBackward(const DnnlContext& context, const HalfTensors& s, const BackwardParams& w,
                         const BFloat16* dh1) {
  const HalfSwinBlockPrep& t = s.t;
  const Index C = t.w.channels, perWindowImage = t.w.windows() * t.w.area() * C;
  std::byte* dnnl = s.scratch + t.bDnnl;
  BFloat16 *rowsA = s.work(t.bRowsA), *rowsB = s.work(t.bRowsB), *wide = s.work(t.bWide);
  windowPartitionHalf(t.w, dh1, rowsA);  // d(proj's output): the reverse's backward
  if (t.stochasticDepth > 0.0) scaleSamplesHalf(t.w.batch, perWindowImage, s.at(t.noise), rowsA, rowsA);
  REMAT_RETURN_IF_ERROR(t.proj.backward(context, s.at(t.merged), rowsA, s.saved + t.projCopy, rowsB,
                                        paramAt(w.g, t.projW, t.pure), paramAt(w.g, t.projB, t.pure), dnnl,
                                        paramAt(w.p, t.projW, t.pure)));
  rowsToHeadsHalf(t.g, rowsB, C, 0, s.work(t.bHeads));
  const BFloat16 *k = s.at(t.k), *v = s.at(t.v);
  keysAndValues(t, s.at(t.qkvOut), s.work(t.bKv), k, v);
  const SwinHalfAttention a{t.g, s.at(t.q), k, v, nullptr, nullptr, t.w.windows(), t.pure};
  swinAttentionBackwardHalf(a, t.pure ? nullptr : s.at<float>(t.probs32), s.at(t.probs16), s.work(t.bHeads), scaleOf(t),
                            wide, s.work<float>(t.bScores), s.work<float>(t.bThread));
  relativeBiasBackward(t.w.side, t.g.heads, t.g.batch, s.work<float>(t.bScores), w.smallGrads.table);
  REMAT_RETURN_IF_ERROR(t.qkv.backward(context, s.at(t.windowed), wide, s.saved + t.qkvCopy, rowsA,
                                       paramAt(w.g, t.qkvW, t.pure), paramAt(w.g, t.qkvB, t.pure), dnnl,
                                       paramAt(w.p, t.qkvW, t.pure)));
  windowReverseHalf(t.w, rowsA, rowsB);  // the partition's backward: the padding's rows dropped
  return Status::ok();
}

// From dy (its stochastic depth applied) to d(norm2's output) in rowsA: fc2, GELU, fc1.
Status mlpBackward(const DnnlContext& context, const HalfTensors& s, const BackwardParams& w, const BFloat16* dMlp) {
  const HalfSwinBlockPrep& t = s.t;
  std::byte* dnnl = s.scratch + t.bDnnl;
  BFloat16* wide = s.work(t.bWide);
  REMAT_RETURN_IF_ERROR(t.fc2.backward(context, s.at(t.gelu), dMlp, s.saved + t.fc2Copy, wide,
                                       paramAt(w.g, t.fc2W, t.pure), paramAt(w.g, t.fc2B, t.pure), dnnl,
                                       paramAt(w.p, t.fc2W, t.pure)));
  const Index hiddenCount = t.w.tokens() * t.hidden;
  float* geluWork = s.work<float>(t.bGelu);
  castToFloat(hiddenCount, s.at(t.fc), geluWork);
  castToFloat(hiddenCount, wide, geluWork + hiddenCount);
  geluBackward(hiddenCount, false, geluWork, geluWork + hiddenCount, geluWork + hiddenCount);
  castToHalf(hiddenCount, geluWork + hiddenCount, wide);
  return t.fc1.backward(context, s.at(t.ln2Out), wide, s.saved + t.fc1Copy, s.work(t.bRowsA),
                        paramAt(w.g, t.fc1W, t.pure), paramAt(w.g, t.fc1B, t.pure), dnnl, paramAt(w.p, t.fc1W, t.pure));
}

}  // namespace

Status backwardHalfSwinBlock(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const HalfSwinBlockPrep& t = *prepared.halfSwinBlock;
  auto tensors = halfBackwardTensors(prepared, b, true);
  if (!tensors) return tensors.status();
  const HalfTensors s{*tensors, t};
  const BackwardParams w{b.params, b.paramGrads, smallParams(t, b.params, s.work<float>(t.bParams)),
                         smallGrads(t, b.paramGrads, s.work<float>(t.bGrads))};
  std::byte* dnnl = s.scratch + t.bDnnl;
  const Index T = t.w.tokens(), C = t.w.channels, perSample = t.w.height * t.w.width * C;
  const auto* x = reinterpret_cast<const BFloat16*>(b.x);
  const auto* dy = reinterpret_cast<const BFloat16*>(b.dy);
  BFloat16 *rowsA = s.work(t.bRowsA), *dh1 = s.work(t.bH1);
  float *xWide = s.work<float>(t.bX), *dyWide = s.work<float>(t.bDy), *dx = s.work<float>(t.bDx);
  const BFloat16* dMlp = dy;
  if (t.stochasticDepth > 0.0) {
    scaleSamplesHalf(t.w.batch, perSample, s.at(t.noise) + t.w.batch, dy, rowsA);
    dMlp = rowsA;
  }
  REMAT_RETURN_IF_ERROR(mlpBackward(context, s, w, dMlp));
  REMAT_RETURN_IF_ERROR(normBackward(context, t.ln2, T * C, s.at(t.h1), rowsA, w.small.ln2, s.at<float>(t.st2), xWide,
                                     dyWide, dx, w.smallGrads.ln2, dnnl));
  addHalfRounded(T * C, dy, dx, dh1);  // the residual: d(h1) = dy + norm2's (rounded to bfloat16)
  REMAT_RETURN_IF_ERROR(attentionBackward(context, s, w, dh1));
  REMAT_RETURN_IF_ERROR(normBackward(context, t.ln1, T * C, x, s.work(t.bRowsB), w.small.ln1, s.at<float>(t.st1), xWide,
                                     dyWide, dx, w.smallGrads.ln1, dnnl));
  if (b.dx != nullptr) addHalfRounded(T * C, dh1, dx, reinterpret_cast<BFloat16*>(b.dx));
  addSmallGrads(t, w.smallGrads, b.paramGrads);
  return Status::ok();
}

}  // namespace remat::cpu
