// patch_embedding under bf16-mixed on the CPU (docs/memory-model.md 12.10): conv_proj a
// HalfConvOp (kernel = stride = patch) reading the image's bfloat16 cast, its output the bfloat16
// [N, P, d] patch rows; torch.cat with the float32 class token promotes, so the concatenation,
// the position table's add and x(l) are float32 (dropout on it as in float32). E: [the image's
// cast][conv_proj's weight copy] (the HalfConvOp's copies), then the dropout mask (p > 0). The
// backward sums d(x) into the position table and class token as in float32, casts d(patches) to
// bfloat16 (the promotion's backward) and runs the conv's backward from the saved copies.
#include <cstring>

#include "attention.hpp"
#include "block_prep.hpp"
#include "device_impl.hpp"

namespace remat::cpu {

struct HalfPatchPrep {
  Index batch = 0, seq = 0, width = 0, patches = 0;
  std::optional<HalfConvOp> conv;
  Index convBias = 0, classToken = 0, positions = 0;  // parameter offsets (floats)
  std::uint64_t mask = 0;                             // E: the dropout mask after the copies
  std::uint64_t fPatches = 0, fDnnl = 0, bPatches = 0, bDnnl = 0;
};

Status prepareHalfPatchEmbedding(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                                 const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto v = std::make_shared<HalfPatchPrep>();
  ConvGeometry convProj;
  auto maskBytes = checkPatchEmbedding(*v, layer, spec, check, false, prepared, convProj);
  if (!maskBytes) return maskBytes.status();
  REMAT_RETURN_IF_ERROR(
      assign(HalfConvOp::create(context, convProj, true, true, firstLayer ? InputGrad::None : InputGrad::Write,
                                prepared.label + ", conv_proj"),
             v->conv));
  v->mask = v->conv->copies().inputCastBytes() + v->conv->copies().weightCopyBytes();
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, v->mask + *maskBytes));
  const auto patchBytes = static_cast<std::uint64_t>(v->batch * v->patches * v->width) * 2;
  ScratchLayout f, b;
  v->fPatches = f.add(aligned(patchBytes));  // the conv's bfloat16 output
  v->fDnnl = f.add(v->conv->forwardScratchBytes());
  v->bPatches = b.add(aligned(patchBytes));  // d(patches) in bfloat16, contiguous
  v->bDnnl = b.add(v->conv->backwardScratchBytes());
  prepared.requiredFwdWorkspace = f.bytes();
  prepared.requiredBwdWorkspace = b.bytes();
  addPlainParams(layer, prepared);
  prepared.halfPatch = std::move(v);
  return Status::ok();
}

Status forwardHalfPatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                                 std::uint64_t dropoutKey, const ForwardBuffers& b) {
  const HalfPatchPrep& v = *prepared.halfPatch;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("cpu: " + prepared.label + ": no forward workspace or E");
  auto* patches = reinterpret_cast<BFloat16*>(b.workspace + v.fPatches);
  const float* p = b.params;
  REMAT_RETURN_IF_ERROR(
      v.conv->forward(context, b.x, p, p + v.convBias, patches, keep ? b.extra : nullptr, b.workspace + v.fDnnl));
  const Index d = v.width, perSample = v.seq * d;
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < v.batch * perSample; ++i) {  // cat(class token, patches) + positions, float32
    const Index n = i / perSample, at = i % perSample;
    const float joined = at < d ? p[v.classToken + at] : patches[n * v.patches * d + at - d].value();
    b.y[i] = joined + p[v.positions + at];
  }
  const DropoutDraw drop(dropoutKey, prepared.dropoutP);
  if (drop.active())
    dropoutFlat(v.batch * perSample, drop, b.y, b.y,
                keep ? reinterpret_cast<std::uint8_t*>(b.extra + v.mask) : nullptr);
  return Status::ok();
}

Status backwardHalfPatchEmbedding(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const HalfPatchPrep& v = *prepared.halfPatch;
  if (b.workspace == nullptr || b.extra == nullptr)
    return Status::internal("cpu: " + prepared.label + ": the backward lacks E or its workspace");
  const Index d = v.width, perSample = v.seq * d;
  float* g = b.paramGrads;
  const auto* mask = reinterpret_cast<const std::uint8_t*>(b.extra + v.mask);  // p > 0 only
  const float scale = DropoutDraw(0, prepared.dropoutP).scale;
  auto dIn = [&](Index i) { return prepared.dropoutP > 0.0 ? (mask[i] ? b.dy[i] * scale : 0.0f) : b.dy[i]; };
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < perSample; ++i) {  // positions, and token 0 into the class token
    float sum = 0.0f;
    for (Index n = 0; n < v.batch; ++n) sum += dIn(n * perSample + i);
    g[v.positions + i] += sum;
    if (i < d) g[v.classToken + i] += sum;
  }
  auto* dPatches = reinterpret_cast<BFloat16*>(b.workspace + v.bPatches);
#pragma omp parallel for schedule(static)
  for (Index n = 0; n < v.batch; ++n)
    for (Index i = 0; i < v.patches * d; ++i) dPatches[n * v.patches * d + i] = BFloat16(dIn(n * perSample + d + i));
  return v.conv->backward(context, nullptr, dPatches, b.extra, b.dx, g, g + v.convBias, b.workspace + v.bDnnl);
}

}  // namespace remat::cpu
