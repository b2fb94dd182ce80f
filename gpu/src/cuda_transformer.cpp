// transformer_block on the GPU (docs/memory-model.md 12.1, docs/gpu.md): the CPU backend's runner
// (core/src/cpu/run_transformer.cpp) op for op. E holds exactly what the model says PyTorch keeps,
// in the CPU's order: ln1's and ln2's statistics, ln1's output, the merged heads, h1, ln2's
// output, fc1's output, GELU's output, then math: the q, k, v copies and the probabilities /
// fused: qkv, the attention output and its log-sum-exp; with dropout the dropped probabilities
// (math) and the masks. A discard-mode forward lays the same tensors out at the start of its
// workspace. BERT's post-norm block keeps s1, h and s2 in the ln1Out, h1 and ln2Out slots.
// Linears and attention matmuls: cuBLAS (float32, no TF32); the rest kernels_attention.cu and
// kernels_layernorm.cu. Parameters in PyTorch's order: ln_1, qkv (weight [3d, d], bias), the output
// projection, ln_2, fc1 ([H, d], bias), fc2.
#include "cuda_transformer.hpp"

#include <algorithm>
#include <cmath>

#include "cuda_attention.hpp"
#include "kernels_attention.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/exec/layer_checks.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {

struct TransformerState {
  kernels::AttentionShape g;
  Index tokens = 0, width = 0, hidden = 0;
  bool fused = true, tanhGelu = false, postNorm = false;
  double dropoutP = 0.0;
  float epsilon = 1e-5f;
  // parameter offsets (floats)
  Index ln1P = 0, qkvW = 0, qkvB = 0, projW = 0, projB = 0, ln2P = 0, fc1W = 0, fc1B = 0, fc2W = 0, fc2B = 0;
  // E's tensors (bytes) and E's size
  std::uint64_t st1 = 0, st2 = 0, ln1Out = 0, merged = 0, h1 = 0, ln2Out = 0, fc = 0, gelu = 0;
  std::uint64_t q = 0, k = 0, v = 0, probs = 0, qkvOut = 0, attnOut = 0, lse = 0, savedBytes = 0;
  std::uint64_t dropped = 0, mask1 = 0, mask2 = 0, attnMask = 0;
  // forward scratch (a discard-mode forward adds discardShift), backward scratch
  std::uint64_t fQkv = 0, fAttn = 0, fProj = 0, discardShift = 0;
  std::uint64_t bWide = 0, bRows = 0, bH1 = 0, bHeads = 0, bSquare = 0, bGradHeads = 0;
};

namespace {

constexpr std::uint64_t kAlignBytes = 256;

std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }

// Consecutive regions, each at a 256-byte boundary.
struct Regions {
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    const std::uint64_t start = (end + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    end = start + bytes;
    return start;
  }
};

// Consecutive offsets without padding (E is the model's byte count exactly).
struct Packed {
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    const std::uint64_t start = end;
    end += bytes;
    return start;
  }
};

Index setParams(TransformerState& t) {
  const Index d = t.width, H = t.hidden;
  Index at = 0;
  auto take = [&at](Index n) {
    const Index start = at;
    at += n;
    return start;
  };
  t.ln1P = take(2 * d);
  t.qkvW = take(3 * d * d);
  t.qkvB = take(3 * d);
  t.projW = take(d * d);
  t.projB = take(d);
  t.ln2P = take(2 * d);
  t.fc1W = take(H * d);
  t.fc1B = take(H);
  t.fc2W = take(d * H);
  t.fc2B = take(d);
  return at;
}

Index squareCount(const TransformerState& t) { return t.g.rows() * t.g.seq; }

