// ViT's ends on the GPU (docs/memory-model.md 12.2, docs/gpu.md), op for op the CPU's run_vit.cpp.
//
// patch_embedding: conv_proj (kernel = stride = patch) on cuDNN writes NCHW [N, d, h*w] into the
// forward workspace; patchJoin transposes it into the patch rows behind the class token (torch.cat's
// result, also in the workspace) and adds the position table into x(l). With dropout E is the mask.
// The backward sums d(x) over the batch into the position table's and token 0's into the class
// token's gradient, gathers d(patches) back to NCHW in its workspace and runs the conv's backward.
//
// cls_head: LayerNorm over all tokens (E: its statistics and the whole normalised [N, S, d]), token
// 0's rows gathered contiguous, the linear, tanh for BERT's pooler (x(l) kept). Its backward
// scatters d(token 0) into a zero [N, S, d] in the workspace before the LayerNorm's backward.
#include "cuda_vit.hpp"

#include <algorithm>
#include <optional>

#include "cuda_transformer.hpp"
#include "kernels_embedding.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {

struct VitState {
  Index batch = 0, seq = 0, width = 0, outFeatures = 0;
  bool norm = true, tanhOut = false;
  double dropoutP = 0.0;
  float epsilon = 1e-6f;
  std::optional<ConvOp> conv;
  Index convBias = 0, classToken = 0, positions = 0;  // patch_embedding's parameter offsets (floats)
  Index weight = 0, bias = -1;                        // cls_head's
  std::uint64_t lnOut = 0, savedBytes = 0, discardShift = 0;
  std::uint64_t fA = 0, fB = 0, fScratch = 0;  // forward regions (bytes)
  std::uint64_t bA = 0, bB = 0, bScratch = 0;  // backward regions
};

namespace {

constexpr std::uint64_t kAlignBytes = 256;
std::uint64_t floats(Index n) { return static_cast<std::uint64_t>(n) * 4; }
std::uint64_t aligned(std::uint64_t bytes) { return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }
float* at(std::byte* base, std::uint64_t offset) { return reinterpret_cast<float*>(base + offset); }
const float* at(const std::byte* base, std::uint64_t offset) { return reinterpret_cast<const float*>(base + offset); }

// The conv's workspace: what the chain gives past `offset` (policy Chain) or the cap (Profile).
AlgorithmPolicy patchPolicy(const CudaDeviceOptions& options, const LayerNumbers& m, std::uint64_t fwdOffset,
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

kernels::PatchShape patchShape(const VitState& v) { return {v.batch, v.seq, v.width}; }

}  // namespace

Status preparePatchEmbedding(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                             const LayerContext& context, const CudaDeviceOptions& options, LayerState& state) {
  const Shape& in = layer.inputShape;
  if (in.size() != 4 || layer.outputShape.size() != 3) return check.fail("patch_embedding needs an NCHW image");
  auto v = std::make_shared<VitState>();
  v->batch = in[0];
  v->seq = layer.outputShape[1];
  v->width = spec.width;
  v->dropoutP = spec.dropoutP;
  const Index weights = spec.width * in[1] * spec.kernel * spec.kernel;
  v->convBias = weights;
  v->classToken = weights + v->width;
  v->positions = v->classToken + v->width;
  REMAT_RETURN_IF_ERROR(
      check.expectParams(layer.paramCount, static_cast<std::uint64_t>(v->positions + v->seq * v->width)));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  const std::uint64_t tokens = static_cast<std::uint64_t>(v->batch * v->seq * v->width);
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, spec.dropoutP > 0.0 ? tokens : 0));
  auto dims = toDims4(in);
  if (!dims) return check.fail(dims.status().message());
  ConvGeometry g;
  g.input = *dims;
  g.outChannels = static_cast<int>(spec.width);
  g.kernel = g.stride = static_cast<int>(spec.kernel);
  const Index patches = v->batch * (v->seq - 1) * v->width;
  v->fA = 0;                         // the conv's output, NCHW
  v->fB = aligned(floats(patches));  // the concatenation
  v->fScratch = aligned(v->fB + floats(v->batch * v->seq * v->width));
  v->bA = 0;  // d(conv's output), NCHW
  v->bScratch = aligned(floats(patches));
  auto conv =
      ConvOp::create(context.cudnn, g, true, patchPolicy(options, layer.numbers, v->fScratch, v->bScratch), layer.name);
  if (!conv) return conv.status().withContext("gpu: " + state.label);
  if (conv->outputDims().h * conv->outputDims().w != v->seq - 1)
    return check.fail("cuDNN's conv_proj gives " + std::to_string(conv->outputDims().h * conv->outputDims().w) +
                      " patches, the chain says " + std::to_string(v->seq - 1));
  state.requiredFwdWorkspace = v->fScratch + conv->forwardWorkspaceBytes();
  state.requiredBwdWorkspace = v->bScratch + conv->backwardWorkspaceBytes();
  state.algorithms = "conv_proj: " + conv->describe();
  v->conv = std::move(*conv);
  state.vit = std::move(v);
  return Status::ok();
}

