// patch_embedding under bf16-mixed on the GPU (cuda_patch_half.hpp).
#include "cuda_patch_half.hpp"

#include "cuda_linear_half.hpp"
#include "cuda_transformer_half_layout.hpp"
#include "kernels_embedding.hpp"
#include "kernels_patch_half.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::gpu {

struct HalfPatchState {
  kernels::PatchGrid grid;
  Index seq = 0, width = 0;  // S = P + 1, d
  double dropoutP = 0.0;
  Index convBias = 0, classToken = 0, positions = 0;  // parameter offsets (floats); the kernel at 0
  HalfPatchLayout e;
  std::uint64_t discardShift = 0, fRows = 0, fPatches = 0, fConv = 0, fJoined = 0;  // forward workspace
  std::uint64_t bConv = 0, bPatches = 0, bRows = 0, bRowsGrad = 0, bWeight = 0;     // backward workspace
};

namespace {

using kernels::Bf16;

constexpr std::uint64_t kAlignBytes = 256;

struct Regions {  // consecutive regions at 256-byte boundaries
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    const std::uint64_t start = (end + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    end = start + bytes;
    return start;
  }
};

template <typename T, typename Byte>
T* at(Byte* base, std::uint64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

std::uint64_t u(Index n) { return static_cast<std::uint64_t>(n); }

Index patchCount(const HalfPatchState& v) { return v.grid.batch * v.grid.patches(); }  // N*P

Linear convAsLinear(const HalfPatchState& v) { return Linear{patchCount(v), v.grid.rowLength(), v.width, "conv_proj"}; }

void layOut(HalfPatchState& v, LayerState& state) {
  const std::uint64_t rows = u(patchCount(v)), rowLength = u(v.grid.rowLength()), d = u(v.width);
  v.discardShift = (v.e.savedBytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  Regions f, b;
  v.fRows = f.add(rows * rowLength * 2);
  v.fPatches = f.add(rows * d * 2);
  v.fConv = f.add(rows * d * 4);
  v.fJoined = f.add(u(v.grid.batch * v.seq) * d * 4);
  state.requiredFwdWorkspace = v.discardShift + f.end;
  v.bConv = b.add(rows * d * 4);
  v.bPatches = b.add(rows * d * 2);
  v.bRows = b.add(rows * rowLength * 2);
  v.bRowsGrad = b.add(rows * rowLength * 2);
  v.bWeight = b.add(d * rowLength * 2);
  state.requiredBwdWorkspace = b.end;
}

}  // namespace

Status prepareHalfPatchEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                                 LayerState& state) {
  const Shape& in = layer.inputShape;
  auto v = std::make_shared<HalfPatchState>();
  v->grid = kernels::PatchGrid{in[0], in[1], in[2], in[3], spec.kernel};
  v->seq = layer.outputShape[1];
  v->width = spec.width;
  v->dropoutP = spec.dropoutP;
  if (v->grid.patches() + 1 != v->seq)
    return check.fail("conv_proj gives " + std::to_string(v->grid.patches()) + " patches, the chain says " +
                      std::to_string(v->seq - 1));
  v->convBias = v->width * v->grid.rowLength();
  v->classToken = v->convBias + v->width;
  v->positions = v->classToken + v->width;
  v->e = halfPatchLayout(in, spec);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, v->e.savedBytes));
  layOut(*v, state);
  state.halfPatch = std::move(v);
  return Status::ok();
}

Status forwardHalfPatchEmbedding(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                                 const LayerContext& c, const ForwardBuffers& b) {
  const HalfPatchState& v = *state.halfPatch;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the patch embedding's forward lacks its workspace or E");
  std::byte* saved = keep ? b.extra : b.workspace;
  std::byte* scratch = b.workspace + (keep ? 0 : v.discardShift);
  const float* p = b.params;
  const kernels::PatchGrid& g = v.grid;
  Bf16 *image = at<Bf16>(saved, v.e.imageCast), *copy = at<Bf16>(saved, v.e.weightCopy);
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, g.batch * g.channels * g.height * g.width, b.x, image));
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, v.width * g.rowLength(), p, copy));
  Bf16 *rows = at<Bf16>(scratch, v.fRows), *patches = at<Bf16>(scratch, v.fPatches);
  REMAT_RETURN_IF_ERROR(kernels::unfoldPatchesHalf(c.stream, g, image, rows));
  REMAT_RETURN_IF_ERROR(halfLinearForward(c, convAsLinear(v), rows, copy, p + v.convBias, patches));
  float* conv = at<float>(scratch, v.fConv);  // the promotion: torch.cat with the float32 class token
  REMAT_RETURN_IF_ERROR(kernels::patchRowsToChannels(c.stream, g.batch, g.patches(), v.width, patches, conv));
  REMAT_RETURN_IF_ERROR(kernels::patchJoin(c.stream, {g.batch, v.seq, v.width}, conv, p + v.classToken, p + v.positions,
                                           at<float>(scratch, v.fJoined), b.y));
  if (v.dropoutP <= 0.0) return Status::ok();
  return kernels::dropoutForward(c.stream, g.batch * v.seq * v.width, v.dropoutP,
                                 rng::streamKey(seed, rng::Purpose::Dropout, l), b.y, b.y,
                                 keep ? at<std::uint8_t>(b.extra, v.e.mask) : nullptr);
}

Status backwardHalfPatchEmbedding(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const HalfPatchState& v = *state.halfPatch;
  if (b.workspace == nullptr || b.extra == nullptr)
    return Status::internal("gpu: " + state.label + ": the patch embedding's backward lacks E or its workspace");
  const kernels::PatchGrid& g = v.grid;
  const bool dropped = v.dropoutP > 0.0;
  const auto* mask = dropped ? at<const std::uint8_t>(b.extra, v.e.mask) : nullptr;
  const float scale = dropped && v.dropoutP < 1.0 ? static_cast<float>(1.0 / (1.0 - v.dropoutP)) : 0.0f;
  float* grads = b.paramGrads;
  float* dConv = at<float>(b.workspace, v.bConv);
  REMAT_RETURN_IF_ERROR(kernels::patchBackward(c.stream, {g.batch, v.seq, v.width}, b.dy, mask, scale,
                                               grads + v.positions, grads + v.classToken, dConv));
  Bf16 *dPatches = at<Bf16>(b.workspace, v.bPatches), *rows = at<Bf16>(b.workspace, v.bRows);
  REMAT_RETURN_IF_ERROR(kernels::channelsToPatchRowsHalf(c.stream, g.batch, g.patches(), v.width, dConv, dPatches));
  REMAT_RETURN_IF_ERROR(kernels::unfoldPatchesHalf(c.stream, g, at<const Bf16>(b.extra, v.e.imageCast), rows));
  Bf16* dRows = b.dx != nullptr ? at<Bf16>(b.workspace, v.bRowsGrad) : nullptr;
  REMAT_RETURN_IF_ERROR(halfLinearBackward(c, convAsLinear(v), rows, dPatches, at<const Bf16>(b.extra, v.e.weightCopy),
                                           dRows, at<Bf16>(b.workspace, v.bWeight), grads, grads + v.convBias));
  return dRows == nullptr ? Status::ok() : kernels::foldPatches(c.stream, g, dRows, b.dx);
}

}  // namespace remat::gpu