void layOutSaved(TransformerState& t) {
  const Index T = t.tokens, d = t.width, H = t.hidden, A = squareCount(t);
  Packed e;
  t.st1 = e.add(floats(2 * T));
  t.st2 = e.add(floats(2 * T));
  t.ln1Out = e.add(floats(T * d));
  t.merged = e.add(floats(T * d));
  t.h1 = e.add(floats(T * d));
  t.ln2Out = e.add(floats(T * d));
  t.fc = e.add(floats(T * H));
  t.gelu = e.add(floats(T * H));
  if (t.fused) {
    t.qkvOut = e.add(floats(3 * T * d));
    t.attnOut = e.add(floats(T * d));
    t.lse = e.add(floats(t.g.rows()));
  } else {
    t.q = e.add(floats(T * d));
    t.k = e.add(floats(T * d));
    t.v = e.add(floats(T * d));
    t.probs = e.add(floats(A));
  }
  if (t.dropoutP > 0.0) {
    if (!t.fused) t.dropped = e.add(floats(A));
    t.mask1 = e.add(static_cast<std::uint64_t>(T * d));
    t.mask2 = e.add(static_cast<std::uint64_t>(T * d));
    if (!t.fused) t.attnMask = e.add(static_cast<std::uint64_t>(A));
  }
  t.savedBytes = e.end;
}

void layOutScratch(TransformerState& t, LayerState& state) {
  const Index T = t.tokens, d = t.width, H = t.hidden;
  t.discardShift = (t.savedBytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  Regions f;
  f.end = t.discardShift;
  if (!t.fused) {
    t.fQkv = f.add(floats(3 * T * d)) - t.discardShift;  // the projection before the heads are copied out
    t.fAttn = f.add(floats(T * d)) - t.discardShift;     // PV's output [N, h, S, dh]
  }
  t.fProj = f.add(floats(T * d)) - t.discardShift;
  state.requiredFwdWorkspace = f.end;
  Regions b;
  t.bWide = b.add(floats(std::max(T * H, 3 * T * d)));  // d(fc1's output), later d(qkv)
  t.bRows = b.add(floats(T * d));
  t.bH1 = b.add(floats(T * d));
  t.bHeads = b.add(floats(T * d));
  t.bSquare = b.add(floats(t.fused ? t.g.rows() : squareCount(t)));
  if (!t.fused) t.bGradHeads = b.add(floats(3 * T * d));  // dq, dk, dv per head before the merge
  state.requiredBwdWorkspace = b.end;
}

}  // namespace

Status gemm(const LayerContext& c, const RowMajorGemm& g, const float* a, const float* b, float* out,
            const char* what) {
  for (Index extent : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch})
    if (extent > 0x7fffffff) return Status::invalid(std::string("gpu: ") + what + ": a dimension exceeds cuBLAS's int");
  const auto i = [](Index v) { return static_cast<int>(v); };
  const cublasStatus_t status = cublasGemmStridedBatchedEx(
      c.cublas, g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, i(g.n), i(g.m), i(g.k),
      &g.alpha, b, CUDA_R_32F, i(g.ldb), g.strideB, a, CUDA_R_32F, i(g.lda), g.strideA, &g.beta, out, CUDA_R_32F,
      i(g.ldc), g.strideC, i(g.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  // The status names the call and, through the context, the layer's op (what).
  const Status checked = cublasStatus(status, "cublasGemmStridedBatchedEx", __FILE__, __LINE__);
  return checked.isOk() ? checked : checked.withContext(std::string("gpu: ") + what);
}

// y = x W^T + b over the token rows.
Status linearForward(const LayerContext& c, const Linear& op, const float* x, const float* w, const float* bias,
                     float* y) {
  RowMajorGemm g;
  g.transB = true;
  g.m = op.rows, g.n = op.out, g.k = op.in, g.lda = op.in, g.ldb = op.in, g.ldc = op.out;
  REMAT_RETURN_IF_ERROR(gemm(c, g, x, w, y, op.name));
  return kernels::addRowBias(c.stream, op.rows, op.out, bias, y);
}

// dx = dy W (written, when dx is not null); dW += dy^T x; db += the column sums of dy.
Status linearBackward(const LayerContext& c, const Linear& op, const float* x, const float* dy, const float* w,
                      float* dx, float* dw, float* db) {
  if (dx != nullptr) {
    RowMajorGemm g;
    g.m = op.rows, g.n = op.in, g.k = op.out, g.lda = op.out, g.ldb = op.in, g.ldc = op.in;
    REMAT_RETURN_IF_ERROR(gemm(c, g, dy, w, dx, op.name));
  }
  RowMajorGemm g;
  g.transA = true;
  g.m = op.out, g.n = op.in, g.k = op.rows, g.lda = op.out, g.ldb = op.in, g.ldc = op.in, g.beta = 1.0f;
  REMAT_RETURN_IF_ERROR(gemm(c, g, dy, x, dw, op.name));
  return kernels::accumulateRowBiasGrad(c.stream, op.rows, op.out, dy, db);
}

Status prepareTransformerBlock(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                               LayerState& state) {
  const Shape& in = layer.inputShape;
  if (in.size() != 3 || spec.heads <= 0 || in[2] % spec.heads != 0)
    return check.fail("transformer_block needs an [N, S, d] input with d divisible by the heads, got " +
                      shapeToString(in));
  auto t = std::make_shared<TransformerState>();
  t->g = kernels::AttentionShape{in[0], in[1], spec.heads, in[2] / spec.heads, spec.causal};
  t->tokens = in[0] * in[1];
  t->width = in[2];
  t->hidden = spec.hidden;
  t->fused = spec.fusedAttention;
  t->tanhGelu = spec.causal;  // GPT-2's gelu(approximate='tanh'); BERT and ViT use the exact (erf) form
  t->postNorm = !spec.preNorm;
  t->dropoutP = spec.dropoutP;
  t->epsilon = static_cast<float>(spec.epsilon);
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(setParams(*t))));
  layOutSaved(*t);
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, t->savedBytes));
  if (3 * t->tokens * std::max(t->width, t->hidden) > 0x7fffffff || squareCount(*t) > 0x7fffffffLL * 16)
    return check.fail("a dimension exceeds cuBLAS's int");
  layOutScratch(*t, state);
  state.transformer = std::move(t);
  return Status::ok();
}

