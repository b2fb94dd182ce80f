// Swin's patch embedding, patch merging and head under bf16-mixed on the GPU (cuda_swin_half.hpp):
// the CPU's run_swin_ends_half.cpp op for op, E as cuda_swin_half_layout.hpp's HalfSwinEndLayout.
// swin_embedding: the patch conv (kernel = stride) as ViT's bfloat16 GEMM over the non-overlapping
// patches (kernels_patch_half.cu) from the image's bfloat16 cast and the kernel's copy, both saved;
// its rows [N*h*w][C] are the channels-last stream the norm reads. patch_merging: the 2x2 gather, the
// norm, the reduction from its copy. swin_head: the norm, the average over positions, the head from
// its copy; bfloat16 logits. Each norm on bfloat16 data with float32 weights and statistics.
#include <algorithm>
#include <string>

#include "cuda_linear_half.hpp"
#include "cuda_swin_half.hpp"
#include "cuda_swin_half_layout.hpp"
#include "kernels_half_convnext.hpp"
#include "kernels_patch_half.hpp"
#include "kernels_window_half.hpp"

namespace remat::gpu {

struct HalfSwinEndState {
  LayerKind kind = LayerKind::SwinHead;
  Index batch = 0, height = 0, width = 0, channels = 0;  // x(l-1)'s [N, H, W, C] (the embedding: its output's)
  Index rows = 0, features = 0;                          // the norm's rows and features
  float epsilon = 1e-5f;
  kernels::PatchGrid grid;                 // swin_embedding
  Linear linear;                           // the patch conv as a GEMM, the reduction, the head
  Index normP = 0, weight = 0, bias = -1;  // parameter offsets (floats); bias -1: none
  HalfSwinEndLayout e;
  std::uint64_t discardShift = 0, fRows = 0;  // forward workspace (the embedding's patch rows)
  std::uint64_t bA = 0, bB = 0, bRows = 0, bRowsGrad = 0, bWeight = 0;  // backward workspace
};

namespace {

using kernels::Bf16;

constexpr std::uint64_t kAlignBytes = 256;
std::uint64_t halves(Index n) { return static_cast<std::uint64_t>(n) * 2; }

struct Regions {  // consecutive regions at 256-byte boundaries
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    const std::uint64_t start = (end + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    end = start + bytes;
    return start;
  }
};

template <typename T = Bf16, typename Byte>
T* at(Byte* base, std::uint64_t offset) {
  return reinterpret_cast<T*>(base + offset);
}

Status setEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, HalfSwinEndState& e) {
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  e.batch = out[0], e.height = out[1], e.width = out[2], e.channels = e.features = out[3];
  e.rows = e.batch * e.height * e.width;
  e.grid = kernels::PatchGrid{in[0], in[1], in[2], in[3], spec.kernel};
  if (e.grid.patches() != e.height * e.width)
    return check.fail("the patch conv gives " + std::to_string(e.grid.patches()) + " patches, the chain says " +
                      shapeToString(out));
  e.linear = Linear{e.rows, e.grid.rowLength(), e.channels, "patch conv"};
  e.weight = 0, e.bias = e.channels * e.grid.rowLength(), e.normP = e.bias + e.channels;
  return Status::ok();
}

void setMerging(const ChainLayer& layer, HalfSwinEndState& e) {
  const Shape& in = layer.inputShape;
  e.batch = in[0], e.height = in[1], e.width = in[2], e.channels = in[3];
  e.rows = layer.outputShape[0] * layer.outputShape[1] * layer.outputShape[2];
  e.features = 4 * e.channels;
  e.linear = Linear{e.rows, e.features, 2 * e.channels, "patch_merging reduction"};
  e.weight = 0, e.normP = 2 * e.channels * e.features;  // reduction [2C, 4C] (no bias), then the norm's
}

void setHead(const ChainLayer& layer, const LayerSpec& spec, HalfSwinEndState& e) {
  const Shape& in = layer.inputShape;
  e.batch = in[0], e.height = in[1], e.width = in[2], e.channels = e.features = in[3];
  e.rows = e.batch * e.height * e.width;
  e.linear = Linear{e.batch, e.channels, spec.outFeatures, "head"};
  e.normP = 0, e.weight = 2 * e.channels, e.bias = e.weight + spec.outFeatures * e.channels;
}

void layOut(HalfSwinEndState& e, LayerState& state) {
  const Index count = e.rows * e.features, linearIn = e.linear.rows * e.linear.in;
  e.discardShift = (e.e.savedBytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  const bool embedding = e.kind == LayerKind::SwinEmbedding;
  Regions f, b;
  if (embedding) e.fRows = f.add(halves(linearIn));
  state.requiredFwdWorkspace = e.discardShift + f.end;
  e.bA = b.add(halves(std::max(count, e.linear.rows * e.linear.out)));  // d(norm output) or d(linear output)
  e.bB = b.add(halves(std::max(count, linearIn)));                      // d(norm input) or d(linear input)
  if (embedding) {
    e.bRows = b.add(halves(linearIn));  // the patch rows again (unfolded from the saved cast)
    e.bRowsGrad = b.add(halves(linearIn));
  }
  e.bWeight = b.add(halves(e.linear.out * e.linear.in));
  state.requiredBwdWorkspace = b.end;
}

}  // namespace

Status prepareHalfSwinEnd(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state) {
  auto e = std::make_shared<HalfSwinEndState>();
  e->kind = layer.kind;
  e->epsilon = static_cast<float>(spec.epsilon);
  if (layer.kind == LayerKind::SwinEmbedding) {
    REMAT_RETURN_IF_ERROR(setEmbedding(layer, spec, check, *e));
  } else if (layer.kind == LayerKind::PatchMerging) {
    setMerging(layer, *e);
  } else {
    setHead(layer, spec, *e);
  }
  e->e = halfSwinEndLayout(layer.kind, layer.inputShape, layer.outputShape, spec);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, e->e.savedBytes));
  layOut(*e, state);
  state.halfSwinEnd = std::move(e);
  return Status::ok();
}