Status forwardPatchEmbedding(const LayerState& state, std::size_t l, ForwardMode mode, std::uint64_t seed,
                             const LayerContext& c, const ForwardBuffers& b) {
  const VitState& v = *state.vit;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && v.dropoutP > 0.0 && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": no forward workspace or mask");
  const float* p = b.params;
  float* convOut = at(b.workspace, v.fA);
  REMAT_RETURN_IF_ERROR(v.conv->forward(c.cudnn, b.x, p, p + v.convBias, convOut, b.workspace + v.fScratch));
  REMAT_RETURN_IF_ERROR(kernels::patchJoin(c.stream, patchShape(v), convOut, p + v.classToken, p + v.positions,
                                           at(b.workspace, v.fB), b.y));
  if (v.dropoutP <= 0.0) return Status::ok();
  return kernels::dropoutForward(c.stream, v.batch * v.seq * v.width, v.dropoutP,
                                 rng::streamKey(seed, rng::Purpose::Dropout, l), b.y, b.y,
                                 keep ? reinterpret_cast<std::uint8_t*>(b.extra) : nullptr);
}

Status backwardPatchEmbedding(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const VitState& v = *state.vit;
  if (b.workspace == nullptr || b.x == nullptr || (v.dropoutP > 0.0 && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the backward lacks the image, its mask or its workspace");
  const bool dropped = v.dropoutP > 0.0;
  const auto* mask = dropped ? reinterpret_cast<const std::uint8_t*>(b.extra) : nullptr;
  const float scale = dropped && v.dropoutP < 1.0 ? static_cast<float>(1.0 / (1.0 - v.dropoutP)) : 0.0f;
  float* g = b.paramGrads;
  float* dConv = at(b.workspace, v.bA);
  REMAT_RETURN_IF_ERROR(
      kernels::patchBackward(c.stream, patchShape(v), b.dy, mask, scale, g + v.positions, g + v.classToken, dConv));
  void* scratch = b.workspace + v.bScratch;
  if (b.dx != nullptr) REMAT_RETURN_IF_ERROR(v.conv->backwardData(c.cudnn, dConv, b.params, b.dx, scratch));
  return v.conv->backwardParams(c.cudnn, b.x, dConv, g, g + v.convBias, scratch);
}

Status prepareClsHead(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state) {
  const Shape& in = layer.inputShape;
  if (in.size() != 3) return check.fail("cls_head needs an [N, S, d] input");
  auto v = std::make_shared<VitState>();
  v->batch = in[0];
  v->seq = in[1];
  v->width = in[2];
  v->outFeatures = spec.outFeatures;
  v->norm = spec.norm;
  v->tanhOut = spec.tanhOut;
  v->epsilon = static_cast<float>(spec.epsilon);
  const Index d = v->width, T = v->batch * v->seq, out = v->outFeatures, N = v->batch;
  v->weight = v->norm ? 2 * d : 0;
  v->bias = spec.bias ? v->weight + out * d : -1;
  REMAT_RETURN_IF_ERROR(
      check.expectParams(layer.paramCount, static_cast<std::uint64_t>(v->weight + out * d + (spec.bias ? out : 0))));
  v->lnOut = floats(2 * T);
  v->savedBytes = v->norm ? floats(2 * T) + floats(T * d) : 0;
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, true, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, v->tanhOut, "needs_output"));
  REMAT_RETURN_IF_ERROR(check.expectExtra(layer.numbers.extraBytes, v->savedBytes));
  v->discardShift = aligned(v->savedBytes);
  v->fA = 0;                       // token 0's rows, contiguous
  v->fB = aligned(floats(N * d));  // the linear's output before tanh
  state.requiredFwdWorkspace = v->discardShift + v->fB + floats(N * out);
  v->bA = 0;                                     // token 0's rows, d(the linear's output), d(rows)
  v->bB = aligned(floats(2 * N * d + N * out));  // d(token 0) scattered into a zero [N, S, d]
  state.requiredBwdWorkspace = v->bB + floats(T * d);
  state.vit = std::move(v);
  return Status::ok();
}

namespace {

// Token 0 of each sample: rows n * S of [N, S, d], contiguous.
Status gatherFirstTokens(const VitState& v, cudaStream_t stream, const float* x, float* rows) {
  return kernels::copyOrAddRows(stream, v.batch, v.width, x, v.seq * v.width, rows, v.width, false);
}

}  // namespace