namespace {

// The layer's dropout: sites 1 and 2 the residual branches, 3 the attention (the CPU's DropoutDraw).
struct Dropout {
  std::uint64_t key = 0;
  double p = 0.0;
  bool active() const { return p > 0.0; }
  std::uint64_t site(std::uint64_t which) const { return rng::mix64(key ^ which); }
};

struct Ops {
  Linear qkv, proj, fc1, fc2;
  explicit Ops(const TransformerState& t)
      : qkv{t.tokens, t.width, 3 * t.width, "qkv"},
        proj{t.tokens, t.width, t.width, "out projection"},
        fc1{t.tokens, t.width, t.hidden, "fc1"},
        fc2{t.tokens, t.hidden, t.width, "fc2"} {}
};

// The saved tensors (E, or the start of a discard-mode workspace) and the scratch.
struct Saved {
  std::byte* saved;
  std::byte* scratch;
  float* at(std::uint64_t offset) const { return reinterpret_cast<float*>(saved + offset); }
  std::uint8_t* bytes(std::uint64_t offset) const { return reinterpret_cast<std::uint8_t*>(saved + offset); }
  float* work(std::uint64_t offset) const { return reinterpret_cast<float*>(scratch + offset); }
};

Status attentionForward(const LayerContext& c, const TransformerState& t, const Saved& s, const Dropout& drop,
                        const float* input, const float* p) {
  const Ops ops(t);
  const Index d = t.width;
  if (t.fused) {
    REMAT_RETURN_IF_ERROR(linearForward(c, ops.qkv, input, p + t.qkvW, p + t.qkvB, s.at(t.qkvOut)));
    REMAT_RETURN_IF_ERROR(kernels::flashAttentionForward(c.stream, t.g, {drop.site(3), drop.p}, s.at(t.qkvOut),
                                                         s.at(t.attnOut), s.at(t.lse)));
    return kernels::headsToRows(c.stream, t.g, s.at(t.attnOut), s.at(t.merged), d, 0);
  }
  float* qkv = s.work(t.fQkv);
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.qkv, input, p + t.qkvW, p + t.qkvB, qkv));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, qkv, 3 * d, 0, s.at(t.q)));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, qkv, 3 * d, d, s.at(t.k)));
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, qkv, 3 * d, 2 * d, s.at(t.v)));
  MathAttention m{s.at(t.q), s.at(t.k), s.at(t.v), s.at(t.probs), {}};
  if (drop.active()) m.drop = {drop.site(3), drop.p, s.bytes(t.attnMask), s.at(t.dropped)};
  float* attn = s.work(t.fAttn);
  REMAT_RETURN_IF_ERROR(mathAttentionForward(c, t.g, m, {}, attn));
  return kernels::headsToRows(c.stream, t.g, attn, s.at(t.merged), d, 0);
}

