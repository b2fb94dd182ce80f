// The GPU's bfloat16 layout of the transformer kinds under bf16-mixed (cuda_transformer_half_layout.hpp).
// Each layout is written out region by region from the CPU's bfloat16 runners, not from the model's
// sums (transformer_mixed.cpp), so checking one against the other proves they agree.
#include "cuda_transformer_half_layout.hpp"

#include "cuda_half.hpp"
#include "cuda_transformer_ends.hpp"

namespace remat::gpu {
namespace {

constexpr std::uint64_t kHalf = 2;   // bfloat16
constexpr std::uint64_t kFloat = 4;  // float32

std::uint64_t u(Index n) { return static_cast<std::uint64_t>(n); }

// Regions packed back to back, as the model sums E (the workspaces align theirs).
struct Packed {
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    end += bytes;
    return end - bytes;
  }
};

std::uint64_t blockParams(Index d, Index hidden) {
  return u(2 * d + 3 * d * d + 3 * d + d * d + d + 2 * d + hidden * d + hidden + d * hidden + d);
}

// The attention's tensors after the MLP's: fused keeps qkv's bfloat16 output, the attention's
// output and the float32 log-sum-exp; math the q, k, v copies and the bfloat16 probabilities (and,
// with dropout, the dropped probabilities and their mask).
void layOutAttention(HalfBlockLayout& t, Packed& e, const Shape& in, const LayerSpec& spec) {
  const std::uint64_t T = u(in[0] * in[1]), d = u(in[2]), rows = u(in[0] * spec.heads * in[1]);
  const std::uint64_t scores = rows * u(in[1]);
  if (spec.fusedAttention) {
    t.qkvOut = e.add(3 * T * d * kHalf);
    t.attnOut = e.add(T * d * kHalf);
    t.lse = e.add(rows * kFloat);
    return;
  }
  t.q = e.add(T * d * kHalf);
  t.k = e.add(T * d * kHalf);
  t.v = e.add(T * d * kHalf);
  t.probs = e.add(scores * kHalf);
  if (spec.dropoutP > 0.0) {
    t.dropped = e.add(scores * kHalf);
    t.attnMask = e.add(scores);
  }
}

Status checkBlock(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check) {
  const Shape& in = layer.inputShape;
  if (in.size() != 3 || spec.heads <= 0 || in[2] % spec.heads != 0)
    return check.fail("transformer_block needs an [N, S, d] input with d a multiple of the heads");
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, blockParams(in[2], spec.hidden)));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, spec.preNorm, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  return check.expectExtra(layer.numbers.extraBytes, halfBlockLayout(in, spec).savedBytes);
}

Status checkLmHead(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check) {
  const Shape& in = layer.inputShape;
  if (in.size() != 3) return check.fail("lm_head needs an [N, S, d] input");
  if (spec.tied) {
    const ChainLayer& first = chain.layers.front();
    const LayerSpec& table = chain.spec.layers[first.specIndex];
    if (first.kind != LayerKind::TokenEmbedding || table.vocab != spec.vocab || table.width != in[2])
      return check.fail("tied: layer 1 must be a token_embedding of vocabulary " + std::to_string(spec.vocab) +
                        " and width " + std::to_string(in[2]) + " (the head's weight is its table)");
  }
  const std::uint64_t d = u(in[2]);
  REMAT_RETURN_IF_ERROR(
      check.expectParams(layer.paramCount, (spec.norm ? 2 * d : 0) + (spec.tied ? 0 : u(spec.vocab) * d)));
  // ln_f keeps x(l-1); without it the projection saves its cast instead.
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, spec.norm, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, true, "needs_output"));
  return check.expectExtra(layer.numbers.extraBytes, halfLmHeadLayout(in, spec).savedBytes);
}

Status checkClsHead(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check) {
  const Shape& in = layer.inputShape;
  if (in.size() != 3) return check.fail("cls_head needs an [N, S, d] input");
  const std::uint64_t d = u(in[2]), outs = u(spec.outFeatures);
  REMAT_RETURN_IF_ERROR(
      check.expectParams(layer.paramCount, (spec.norm ? 2 * d : 0) + outs * d + (spec.bias ? outs : 0)));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, spec.norm, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, spec.tanhOut, "needs_output"));
  return check.expectExtra(layer.numbers.extraBytes, halfClsHeadLayout(in, spec).savedBytes);
}

Status checkPatch(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check) {
  const Shape& in = layer.inputShape;
  if (in.size() != 4 || spec.kernel <= 0 || layer.outputShape.size() != 3)
    return check.fail("patch_embedding needs an [N, C, H, W] image and makes [N, S, d] tokens");
  const std::uint64_t d = u(spec.width), seq = u(layer.outputShape[1]);
  const std::uint64_t weights = d * u(in[1] * spec.kernel * spec.kernel);
  // conv_proj's weight and bias, the class token, the position table
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, weights + d + d + seq * d));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, false, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  return check.expectExtra(layer.numbers.extraBytes, halfPatchLayout(in, spec).savedBytes);
}

}  // namespace

