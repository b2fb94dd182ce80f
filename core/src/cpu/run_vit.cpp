// ViT's patch embedding and the classification head on the CPU (docs/memory-model.md 12.2).
//
// patch_embedding: conv_proj (kernel = stride = patch) on oneDNN over the channels-last image,
// whose output [N, h, w, d] already is the [N, P, d] patch rows (flatten and permute are views);
// the class token and the patches are concatenated into the workspace, as torch.cat does, and the
// position table is added into x(l). Parameters: the conv's weight [d, C, k, k] and bias, the class
// token [d], the position table [S, d]. Its backward sums d(x) over the batch into the position
// table's and token 0's rows into the class token's gradient, gathers d(patches) contiguous in its
// workspace (torch.cat's backward: narrow, then the conv's own contiguous copy) and runs the
// conv's backward. With dropout (p > 0) x(l) is dropped in place and E is its mask (1 byte per
// element); the backward reads d(x) through the mask wherever it reads it.
//
// cls_head: a LayerNorm over all tokens (E: its statistics and the whole normalised [N, S, d], which
// the linear keeps through the x[:, 0] view), token 0's rows gathered contiguous (the matmul's
// .contiguous()), the linear, and tanh for BERT's pooler (x(l) kept: tanh's backward reads it).
// Its backward scatters d(token 0) into a zero [N, S, d] (select_backward's dense gradient) in the
// workspace before the LayerNorm's backward.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention.hpp"
#include "block_prep.hpp"
#include "cls_head_rows.hpp"
#include "device_impl.hpp"

namespace remat::cpu {

struct VitPrep {
  Index batch = 0, seq = 0, width = 0, patches = 0, outFeatures = 0;
  bool norm = true, tanhOut = false;
  std::optional<ConvOp> conv;
  LayerNormOp ln;
  LinearOp linear;
  Index convBias = 0, classToken = 0, positions = 0;  // patch_embedding's parameter offsets (floats)
  Index weight = 0, bias = 0;                         // cls_head's
  std::uint64_t stats = 0, lnOut = 0, savedBytes = 0, discardShift = 0;
  std::uint64_t fA = 0, fB = 0, fDnnl = 0;  // forward regions
  std::uint64_t bA = 0, bB = 0, bDnnl = 0;  // backward regions
};

namespace {

float* at(std::byte* base, std::uint64_t offset) { return reinterpret_cast<float*>(base + offset); }
const float* at(const std::byte* base, std::uint64_t offset) { return reinterpret_cast<const float*>(base + offset); }

}  // namespace

Status preparePatchEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                             const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto v = std::make_shared<VitPrep>();
  ConvGeometry convProj;
  auto maskBytes = checkPatchEmbedding(*v, layer, spec, check, true, prepared, convProj);
  if (!maskBytes) return maskBytes.status();
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, *maskBytes));
  REMAT_RETURN_IF_ERROR(assign(ConvOp::create(context, convProj, true, firstLayer ? InputGrad::None : InputGrad::Write,
                                              prepared.label + ", conv_proj"),
                               v->conv));
  ScratchLayout f, b;
  v->fA = f.add(floats(v->batch * v->patches * v->width));  // the conv's output
  v->fB = f.add(floats(v->batch * v->seq * v->width));      // the concatenation
  v->fDnnl = f.add(v->conv->forwardScratchBytes());
  v->bA = b.add(floats(v->batch * v->patches * v->width));  // d(patches), contiguous
  v->bDnnl = b.add(v->conv->backwardScratchBytes());
  prepared.requiredFwdWorkspace = f.bytes();
  prepared.requiredBwdWorkspace = b.bytes();
  addPlainParams(layer, prepared);
  prepared.vit = std::move(v);
  return Status::ok();
}