namespace {

struct Saved {
  std::byte* saved;
  std::byte* scratch;
};

const float* biasOf(const HalfSwinEndState& e, const float* params) { return e.bias < 0 ? nullptr : params + e.bias; }
float* biasOf(const HalfSwinEndState& e, float* grads) { return e.bias < 0 ? nullptr : grads + e.bias; }

Status normForward(const LayerContext& c, const HalfSwinEndState& e, const Saved& s, const Bf16* x, const float* p,
                   Bf16* y) {
  return kernels::layerNormForwardHalf(c.stream, e.rows, e.features, e.epsilon, x, p + e.normP, y,
                                       at<float>(s.saved, e.e.stats), 1);
}

Status normBackward(const LayerContext& c, const HalfSwinEndState& e, const BackwardBuffers& b, const Bf16* x,
                    const Bf16* dy, Bf16* dx) {
  return kernels::layerNormBackwardHalf(c.stream, e.rows, e.features, x, dy, b.params + e.normP,
                                        at<const float>(b.extra, e.e.stats), dx, b.paramGrads + e.normP, 1, false);
}

Status embeddingForward(const LayerContext& c, const HalfSwinEndState& e, const Saved& s, const ForwardBuffers& b) {
  const kernels::PatchGrid& g = e.grid;
  Bf16 *image = at(s.saved, e.e.cast), *conv = at(s.saved, e.e.a), *rows = at(s.scratch, e.fRows);
  REMAT_RETURN_IF_ERROR(kernels::castToHalf(c.stream, g.batch * g.channels * g.height * g.width, b.x, image));
  REMAT_RETURN_IF_ERROR(kernels::unfoldPatchesHalf(c.stream, g, image, rows));
  REMAT_RETURN_IF_ERROR(
      copyingHalfLinear(c, e.linear, rows, b.params, at(s.saved, e.e.copy), biasOf(e, b.params), conv));
  return normForward(c, e, s, conv, b.params, reinterpret_cast<Bf16*>(b.y));  // the rows are [N, h, w, C]
}

Status mergingForward(const LayerContext& c, const HalfSwinEndState& e, const Saved& s, const ForwardBuffers& b) {
  Bf16 *cat = at(s.saved, e.e.a), *normed = at(s.saved, e.e.b);
  REMAT_RETURN_IF_ERROR(kernels::mergeGatherHalf(c.stream, e.batch, e.height, e.width, e.channels,
                                                 reinterpret_cast<const Bf16*>(b.x), cat));
  REMAT_RETURN_IF_ERROR(normForward(c, e, s, cat, b.params, normed));
  return copyingHalfLinear(c, e.linear, normed, b.params + e.weight, at(s.saved, e.e.copy), nullptr,
                           reinterpret_cast<Bf16*>(b.y));
}

Status headForward(const LayerContext& c, const HalfSwinEndState& e, const Saved& s, const ForwardBuffers& b) {
  Bf16 *normed = at(s.saved, e.e.a), *pooled = at(s.saved, e.e.b);
  REMAT_RETURN_IF_ERROR(normForward(c, e, s, reinterpret_cast<const Bf16*>(b.x), b.params, normed));
  REMAT_RETURN_IF_ERROR(
      kernels::averagePositionsHalf(c.stream, e.batch, e.height * e.width, e.channels, normed, pooled));
  return copyingHalfLinear(c, e.linear, pooled, b.params + e.weight, at(s.saved, e.e.copy), biasOf(e, b.params),
                           reinterpret_cast<Bf16*>(b.y));
}

}  // namespace