HalfBlockLayout halfBlockLayout(const Shape& in, const LayerSpec& spec) {
  const std::uint64_t T = u(in[0] * in[1]), d = u(in[2]), H = u(spec.hidden);
  HalfBlockLayout t;
  Packed e;
  t.stats1 = e.add(2 * T * kFloat);
  t.stats2 = e.add(2 * T * kFloat);
  t.h1 = e.add(T * d * kFloat);
  if (!spec.preNorm) t.s2 = e.add(T * d * kFloat);
  t.qkvCast = e.add(T * d * kHalf);  // pre-norm: ln_1's output's cast; post-norm: x(l-1)'s
  t.qkvCopy = e.add(3 * d * d * kHalf);
  t.merged = e.add(T * d * kHalf);
  t.projCopy = e.add(d * d * kHalf);
  t.fc1Cast = e.add(T * d * kHalf);
  t.fc1Copy = e.add(H * d * kHalf);
  t.fc = e.add(T * H * kHalf);
  t.gelu = e.add(T * H * kHalf);
  t.fc2Copy = e.add(d * H * kHalf);
  if (spec.dropoutP > 0.0) {  // one byte per element
    t.mask1 = e.add(T * d);
    t.mask2 = e.add(T * d);
  }
  layOutAttention(t, e, in, spec);
  t.savedBytes = e.end;
  return t;
}

HalfHeadLayout halfLmHeadLayout(const Shape& in, const LayerSpec& spec) {
  const std::uint64_t T = u(in[0] * in[1]), d = u(in[2]);
  HalfHeadLayout h;
  Packed e;
  h.stats = e.add(spec.norm ? 2 * T * kFloat : 0);
  h.inputCast = e.add(T * d * kHalf);
  h.weightCopy = e.add(u(spec.vocab) * d * kHalf);  // the table's copy when tied
  h.savedBytes = e.end;
  return h;
}

HalfHeadLayout halfClsHeadLayout(const Shape& in, const LayerSpec& spec) {
  const std::uint64_t T = u(in[0] * in[1]), d = u(in[2]);
  HalfHeadLayout h;
  Packed e;
  h.stats = e.add(spec.norm ? 2 * T * kFloat : 0);
  h.inputCast = e.add(u(in[0]) * d * kHalf);  // token 0's rows only
  h.weightCopy = e.add(u(spec.outFeatures) * d * kHalf);
  h.savedBytes = e.end;
  return h;
}

HalfPatchLayout halfPatchLayout(const Shape& in, const LayerSpec& spec) {
  const std::uint64_t d = u(spec.width), k = u(spec.kernel);
  const std::uint64_t seq = (u(in[2]) / k) * (u(in[3]) / k) + 1;
  HalfPatchLayout p;
  Packed e;
  p.imageCast = e.add(u(in[0] * in[1] * in[2] * in[3]) * kHalf);
  p.weightCopy = e.add(d * u(in[1]) * k * k * kHalf);
  p.mask = e.add(spec.dropoutP > 0.0 ? u(in[0]) * seq * d : 0);
  p.savedBytes = e.end;
  return p;
}

bool hasHalfTransformerLayout(LayerKind kind) {
  return kind == LayerKind::TokenEmbedding || kind == LayerKind::TransformerBlock || kind == LayerKind::LmHead ||
         kind == LayerKind::PatchEmbedding || kind == LayerKind::ClsHead;
}

Status checkHalfTransformerLayer(const Chain& chain, std::size_t l, bool inputHalf, const LayerChecks& check) {
  const ChainLayer& layer = chain.layers[l - 1];
  const LayerSpec& spec = chain.spec.layers[layer.specIndex];
  if (inputHalf)
    return check.fail("precision " + std::string(precisionName(chain.step.precision)) + ": " +
                      std::string(kindName(layer.kind)) + " reads a " + halfTypeName(halfTypeOf(chain.step.precision)) +
                      " input; the GPU's layout (as the CPU's and the model's) has it read the "
                      "float32 residual stream or image");
  switch (layer.kind) {
    case LayerKind::TokenEmbedding: {  // float32 throughout under autocast: float32's own layout
      LayerState scratch;
      return prepareTokenEmbedding(layer, spec, check, l, scratch);
    }
    case LayerKind::TransformerBlock: return checkBlock(layer, spec, check);
    case LayerKind::LmHead: return checkLmHead(chain, layer, spec, check);
    case LayerKind::ClsHead: return checkClsHead(layer, spec, check);
    case LayerKind::PatchEmbedding: return checkPatch(layer, spec, check);
    default: return check.fail("no bfloat16 transformer layout for the " + std::string(kindName(layer.kind)) + " kind");
  }
}

}  // namespace remat::gpu
