// Swin's patch embedding, patch merging and head on the GPU (docs/memory-model.md 12.6): the CPU's
// run_swin_ends.cpp op for op, with the same E (laid out at the start of a discard-mode workspace).
// Every x(l) is the channels-last stream [N, H, W, C] (the head's [N, out]).
//
// swin_embedding: cuDNN's conv (kernel = stride = patch) over the NCHW image writes NCHW into the
// workspace, transposed into E's [N, h, w, C] (the permuted view LayerNorm normalises; the same
// bytes as PyTorch's conv output), then the norm. E: that and the norm's statistics. Parameters:
// the conv's weight [C, 3, k, k] and bias, the norm's weight and bias.
// patch_merging: E: the statistics, the 2x2 concatenation (the norm's input) and the norm's output
// (the reduction's input). Parameters: reduction [2C, 4C] (no bias), the norm's.
// swin_head: E: the statistics, the normalised map and the pooled [N, C]. Parameters: the norm's,
// then the head's weight [out, C] and bias.
#include <algorithm>
#include <optional>

#include "cuda_swin.hpp"
#include "cuda_transformer.hpp"
#include "kernels_window.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {

struct SwinEndsState {
  Index batch = 0, height = 0, width = 0, channels = 0, rows = 0, outFeatures = 0;
  float epsilon = 1e-5f;
  std::optional<ConvOp> conv;
  Index normP = 0, weight = 0, bias = 0;                                    // parameter offsets (floats)
  std::uint64_t stats = 0, a = 0, b = 0, savedBytes = 0, discardShift = 0;  // E: stats and two tensors
  std::uint64_t fA = 0, fScratch = 0;                                       // forward workspace
  std::uint64_t bA = 0, bB = 0, bScratch = 0;                               // backward workspace
};

namespace {

constexpr std::uint64_t kAlignBytes = 256;
std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }
std::uint64_t aligned(std::uint64_t bytes) { return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }
float* at(std::byte* base, std::uint64_t offset) { return reinterpret_cast<float*>(base + offset); }
const float* at(const std::byte* base, std::uint64_t offset) { return reinterpret_cast<const float*>(base + offset); }

Status checkSaved(const ChainLayer& layer, const LayerChecks& check, bool needsInput, std::uint64_t savedBytes) {
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, needsInput, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  return check.expectExtra(layer.numbers.extraBytes, savedBytes);
}

// E = stats (2 rows), then tensors of aFloats and bFloats; the discard-mode shift after it.
void layOutSaved(SwinEndsState& e, Index aFloats, Index bFloats) {
  e.stats = 0;
  e.a = floats(2 * e.rows);
  e.b = e.a + floats(aFloats);
  e.savedBytes = e.b + floats(bFloats);
  e.discardShift = aligned(e.savedBytes);
}

struct Saved {
  std::byte* saved;
  std::byte* scratch;
};

Result<Saved> savedOf(const LayerState& state, ForwardMode mode, const ForwardBuffers& b) {
  const SwinEndsState& e = *state.swinEnds;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the forward lacks its workspace or E");
  return Saved{keep ? b.extra : b.workspace, b.workspace + (keep ? 0 : e.discardShift)};
}

Status requireBackward(const LayerState& state, const BackwardBuffers& b, bool needsInput) {
  if (b.workspace != nullptr && b.extra != nullptr && (!needsInput || b.x != nullptr)) return Status::ok();
  return Status::internal("gpu: " + state.label + ": the backward lacks x(l-1), E or its workspace");
}

AlgorithmPolicy convPolicy(const CudaDeviceOptions& options, const LayerNumbers& m, std::uint64_t fwdOffset,
                           std::uint64_t bwdOffset) {
  AlgorithmPolicy policy;
  policy.deterministic = options.deterministic;
  policy.allowTf32 = options.allowTf32;
  if (options.workspacePolicy == WorkspacePolicy::Profile) {
    policy.forwardLimitBytes = policy.backwardLimitBytes = options.workspaceCapBytes;
  } else {
    policy.forwardLimitBytes = m.fwdWorkspaceBytes > fwdOffset ? m.fwdWorkspaceBytes - fwdOffset : 0;
    policy.backwardLimitBytes = m.bwdWorkspaceBytes > bwdOffset ? m.bwdWorkspaceBytes - bwdOffset : 0;
  }
  return policy;
}

}  // namespace