// A residual branch's dropout in place, its mask into E (site 1: attention's, 2: the MLP's).
Status residualDropout(const LayerContext& c, const TransformerState& t, const Saved& s, const Dropout& drop, int site,
                       float* branch) {
  if (!drop.active()) return Status::ok();
  return kernels::dropoutForward(c.stream, t.tokens * t.width, drop.p, drop.site(static_cast<std::uint64_t>(site)),
                                 branch, branch, s.bytes(site == 1 ? t.mask1 : t.mask2));
}

// Its backward: dy itself when inactive, else mask * dy * scale in `into`.
Result<const float*> residualDropoutBackward(const LayerContext& c, const TransformerState& t, const std::byte* saved,
                                             const Dropout& drop, int site, const float* dy, float* into) {
  if (!drop.active()) return dy;
  const auto* mask = reinterpret_cast<const std::uint8_t*>(saved + (site == 1 ? t.mask1 : t.mask2));
  REMAT_RETURN_IF_ERROR(kernels::dropoutBackward(c.stream, t.tokens * t.width, drop.p, mask, dy, into));
  return static_cast<const float*>(into);
}

Status preNormForward(const LayerContext& c, const TransformerState& t, const Saved& s, const Dropout& drop,
                      const ForwardBuffers& b) {
  const Ops ops(t);
  const float* p = b.params;
  const Index T = t.tokens, d = t.width;
  REMAT_RETURN_IF_ERROR(
      kernels::layerNormForward(c.stream, T, d, t.epsilon, b.x, p + t.ln1P, s.at(t.ln1Out), s.at(t.st1)));
  REMAT_RETURN_IF_ERROR(attentionForward(c, t, s, drop, s.at(t.ln1Out), p));
  float* projected = s.work(t.fProj);
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.proj, s.at(t.merged), p + t.projW, p + t.projB, projected));
  REMAT_RETURN_IF_ERROR(residualDropout(c, t, s, drop, 1, projected));
  REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * d, b.x, projected, s.at(t.h1)));
  REMAT_RETURN_IF_ERROR(
      kernels::layerNormForward(c.stream, T, d, t.epsilon, s.at(t.h1), p + t.ln2P, s.at(t.ln2Out), s.at(t.st2)));
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.fc1, s.at(t.ln2Out), p + t.fc1W, p + t.fc1B, s.at(t.fc)));
  REMAT_RETURN_IF_ERROR(kernels::geluForward(c.stream, T * t.hidden, t.tanhGelu, s.at(t.fc), s.at(t.gelu)));
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.fc2, s.at(t.gelu), p + t.fc2W, p + t.fc2B, b.y));
  REMAT_RETURN_IF_ERROR(residualDropout(c, t, s, drop, 2, b.y));
  return kernels::add(c.stream, T * d, b.y, s.at(t.h1), b.y);
}

// BERT: s1 = x + proj(attn(qkv(x))), h = ln_1(s1), s2 = h + fc2(gelu(fc1(h))), y = ln_2(s2).
Status postNormForward(const LayerContext& c, const TransformerState& t, const Saved& s, const Dropout& drop,
                       const ForwardBuffers& b) {
  const Ops ops(t);
  const float* p = b.params;
  const Index T = t.tokens, d = t.width;
  float *s1 = s.at(t.ln1Out), *h = s.at(t.h1), *s2 = s.at(t.ln2Out), *projected = s.work(t.fProj);
  REMAT_RETURN_IF_ERROR(attentionForward(c, t, s, drop, b.x, p));
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.proj, s.at(t.merged), p + t.projW, p + t.projB, projected));
  REMAT_RETURN_IF_ERROR(residualDropout(c, t, s, drop, 1, projected));
  REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * d, b.x, projected, s1));
  REMAT_RETURN_IF_ERROR(kernels::layerNormForward(c.stream, T, d, t.epsilon, s1, p + t.ln1P, h, s.at(t.st1)));
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.fc1, h, p + t.fc1W, p + t.fc1B, s.at(t.fc)));
  REMAT_RETURN_IF_ERROR(kernels::geluForward(c.stream, T * t.hidden, t.tanhGelu, s.at(t.fc), s.at(t.gelu)));
  REMAT_RETURN_IF_ERROR(linearForward(c, ops.fc2, s.at(t.gelu), p + t.fc2W, p + t.fc2B, projected));
  REMAT_RETURN_IF_ERROR(residualDropout(c, t, s, drop, 2, projected));
  REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * d, h, projected, s2));
  return kernels::layerNormForward(c.stream, T, d, t.epsilon, s2, p + t.ln2P, b.y, s.at(t.st2));
}