Status forwardHalfSwinEnd(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b) {
  const HalfSwinEndState& e = *state.halfSwinEnd;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the forward lacks its workspace or E");
  const Saved s{keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : e.discardShift)};
  if (e.kind == LayerKind::SwinEmbedding) return embeddingForward(c, e, s, b);
  if (e.kind == LayerKind::PatchMerging) return mergingForward(c, e, s, b);
  return headForward(c, e, s, b);
}

namespace {

// The linear's backward from the layer's dy into dIn (bA), its weight gradient through bWeight.
Status linearBackward(const LayerContext& c, const HalfSwinEndState& e, const BackwardBuffers& b, const Bf16* x,
                      const Bf16* dy, Bf16* dIn) {
  return halfLinearBackward(c, e.linear, x, dy, at<const Bf16>(b.extra, e.e.copy), dIn, at(b.workspace, e.bWeight),
                            b.paramGrads + e.weight, biasOf(e, b.paramGrads));
}

Status embeddingBackward(const LayerContext& c, const HalfSwinEndState& e, const BackwardBuffers& b) {
  Bf16 *dConv = at(b.workspace, e.bA), *rows = at(b.workspace, e.bRows);
  REMAT_RETURN_IF_ERROR(
      normBackward(c, e, b, at<const Bf16>(b.extra, e.e.a), reinterpret_cast<const Bf16*>(b.dy), dConv));
  REMAT_RETURN_IF_ERROR(kernels::unfoldPatchesHalf(c.stream, e.grid, at<const Bf16>(b.extra, e.e.cast), rows));
  Bf16* dRows = b.dx != nullptr ? at(b.workspace, e.bRowsGrad) : nullptr;
  REMAT_RETURN_IF_ERROR(linearBackward(c, e, b, rows, dConv, dRows));
  return dRows == nullptr ? Status::ok() : kernels::foldPatches(c.stream, e.grid, dRows, b.dx);
}

Status mergingBackward(const LayerContext& c, const HalfSwinEndState& e, const BackwardBuffers& b) {
  Bf16 *dNormed = at(b.workspace, e.bA), *dCat = b.dx != nullptr ? at(b.workspace, e.bB) : nullptr;
  REMAT_RETURN_IF_ERROR(
      linearBackward(c, e, b, at<const Bf16>(b.extra, e.e.b), reinterpret_cast<const Bf16*>(b.dy), dNormed));
  REMAT_RETURN_IF_ERROR(normBackward(c, e, b, at<const Bf16>(b.extra, e.e.a), dNormed, dCat));
  if (dCat == nullptr) return Status::ok();
  return kernels::mergeScatterHalf(c.stream, e.batch, e.height, e.width, e.channels, dCat,
                                   reinterpret_cast<Bf16*>(b.dx));
}

Status headBackward(const LayerContext& c, const HalfSwinEndState& e, const BackwardBuffers& b) {
  Bf16 *dPooled = at(b.workspace, e.bA), *dMap = at(b.workspace, e.bB);
  REMAT_RETURN_IF_ERROR(
      linearBackward(c, e, b, at<const Bf16>(b.extra, e.e.b), reinterpret_cast<const Bf16*>(b.dy), dPooled));
  REMAT_RETURN_IF_ERROR(
      kernels::averagePositionsBackwardHalf(c.stream, e.batch, e.height * e.width, e.channels, dPooled, dMap));
  return normBackward(c, e, b, reinterpret_cast<const Bf16*>(b.x), dMap, reinterpret_cast<Bf16*>(b.dx));
}

}  // namespace

Status backwardHalfSwinEnd(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const HalfSwinEndState& e = *state.halfSwinEnd;
  const bool needsInput = e.kind == LayerKind::SwinHead;
  if (b.workspace == nullptr || b.extra == nullptr || (needsInput && b.x == nullptr))
    return Status::internal("gpu: " + state.label + ": the backward lacks x(l-1), E or its workspace");
  if (e.kind == LayerKind::SwinEmbedding) return embeddingBackward(c, e, b);
  if (e.kind == LayerKind::PatchMerging) return mergingBackward(c, e, b);
  return headBackward(c, e, b);
}

}  // namespace remat::gpu