Status prepareSwinEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                            const LayerContext& context, const CudaDeviceOptions& options, LayerState& state) {
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  if (in.size() != 4 || out.size() != 4) return check.fail("swin_embedding needs an NCHW image");
  auto e = std::make_shared<SwinEndsState>();
  e->batch = out[0], e->height = out[1], e->width = out[2], e->channels = out[3];
  e->rows = e->batch * e->height * e->width;
  e->epsilon = static_cast<float>(spec.epsilon);
  const Index C = e->channels, weights = C * in[1] * spec.kernel * spec.kernel;
  e->bias = weights;
  e->normP = weights + C;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(e->normP + 2 * C)));
  layOutSaved(*e, e->rows * C, 0);
  REMAT_RETURN_IF_ERROR(checkSaved(layer, check, true, e->savedBytes));
  auto dims = toDims4(in);
  if (!dims) return check.fail(dims.status().message());
  ConvGeometry g;
  g.input = *dims;
  g.outChannels = static_cast<int>(C);
  g.kernel = g.stride = static_cast<int>(spec.kernel);
  e->fA = 0;  // the conv's NCHW output
  e->fScratch = aligned(floats(e->rows * C));
  e->bA = 0;                             // d(conv output) as rows
  e->bB = aligned(floats(e->rows * C));  // the same, NCHW
  e->bScratch = aligned(e->bB + floats(e->rows * C));
  auto conv =
      ConvOp::create(context.cudnn, g, true,
                     convPolicy(options, layer.numbers, e->discardShift + e->fScratch, e->bScratch), layer.name);
  if (!conv) return conv.status().withContext("gpu: " + state.label);
  if (conv->outputDims().h != e->height || conv->outputDims().w != e->width)
    return check.fail("cuDNN's patch conv gives " + std::to_string(conv->outputDims().h) + "x" +
                      std::to_string(conv->outputDims().w) + ", the chain says " + shapeToString(out));
  state.requiredFwdWorkspace = e->discardShift + e->fScratch + conv->forwardWorkspaceBytes();
  state.requiredBwdWorkspace = e->bScratch + conv->backwardWorkspaceBytes();
  state.algorithms = "patch conv: " + conv->describe();
  e->conv = std::move(*conv);
  state.swinEnds = std::move(e);
  return Status::ok();
}

Status forwardSwinEmbedding(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b) {
  const SwinEndsState& e = *state.swinEnds;
  auto s = savedOf(state, mode, b);
  if (!s) return s.status();
  float* nchw = at(s->scratch, e.fA);
  REMAT_RETURN_IF_ERROR(e.conv->forward(c.cudnn, b.x, b.params, b.params + e.bias, nchw, s->scratch + e.fScratch));
  float* conv = at(s->saved, e.a);
  REMAT_RETURN_IF_ERROR(kernels::channelsToRows(c.stream, e.batch, e.channels, e.height * e.width, nchw, conv));
  return kernels::layerNormForward(c.stream, e.rows, e.channels, e.epsilon, conv, b.params + e.normP, b.y,
                                   at(s->saved, e.stats));
}

Status backwardSwinEmbedding(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const SwinEndsState& e = *state.swinEnds;
  REMAT_RETURN_IF_ERROR(requireBackward(state, b, true));
  float* g = b.paramGrads;
  float *dRows = at(b.workspace, e.bA), *dConv = at(b.workspace, e.bB);
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, e.rows, e.channels, at(b.extra, e.a), b.dy,
                                                   b.params + e.normP, at(b.extra, e.stats), dRows, g + e.normP));
  REMAT_RETURN_IF_ERROR(kernels::rowsToChannels(c.stream, e.batch, e.channels, e.height * e.width, dRows, dConv));
  void* scratch = b.workspace + e.bScratch;
  if (b.dx != nullptr) REMAT_RETURN_IF_ERROR(e.conv->backwardData(c.cudnn, dConv, b.params, b.dx, scratch));
  return e.conv->backwardParams(c.cudnn, b.x, dConv, g, g + e.bias, scratch);
}

Status preparePatchMerging(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                           LayerState& state) {
  const Shape& in = layer.inputShape;
  if (in.size() != 4 || layer.outputShape.size() != 4) return check.fail("patch_merging needs an [N, H, W, C] input");
  auto e = std::make_shared<SwinEndsState>();
  e->batch = in[0], e->height = in[1], e->width = in[2], e->channels = in[3];
  e->rows = layer.outputShape[0] * layer.outputShape[1] * layer.outputShape[2];
  e->epsilon = static_cast<float>(spec.epsilon);
  const Index C4 = 4 * e->channels;
  e->weight = 0;
  e->normP = 2 * e->channels * C4;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(e->normP + 2 * C4)));
  layOutSaved(*e, e->rows * C4, e->rows * C4);  // a: the concatenation, b: the norm's output
  REMAT_RETURN_IF_ERROR(checkSaved(layer, check, false, e->savedBytes));
  state.requiredFwdWorkspace = e->discardShift;
  e->bA = 0;                              // d(norm output)
  e->bB = aligned(floats(e->rows * C4));  // d(concatenation)
  state.requiredBwdWorkspace = e->bB + floats(e->rows * C4);
  state.swinEnds = std::move(e);
  return Status::ok();
}

Status forwardPatchMerging(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b) {
  const SwinEndsState& e = *state.swinEnds;
  auto s = savedOf(state, mode, b);
  if (!s) return s.status();
  float *cat = at(s->saved, e.a), *normed = at(s->saved, e.b);
  const Index C4 = 4 * e.channels;
  REMAT_RETURN_IF_ERROR(kernels::mergeGather(c.stream, e.batch, e.height, e.width, e.channels, b.x, cat));
  REMAT_RETURN_IF_ERROR(kernels::layerNormForward(c.stream, e.rows, C4, e.epsilon, cat, b.params + e.normP, normed,
                                                  at(s->saved, e.stats)));
  RowMajorGemm g;  // y = normed W^T, W [2C, 4C], no bias
  g.transB = true;
  g.m = e.rows, g.n = 2 * e.channels, g.k = C4, g.lda = C4, g.ldb = C4, g.ldc = 2 * e.channels;
  return gemm(c, g, normed, b.params + e.weight, b.y, "patch_merging reduction");
}

