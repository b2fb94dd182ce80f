// cls_head under bf16-mixed on the CPU (docs/memory-model.md 12.10): the LayerNorm in float32 (its
// statistics in E; it reads x(l-1)), token 0's rows gathered and cast to bfloat16 for the linear
// (a HalfLinearOp: the cast and the weights' bfloat16 copy saved in E after the statistics, as the
// model counts them), bfloat16 logits, and BERT's pooler tanh in bfloat16 (x(l) kept: its backward
// reads it). x(l) is bfloat16 (prepared.half): the loss reads half logits, as after a linear.
// The backward: tanh's in bfloat16, the linear's writing d(token 0) in float32, scattered into a
// zero [N, S, d] (select_backward), then the LayerNorm's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "block_prep.hpp"
#include "cls_head_rows.hpp"
#include "device_impl.hpp"

namespace remat::cpu {

struct HalfClsHeadPrep {
  Index batch = 0, seq = 0, width = 0, outFeatures = 0;
  bool norm = true, tanhOut = false;
  LayerNormOp ln;
  HalfLinearOp linear;
  Index weight = 0, bias = -1;                                   // parameter offsets (floats)
  std::uint64_t copies = 0, savedBytes = 0, discardShift = 0;    // E: statistics at 0, then the copies
  std::uint64_t fNormed = 0, fRows = 0, fLogits = 0, fDnnl = 0;  // forward workspace
  std::uint64_t bDz = 0, bRows = 0, bFull = 0, bDnnl = 0;        // backward workspace
};

namespace {

template <typename T = float>
T* at(std::byte* base, std::uint64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}
const float* at(const std::byte* base, std::uint64_t offset) { return reinterpret_cast<const float*>(base + offset); }

Status createClsOps(const DnnlContext& context, HalfClsHeadPrep& v, const LayerSpec& spec, bool firstLayer,
                    const std::string& label) {
  const Index T = v.batch * v.seq;
  if (v.norm) {
    REMAT_RETURN_IF_ERROR(assign(LayerNormOp::create(context, T, v.width, static_cast<float>(spec.epsilon),
                                                     firstLayer ? InputGrad::None : InputGrad::Write, label + ", norm"),
                                 v.ln));
  }
  REMAT_RETURN_IF_ERROR(assign(HalfLinearOp::create(context, v.batch, v.width, v.outFeatures, spec.bias, true,
                                                    InputGrad::Write, label + ", linear"),
                               v.linear));
  return Status::ok();
}

void layOutCls(HalfClsHeadPrep& v, PreparedLayer& prepared) {
  const Index T = v.batch * v.seq, d = v.width, count = v.batch * v.outFeatures;
  v.copies = v.norm ? floats(2 * T) : 0;
  v.savedBytes = v.copies + v.linear.copies().inputCastBytes() + v.linear.copies().weightCopyBytes();
  const std::uint64_t lnFwd = v.norm ? v.ln.forwardScratchBytes() : 0, lnBwd = v.norm ? v.ln.backwardScratchBytes() : 0;
  ScratchLayout f, b;
  v.fNormed = f.add(floats(T * d));
  v.fRows = f.add(floats(v.batch * d));
  v.fLogits = f.add(aligned(static_cast<std::uint64_t>(count) * 2));
  v.fDnnl = f.add(std::max(lnFwd, v.linear.forwardScratchBytes()));
  v.discardShift = aligned(v.savedBytes);
  prepared.requiredFwdWorkspace = v.discardShift + f.bytes();
  v.bDz = b.add(aligned(static_cast<std::uint64_t>(count) * 2));
  v.bRows = b.add(floats(v.batch * d));
  v.bFull = b.add(floats(T * d));
  v.bDnnl = b.add(std::max(lnBwd, v.linear.backwardScratchBytes()));
  prepared.requiredBwdWorkspace = b.bytes();
}

}  // namespace

Status prepareHalfClsHead(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                          const LayerChecks& check, bool firstLayer, PreparedLayer& prepared) {
  auto v = std::make_shared<HalfClsHeadPrep>();
  REMAT_RETURN_IF_ERROR(setClsHeadLayout(*v, layer, spec, check));
  REMAT_RETURN_IF_ERROR(expectKeptFlags(layer, check, v->norm, v->tanhOut));
  REMAT_RETURN_IF_ERROR(createClsOps(context, *v, spec, firstLayer, prepared.label));
  layOutCls(*v, prepared);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, v->savedBytes));
  addPlainParams(layer, prepared);
  prepared.halfClsHead = std::move(v);
  return Status::ok();
}