Status forwardClsHead(const LayerState& state, ForwardMode mode, const LayerContext& c, const ForwardBuffers& b) {
  const VitState& v = *state.vit;
  const bool keep = mode == ForwardMode::Keep;
  if (b.workspace == nullptr || (keep && v.norm && b.extra == nullptr))
    return Status::internal("gpu: " + state.label + ": the head's forward lacks its workspace or E");
  std::byte* saved = keep ? b.extra : b.workspace;
  std::byte* scratch = b.workspace + (keep ? 0 : v.discardShift);
  const Index T = v.batch * v.seq, count = v.batch * v.outFeatures;
  const float* normed = b.x;
  if (v.norm) {
    REMAT_RETURN_IF_ERROR(
        kernels::layerNormForward(c.stream, T, v.width, v.epsilon, b.x, b.params, at(saved, v.lnOut), at(saved, 0)));
    normed = at(saved, v.lnOut);
  }
  float* rows = at(scratch, v.fA);
  REMAT_RETURN_IF_ERROR(gatherFirstTokens(v, c.stream, normed, rows));
  float* z = v.tanhOut ? at(scratch, v.fB) : b.y;
  RowMajorGemm g;
  g.transB = true;
  g.m = v.batch, g.n = v.outFeatures, g.k = v.width, g.lda = v.width, g.ldb = v.width, g.ldc = v.outFeatures;
  REMAT_RETURN_IF_ERROR(gemm(c, g, rows, b.params + v.weight, z, "cls_head linear"));
  if (v.bias >= 0) REMAT_RETURN_IF_ERROR(kernels::addRowBias(c.stream, v.batch, v.outFeatures, b.params + v.bias, z));
  if (!v.tanhOut) return Status::ok();
  return kernels::pointwiseForward(c.stream, kernels::Pointwise::Tanh, count, z, b.y);
}

Status backwardClsHead(const LayerState& state, const LayerContext& c, const BackwardBuffers& b) {
  const VitState& v = *state.vit;
  if (b.workspace == nullptr || b.x == nullptr || (v.norm && b.extra == nullptr) || (v.tanhOut && b.y == nullptr))
    return Status::internal("gpu: " + state.label + ": the head's backward lacks x(l-1), x(l), E or its workspace");
  const Index d = v.width, N = v.batch, out = v.outFeatures, count = N * out;
  float *rows = at(b.workspace, v.bA), *dz = rows + N * d, *dRows = dz + count;
  float* dFull = at(b.workspace, v.bB);
  const float* normed = v.norm ? at(b.extra, v.lnOut) : b.x;
  REMAT_RETURN_IF_ERROR(gatherFirstTokens(v, c.stream, normed, rows));
  const float* dy = b.dy;
  if (v.tanhOut) {  // tanh's backward from its result
    REMAT_RETURN_IF_ERROR(kernels::pointwiseBackward(c.stream, kernels::Pointwise::Tanh, count, b.y, b.dy, dz, false));
    dy = dz;
  }
  float* target = v.norm || b.dx == nullptr ? dFull : b.dx;  // without the norm d(x) is the scattered gradient
  REMAT_CUDA_CHECK(cudaMemsetAsync(target, 0, floats(N * v.seq * d), c.stream));
  RowMajorGemm data;  // d(rows) = dy W
  data.m = N, data.n = d, data.k = out, data.lda = out, data.ldb = d, data.ldc = d;
  REMAT_RETURN_IF_ERROR(gemm(c, data, dy, b.params + v.weight, dRows, "cls_head linear backward data"));
  RowMajorGemm weights;  // dW += dy^T rows
  weights.transA = true;
  weights.m = out, weights.n = d, weights.k = N, weights.lda = out, weights.ldb = d, weights.ldc = d;
  weights.beta = 1.0f;
  REMAT_RETURN_IF_ERROR(gemm(c, weights, dy, rows, b.paramGrads + v.weight, "cls_head linear backward weights"));
  if (v.bias >= 0) REMAT_RETURN_IF_ERROR(kernels::accumulateRowBiasGrad(c.stream, N, out, dy, b.paramGrads + v.bias));
  REMAT_RETURN_IF_ERROR(kernels::copyOrAddRows(c.stream, N, d, dRows, d, target, v.seq * d, false));
  if (!v.norm) return Status::ok();
  return kernels::layerNormBackward(c.stream, N * v.seq, d, b.x, dFull, b.params, at(b.extra, 0), b.dx, b.paramGrads);
}

}  // namespace remat::gpu