Status forwardPatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                             std::uint64_t dropoutKey, const ForwardBuffers& b) {
  if (prepared.halfPatch) return forwardHalfPatchEmbedding(context, prepared, mode, dropoutKey, b);  // bf16-mixed
  if (prepared.pureVit) return forwardPurePatchEmbedding(context, prepared, mode, dropoutKey, b);    // pure bf16
  const VitPrep& v = *prepared.vit;
  if (b.workspace == nullptr || (mode == ForwardMode::Keep && prepared.dropoutP > 0.0 && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": no forward workspace or mask");
  float *patches = at(b.workspace, v.fA), *joined = at(b.workspace, v.fB);
  const float* p = b.params;
  REMAT_RETURN_IF_ERROR(v.conv->forward(context, b.x, p, p + v.convBias, patches, b.workspace + v.fDnnl));
  const Index d = v.width, perSample = v.seq * d;
#pragma omp parallel for schedule(static)
  for (Index n = 0; n < v.batch; ++n) {
    std::memcpy(joined + n * perSample, p + v.classToken, floats(d));
    std::memcpy(joined + n * perSample + d, patches + n * v.patches * d, floats(v.patches * d));
  }
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < v.batch * perSample; ++i) b.y[i] = joined[i] + p[v.positions + i % perSample];
  const DropoutDraw drop(dropoutKey, prepared.dropoutP);
  if (drop.active())
    dropoutFlat(v.batch * perSample, drop, b.y, b.y,
                mode == ForwardMode::Keep ? reinterpret_cast<std::uint8_t*>(b.extra) : nullptr);
  return Status::ok();
}

Status backwardPatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  if (prepared.halfPatch) return backwardHalfPatchEmbedding(context, prepared, b);  // bf16-mixed
  if (prepared.pureVit) return backwardPurePatchEmbedding(context, prepared, b);    // pure bf16
  const VitPrep& v = *prepared.vit;
  if (b.workspace == nullptr || b.x == nullptr || (prepared.dropoutP > 0.0 && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the backward lacks the image, its mask or its workspace");
  const Index d = v.width, perSample = v.seq * d;
  float* g = b.paramGrads;
  const auto* mask = reinterpret_cast<const std::uint8_t*>(b.extra);  // p > 0 only
  const float scale = DropoutDraw(0, prepared.dropoutP).scale;
  auto dIn = [&](Index i) { return prepared.dropoutP > 0.0 ? (mask[i] ? b.dy[i] * scale : 0.0f) : b.dy[i]; };
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < perSample; ++i) {  // positions, and token 0 into the class token
    float sum = 0.0f;
    for (Index n = 0; n < v.batch; ++n) sum += dIn(n * perSample + i);
    g[v.positions + i] += sum;
    if (i < d) g[v.classToken + i] += sum;
  }
  float* dPatches = at(b.workspace, v.bA);
#pragma omp parallel for schedule(static)
  for (Index n = 0; n < v.batch; ++n)
    for (Index i = 0; i < v.patches * d; ++i) dPatches[n * v.patches * d + i] = dIn(n * perSample + d + i);
  return v.conv->backward(context, b.x, dPatches, b.params, b.dx, g, g + v.convBias, b.workspace + v.bDnnl);
}