Status forwardHalfClsHead(const DnnlContext& context, const PreparedLayer& prepared, ForwardMode mode,
                          const ForwardBuffers& b) {
  const HalfClsHeadPrep& v = *prepared.halfClsHead;
  auto regions = forwardRegions(prepared, mode, b, v.discardShift, "head", true);
  if (!regions) return regions.status();
  std::byte *saved = regions->saved, *scratch = regions->scratch;
  const float* normed = b.x;
  if (v.norm) {
    REMAT_RETURN_IF_ERROR(
        v.ln.forward(context, b.x, b.params, at(scratch, v.fNormed), at(saved, 0), scratch + v.fDnnl));
    normed = at(scratch, v.fNormed);
  }
  float* rows = at(scratch, v.fRows);
  gatherFirstTokens(v.batch, v.seq, v.width, normed, rows);
  auto* y = reinterpret_cast<BFloat16*>(b.y);
  BFloat16* z = v.tanhOut ? at<BFloat16>(scratch, v.fLogits) : y;
  const float* bias = v.bias >= 0 ? b.params + v.bias : nullptr;
  REMAT_RETURN_IF_ERROR(
      v.linear.forward(context, rows, b.params + v.weight, bias, z, saved + v.copies, scratch + v.fDnnl));
  if (v.tanhOut) poolerTanhForward(v.batch * v.outFeatures, z, y);
  return Status::ok();
}

Status backwardHalfClsHead(const DnnlContext& context, const PreparedLayer& prepared, const BackwardBuffers& b) {
  const HalfClsHeadPrep& v = *prepared.halfClsHead;
  if (b.workspace == nullptr || b.extra == nullptr || (v.norm && b.x == nullptr) || (v.tanhOut && b.y == nullptr))
    return Status::internal("cpu: " + prepared.label + ": the head's backward lacks x(l-1), x(l), E or its workspace");
  const Index d = v.width, count = v.batch * v.outFeatures;
  const auto* dy = reinterpret_cast<const BFloat16*>(b.dy);
  if (v.tanhOut) {  // tanh's backward in bfloat16, from its bfloat16 result
    auto* dz = at<BFloat16>(b.workspace, v.bDz);
    poolerTanhBackward(count, dy, reinterpret_cast<const BFloat16*>(b.y), dz);
    dy = dz;
  }
  float *dRows = at(b.workspace, v.bRows), *dFull = at(b.workspace, v.bFull);
  float* gradients = b.paramGrads;
  REMAT_RETURN_IF_ERROR(v.linear.backward(context, nullptr, dy, b.extra + v.copies, dRows, gradients + v.weight,
                                          v.bias >= 0 ? gradients + v.bias : nullptr, b.workspace + v.bDnnl));
  // Without the norm d(x) is the scattered gradient itself; layer 1 without it: only the parameters'.
  scatterFirstTokens(v.batch, v.seq, d, dRows, v.norm || b.dx == nullptr ? dFull : b.dx);
  if (!v.norm) return Status::ok();
  return v.ln.backward(context, b.x, dFull, b.params, at(b.extra, 0), b.dx, gradients, b.workspace + v.bDnnl);
}

}  // namespace remat::cpu