// The saved tensors and the backward scratch.
struct BackwardTensors {
  const std::byte* saved;
  std::byte* workspace;
  const float* at(std::uint64_t offset) const { return reinterpret_cast<const float*>(saved + offset); }
  float* work(std::uint64_t offset) const { return reinterpret_cast<float*>(workspace + offset); }
};

// From d(merged heads) in `rows`: d(qkv) into the wide region.
Status attentionBackward(const LayerContext& c, const TransformerState& t, const BackwardTensors& s,
                         const Dropout& drop, const float* rows) {
  float *heads = s.work(t.bHeads), *wide = s.work(t.bWide);
  REMAT_RETURN_IF_ERROR(kernels::rowsToHeads(c.stream, t.g, rows, t.width, 0, heads));
  if (!t.fused) {
    auto* saved = const_cast<std::byte*>(s.saved);  // the backward only reads them
    MathAttention m{s.at(t.q), s.at(t.k), s.at(t.v), const_cast<float*>(s.at(t.probs)), {}};
    if (drop.active())
      m.drop = {drop.site(3), drop.p, reinterpret_cast<std::uint8_t*>(saved + t.attnMask),
                reinterpret_cast<float*>(saved + t.dropped)};
    return mathAttentionBackward(c, t.g, m, heads, s.work(t.bSquare), s.work(t.bGradHeads), wide);
  }
  return kernels::flashAttentionBackward(c.stream, t.g, {drop.site(3), drop.p}, s.at(t.qkvOut), s.at(t.attnOut),
                                         s.at(t.lse), heads, wide, s.work(t.bSquare));
}

Status preNormBackward(const LayerContext& c, const TransformerState& t, const Dropout& drop,
                       const BackwardBuffers& b) {
  const Ops ops(t);
  const BackwardTensors s{b.extra, b.workspace};
  const float* p = b.params;
  NodeGradients g = transformerNodeGradients(c.stream, t, b);
  const Index T = t.tokens, d = t.width;
  float *wide = s.work(t.bWide), *rows = s.work(t.bRows), *dh1 = s.work(t.bH1);
  auto dFc2 = residualDropoutBackward(c, t, b.extra, drop, 2, b.dy, rows);
  if (!dFc2) return dFc2.status();
  REMAT_RETURN_IF_ERROR(linearBackward(c, ops.fc2, s.at(t.gelu), *dFc2, p + t.fc2W, wide, g.at(t.fc2W), g.at(t.fc2B)));
  REMAT_RETURN_IF_ERROR(kernels::geluBackward(c.stream, T * t.hidden, t.tanhGelu, s.at(t.fc), wide, wide));
  REMAT_RETURN_IF_ERROR(linearBackward(c, ops.fc1, s.at(t.ln2Out), wide, p + t.fc1W, rows, g.at(t.fc1W), g.at(t.fc1B)));
  REMAT_RETURN_IF_ERROR(
      kernels::layerNormBackward(c.stream, T, d, s.at(t.h1), rows, p + t.ln2P, s.at(t.st2), dh1, g.at(t.ln2P)));
  REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * d, dh1, b.dy, dh1));  // the residual: d(h1) = dy + ln_2's
  auto dProj = residualDropoutBackward(c, t, b.extra, drop, 1, dh1, s.work(t.bHeads));
  if (!dProj) return dProj.status();
  REMAT_RETURN_IF_ERROR(
      linearBackward(c, ops.proj, s.at(t.merged), *dProj, p + t.projW, rows, g.at(t.projW), g.at(t.projB)));
  REMAT_RETURN_IF_ERROR(attentionBackward(c, t, s, drop, rows));
  REMAT_RETURN_IF_ERROR(linearBackward(c, ops.qkv, s.at(t.ln1Out), wide, p + t.qkvW, rows, g.at(t.qkvW), g.at(t.qkvB)));
  if (b.dx != nullptr) REMAT_RETURN_IF_ERROR(kernels::copyOrAdd(c.stream, T * d, dh1, b.dx, false));
  // ln_1's input gradient is added to the residual's (none for layer 1: dx is null).
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, T, d, b.x, rows, p + t.ln1P, s.at(t.st1), b.dx,
                                                   g.at(t.ln1P), 1, /*accumulate=*/true));
  return g.close();
}