Status prepareClsHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                      const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto v = std::make_shared<VitPrep>();
  REMAT_RETURN_IF_ERROR(setClsHeadLayout(*v, layer, spec, check));
  const Index d = v->width, T = v->batch * v->seq, out = v->outFeatures;
  v->stats = 0;
  v->lnOut = floats(2 * T);
  v->savedBytes = v->norm ? floats(2 * T) + floats(T * d) : 0;
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, true, v->tanhOut));
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, v->savedBytes));
  const InputGrad grad = firstLayer ? InputGrad::None : InputGrad::Write;
  if (v->norm) {
    REMAT_RETURN_IF_ERROR(assign(
        LayerNormOp::create(context, T, d, static_cast<float>(spec.epsilon), grad, prepared.label + ", norm"), v->ln));
  }
  REMAT_RETURN_IF_ERROR(
      assign(LinearOp::create(context, v->batch, d, out, spec.bias, InputGrad::Write, prepared.label + ", linear"),
             v->linear));
  const std::uint64_t lnFwd = v->norm ? v->ln.forwardScratchBytes() : 0,
                      lnBwd = v->norm ? v->ln.backwardScratchBytes() : 0;
  ScratchLayout f, b;
  v->fA = f.add(floats(v->batch * d));    // token 0's rows, contiguous
  v->fB = f.add(floats(v->batch * out));  // the linear's output before tanh
  v->fDnnl = f.add(std::max(lnFwd, v->linear.forwardScratchBytes()));
  v->discardShift = aligned(v->savedBytes);
  prepared.requiredFwdWorkspace = v->discardShift + f.bytes();
  v->bA = b.add(floats(2 * v->batch * d + v->batch * out));  // token 0's rows, d(the linear's output), d(rows)
  v->bB = b.add(floats(T * d));                              // d(token 0) scattered into a zero [N, S, d]
  v->bDnnl = b.add(std::max(lnBwd, v->linear.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
  addPlainParams(layer, prepared);
  prepared.vit = std::move(v);
  return Status::ok();
}

Status forwardClsHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                      const ForwardBuffers& b) {
  if (prepared.halfClsHead) return forwardHalfClsHead(context, prepared, mode, b);  // bf16-mixed
  if (prepared.pureVit) return forwardPureClsHead(context, prepared, mode, b);      // pure bf16
  const VitPrep& v = *prepared.vit;
  auto regions = forwardRegions(prepared, mode, b, v.discardShift, "head", v.norm);
  if (!regions) return regions.status();
  std::byte *saved = regions->saved, *scratch = regions->scratch;
  const float* normed = b.x;
  if (v.norm) {
    REMAT_RETURN_IF_ERROR(
        v.ln.forward(context, b.x, b.params, at(saved, v.lnOut), at(saved, v.stats), scratch + v.fDnnl));
    normed = at(saved, v.lnOut);
  }
  float* rows = at(scratch, v.fA);
  gatherFirstTokens(v.batch, v.seq, v.width, normed, rows);
  const float* bias = v.bias >= 0 ? b.params + v.bias : nullptr;
  float* z = v.tanhOut ? at(scratch, v.fB) : b.y;
  REMAT_RETURN_IF_ERROR(v.linear.forward(context, rows, b.params + v.weight, bias, z, scratch + v.fDnnl));
  if (v.tanhOut) poolerTanhForward(v.batch * v.outFeatures, z, b.y);
  return Status::ok();
}

Status backwardClsHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  if (prepared.halfClsHead) return backwardHalfClsHead(context, prepared, b);  // bf16-mixed
  if (prepared.pureVit) return backwardPureClsHead(context, prepared, b);      // pure bf16
  const VitPrep& v = *prepared.vit;
  if (b.workspace == nullptr || b.x == nullptr || (v.norm && b.extra == nullptr) || (v.tanhOut && b.y == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the head's backward lacks x(l-1), x(l), E or its workspace");
  const Index d = v.width, count = v.batch * v.outFeatures;
  float *rows = at(b.workspace, v.bA), *dz = rows + v.batch * d, *dRows = dz + count;
  float* dFull = at(b.workspace, v.bB);
  const float* normed = v.norm ? at(b.extra, v.lnOut) : b.x;
  gatherFirstTokens(v.batch, v.seq, d, normed, rows);
  const float* dy = b.dy;
  if (v.tanhOut) {
    poolerTanhBackward(count, b.dy, b.y, dz);
    dy = dz;
  }
  REMAT_RETURN_IF_ERROR(v.linear.backward(context, rows, dy, b.params + v.weight, dRows, b.paramGrads + v.weight,
                                          v.bias >= 0 ? b.paramGrads + v.bias : nullptr, b.workspace + v.bDnnl));
  // Without the norm d(x) is the scattered gradient itself; layer 1 without it: only the parameters'.
  scatterFirstTokens(v.batch, v.seq, d, dRows, v.norm || b.dx == nullptr ? dFull : b.dx);
  if (!v.norm) return Status::ok();
  return v.ln.backward(context, b.x, dFull, b.params, at(b.extra, v.stats), b.dx, b.paramGrads, b.workspace + v.bDnnl);
}

}  // namespace remat::cpu