Status backwardPatchMerging(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const SwinEndsState& e = *state.swinEnds;
  REMAT_RETURN_IF_ERROR(requireBackward(state, b, false));
  float* g = b.paramGrads;
  float *dNormed = at(b.workspace, e.bA), *dCat = at(b.workspace, e.bB);
  const Index C4 = 4 * e.channels, C2 = 2 * e.channels;
  RowMajorGemm data;  // d(normed) = dy W
  data.m = e.rows, data.n = C4, data.k = C2, data.lda = C2, data.ldb = C4, data.ldc = C4;
  REMAT_RETURN_IF_ERROR(gemm(c, data, b.dy, b.params + e.weight, dNormed, "patch_merging reduction backward data"));
  RowMajorGemm weights;  // dW += dy^T normed
  weights.transA = true;
  weights.m = C2, weights.n = C4, weights.k = e.rows, weights.lda = C2, weights.ldb = C4, weights.ldc = C4;
  weights.beta = 1.0f;
  REMAT_RETURN_IF_ERROR(
      gemm(c, weights, b.dy, at(b.extra, e.b), g + e.weight, "patch_merging reduction backward weights"));
  REMAT_RETURN_IF_ERROR(kernels::layerNormBackward(c.stream, e.rows, C4, at(b.extra, e.a), dNormed, b.params + e.normP,
                                                   at(b.extra, e.stats), dCat, g + e.normP));
  if (b.dx == nullptr) return Status::ok();
  return kernels::mergeScatter(c.stream, e.batch, e.height, e.width, e.channels, dCat, b.dx);
}

Status prepareSwinHead(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state) {
  const Shape& in = layer.inputShape;
  if (in.size() != 4) return check.fail("swin_head needs an [N, H, W, C] input");
  auto e = std::make_shared<SwinEndsState>();
  e->batch = in[0], e->height = in[1], e->width = in[2], e->channels = in[3];
  e->rows = e->batch * e->height * e->width;
  e->outFeatures = spec.outFeatures;
  e->epsilon = static_cast<float>(spec.epsilon);
  const Index C = e->channels;
  e->normP = 0;
  e->weight = 2 * C;
  e->bias = e->weight + e->outFeatures * C;
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, static_cast<std::uint64_t>(e->bias + e->outFeatures)));
  layOutSaved(*e, e->rows * C, e->batch * C);  // a: the normalised map, b: the pooled [N, C]
  REMAT_RETURN_IF_ERROR(checkSaved(layer, check, true, e->savedBytes));
  state.requiredFwdWorkspace = e->discardShift;
  e->bA = 0;                              // d(pooled)
  e->bB = aligned(floats(e->batch * C));  // d(normalised map)
  state.requiredBwdWorkspace = e->bB + floats(e->rows * C);
  state.swinEnds = std::move(e);
  return Status::ok();
}

Status forwardSwinHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b) {
  const SwinEndsState& e = *state.swinEnds;
  auto s = savedOf(state, mode, b);
  if (!s) return s.status();
  float *normed = at(s->saved, e.a), *pooled = at(s->saved, e.b);
  REMAT_RETURN_IF_ERROR(kernels::layerNormForward(c.stream, e.rows, e.channels, e.epsilon, b.x, b.params + e.normP,
                                                  normed, at(s->saved, e.stats)));
  REMAT_RETURN_IF_ERROR(kernels::averagePositions(c.stream, e.batch, e.height * e.width, e.channels, normed, pooled));
  return linearForward(c, {e.batch, e.channels, e.outFeatures, "swin_head linear"}, pooled, b.params + e.weight,
                       b.params + e.bias, b.y);
}

Status backwardSwinHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const SwinEndsState& e = *state.swinEnds;
  REMAT_RETURN_IF_ERROR(requireBackward(state, b, true));
  float* g = b.paramGrads;
  float *dPooled = at(b.workspace, e.bA), *dNormed = at(b.workspace, e.bB);
  REMAT_RETURN_IF_ERROR(linearBackward(c, {e.batch, e.channels, e.outFeatures, "swin_head linear"}, at(b.extra, e.b),
                                       b.dy, b.params + e.weight, dPooled, g + e.weight, g + e.bias));
  REMAT_RETURN_IF_ERROR(
      kernels::averagePositionsBackward(c.stream, e.batch, e.height * e.width, e.channels, dPooled, dNormed));
  return kernels::layerNormBackward(c.stream, e.rows, e.channels, b.x, dNormed, b.params + e.normP,
                                    at(b.extra, e.stats), b.dx, g + e.normP);
}

}  // namespace remat::gpu