Status postNormBackward(const LayerContext& c, const TransformerState& t, const Dropout& drop,
                        const BackwardBuffers& b) {
  const Ops ops(t);
  const BackwardTensors s{b.extra, b.workspace};
  const float* p = b.params;
  NodeGradients g = transformerNodeGradients(c.stream, t, b);
  const Index T = t.tokens, d = t.width;
  float *wide = s.work(t.bWide), *rows = s.work(t.bRows), *residual = s.work(t.bH1);
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, T, d, s.at(t.ln2Out), b.dy, p + t.ln2P, s.at(t.st2),
                                                   residual, g.at(t.ln2P)));
  auto dFc2 = residualDropoutBackward(c, t, b.extra, drop, 2, residual, rows);
  if (!dFc2) return dFc2.status();
  REMAT_RETURN_IF_ERROR(linearBackward(c, ops.fc2, s.at(t.gelu), *dFc2, p + t.fc2W, wide, g.at(t.fc2W), g.at(t.fc2B)));
  REMAT_RETURN_IF_ERROR(kernels::geluBackward(c.stream, T * t.hidden, t.tanhGelu, s.at(t.fc), wide, wide));
  REMAT_RETURN_IF_ERROR(linearBackward(c, ops.fc1, s.at(t.h1), wide, p + t.fc1W, rows, g.at(t.fc1W), g.at(t.fc1B)));
  REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * d, rows, residual, rows));  // d(h): the MLP's and the residual's
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, T, d, s.at(t.ln1Out), rows, p + t.ln1P, s.at(t.st1),
                                                   residual, g.at(t.ln1P)));
  auto dProj = residualDropoutBackward(c, t, b.extra, drop, 1, residual, s.work(t.bHeads));
  if (!dProj) return dProj.status();
  REMAT_RETURN_IF_ERROR(
      linearBackward(c, ops.proj, s.at(t.merged), *dProj, p + t.projW, rows, g.at(t.projW), g.at(t.projB)));
  REMAT_RETURN_IF_ERROR(attentionBackward(c, t, s, drop, rows));
  REMAT_RETURN_IF_ERROR(linearBackward(c, ops.qkv, b.x, wide, p + t.qkvW, b.dx, g.at(t.qkvW), g.at(t.qkvB)));
  if (b.dx != nullptr)  // d(s1) reaches x(l-1) through the residual too
    REMAT_RETURN_IF_ERROR(kernels::add(c.stream, T * d, b.dx, residual, b.dx));
  return g.close();
}

}  // namespace

Status forwardTransformerBlock(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                               const LayerContext& c, const ForwardBuffers& b) {
  const TransformerState& t = *state.transformer;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the block's forward lacks its workspace or E");
  const Saved s{keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : t.discardShift)};
  const Dropout drop{rng::streamKey(seed, rng::Purpose::Dropout, l), t.dropoutP};
  return t.postNorm ? postNormForward(c, t, s, drop, b) : preNormForward(c, t, s, drop, b);
}

Status backwardTransformerBlock(const LayerState& state, std::size_t l, std::uint64_t seed, const LayerContext& c,
                                const BackwardBuffers& b) {
  const TransformerState& t = *state.transformer;
  if (b.workspace == nullptr || b.extra == nullptr || b.x == nullptr)
    return Status::internal("gpu: " + state.label + ": the block's backward lacks x(l-1), E or its workspace");
  const Dropout drop{rng::streamKey(seed, rng::Purpose::Dropout, l), t.dropoutP};
  return t.postNorm ? postNormBackward(c, t, drop, b) : preNormBackward(c, t, drop, b);
}

}  // namespace remat::gpu
