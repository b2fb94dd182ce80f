// The transformer kinds under a mixed precision (docs/memory-model.md 12.10): what PyTorch 1.13's CPU
// autocast runs in which dtype, op by op, and so what autograd saves. autocast_mode.cpp's CPU lists:
// linear, matmul, bmm, baddbmm and conv2d are lower_precision_fp (half inputs, half output, the
// weight's half copy saved); cross_entropy_loss and nll_loss are fp32; embedding, layer_norm, softmax,
// log_softmax, gelu, dropout, masked_fill and the scalar mul are on no list and run in their input's
// dtype; the residual add and cat promote (float32 + half is float32). So the residual stream stays
// float32 and every layer norm reads a float32 input; only the linears, the attention's matmuls,
// softmax and GELU between them are half.
#include "transformer_mixed.hpp"

#include <algorithm>

#include "checked_sum.hpp"

namespace remat::detail {
namespace {

constexpr std::uint64_t kF32 = 4;

std::uint64_t maskBytes(double p) { return p > 0.0 ? 1 : 0; }

// GPT-2 / BERT / ViT layer: x(l-1) and x(l) float32; qkv, attention, out-projection, fc, GELU and
// proj half; both norms float32 (their inputs are the float32 residual stream).
Status mixBlock(ChainLayer& layer, const LayerSpec& spec, std::uint64_t s) {
  const Shape& in = layer.inputShape;
  const std::uint64_t n = u(in[0]), seq = u(in[1]), d = u(in[2]), h = u(spec.heads), hidden = u(spec.hidden);
  const std::uint64_t tokens = n * seq, mask = maskBytes(spec.dropoutP);
  CheckedSum probs, fwdWork, attnGrad, mlpGrad;
  NamedSum extra;
  probs.add({n, h, seq, seq});
  extra.add("norms: mean, rstd", {2, 2, tokens, 4});
  // Pre-norm: ln_1 keeps x(l-1) (in = yes) and ln_2 keeps h1; post-norm: both norms keep their
  // float32 inputs, and the qkv linear saves its half cast of x(l-1) (in = no).
  extra.add(spec.preNorm ? "ln_2's input h1 (float32)" : "norms' inputs (float32)",
            {spec.preNorm ? 1u : 2u, tokens, d, kF32});
  extra.add("attention: qkv's input (half cast), out-projection's input", {2, tokens, d, s});
  extra.add("MLP: fc's input (half cast), GELU's input and output", {tokens, d, s})
      .add("MLP: fc's input (half cast), GELU's input and output", {2, tokens, hidden, s});
  extra.add("residual dropout masks", {2, tokens, d, mask});
  if (spec.fusedAttention) {
    extra.add("attention (fused): q, k, v, output, log-sum-exp", {4, tokens, d, s})
        .add("attention (fused): q, k, v, output, log-sum-exp", {n, h, seq, 4});
    attnGrad.add({4, tokens, d, s});
  } else {  // softmax follows its half input on the CPU: half probabilities
    extra.add("attention (math): q, k, v copies", {3, tokens, d, s})
        .add("attention (math): probabilities [N, h, S, S]", {probs.value(), s});
    if (spec.dropoutP > 0.0)
      extra.add("attention (math): dropout mask, dropped probabilities", {probs.value(), s + mask});
    fwdWork.add({3, tokens, d, s}).add({2, probs.value(), s});
    attnGrad.add({2, probs.value(), s}).add({3, tokens, d, s});
  }
  extra.add("autocast: the weights' half copies", {4, d, d, s})
      .add("autocast: the weights' half copies", {2, d, hidden, s});
  fwdWork.add({tokens, d, kF32});  // a norm's float32 output beside its half cast
  mlpGrad.add({2, tokens, hidden, s});
  // The gradient cast at the dtype boundaries (a sublayer's half d(output), its input's float32
  // d), and the largest linear's half weight gradient (fc: d x hidden + hidden) before its float32 cast.
  CheckedSum boundary;
  boundary.add({tokens, d, s}).add({tokens, d, kF32}).add({d, hidden, s}).add({hidden, s});
  REMAT_RETURN_IF_ERROR(checkedNumbers({&probs, &extra.sum(), &fwdWork, &attnGrad, &mlpGrad, &boundary},
                                       "the block's saved tensors under autocast"));
  extra.writeTo(layer);
  layer.numbers.needsInput = spec.preNorm;
  layer.numbers.fwdWorkspaceBytes = fwdWork.value();
  layer.numbers.bwdWorkspaceBytes = std::max(attnGrad.value(), mlpGrad.value()) + boundary.value();
  return Status::ok();
}

// ln_f (float32), the projection in half (the table's half copy saved), cross entropy in float32:
// autocast casts the half logits to float32 and log_softmax's float32 result is x(n), as in fp32.
Status mixLmHead(ChainLayer& layer, const LayerSpec& spec, std::uint64_t s) {
  const Shape& in = layer.inputShape;
  const std::uint64_t tokens = u(in[0]) * u(in[1]), d = u(in[2]), vocab = u(spec.vocab);
  NamedSum extra;
  CheckedSum work, grad;
  if (spec.norm) extra.add("ln_f: mean, rstd", {2, tokens, 4});
  extra.add("the projection's input (half cast)", {tokens, d, s});
  extra.add("autocast: the weights' half copies", {vocab, d, s});
  work.add({tokens, vocab, s}).add({tokens, vocab, kF32});  // the half logits and their float32 cast
  if (spec.norm) work.add({tokens, d, kF32});               // ln_f's float32 output beside its cast
  // The backward's steps, the largest (model: beside d(n), G(n) and d(n-1)): log_softmax's float32
  // d(logits); then (d(n) and x(n) freed) the projection's backward from its half cast, writing
  // d(its input) and the table's half gradient; then d(its input)'s float32 cast.
  CheckedSum mm, cast;
  grad.add({tokens, vocab, kF32});
  mm.add({tokens, vocab, s}).add({tokens, d, s}).add({vocab, d, s});
  cast.add({tokens, d, kF32 + s}).add({vocab, d, s});
  REMAT_RETURN_IF_ERROR(checkedNumbers({&extra.sum(), &work, &grad, &mm, &cast}, "the head's logits under autocast"));
  extra.writeTo(layer);
  layer.numbers.needsInput = spec.norm;  // ln_f keeps x(l-1); without it the linear saves its cast
  layer.numbers.fwdWorkspaceBytes = work.value();
  layer.numbers.bwdWorkspaceBytes = std::max({grad.value(), mm.value(), cast.value()});
  return Status::ok();
}

// conv_proj in half (the image's half cast and the kernel's half copy saved); cat with the float32
// class token promotes: the tokens and x(l) are float32.
Status mixPatchEmbedding(ChainLayer& layer, const LayerSpec& spec, std::uint64_t s) {
  const Shape& in = layer.inputShape;
  const std::uint64_t n = u(in[0]), c = u(in[1]), k = u(spec.kernel), d = u(spec.width);
  const std::uint64_t patches = (u(in[2]) / k) * (u(in[3]) / k), seq = patches + 1;
  NamedSum extra;
  CheckedSum work, grad;
  extra.add("autocast: the input's cast copy", {n, c, u(in[2]), u(in[3]), s});
  extra.add("autocast: the weights' half copies", {d, c, k, k, s});
  extra.add("dropout mask", {n, seq, d, maskBytes(spec.dropoutP)});
  work.add({n, patches, d, s}).add({n, seq, d, kF32});            // the conv's half output, the float32 concatenation
  grad.add({n, patches, d, s}).add({d, c, k, k, s}).add({d, s});  // d(conv output) in half; the half gradients
  REMAT_RETURN_IF_ERROR(checkedNumbers({&extra.sum(), &work, &grad}, "the patch embedding under autocast"));
  extra.writeTo(layer);
  layer.numbers.needsInput = false;  // the conv saves the image's half cast instead
  layer.numbers.fwdWorkspaceBytes = work.value();
  layer.numbers.bwdWorkspaceBytes = grad.value();
  return Status::ok();
}

// LayerNorm in float32; the linear casts token 0 to half and saves that cast, not the view of the
// whole normalised tensor (which is now forward scratch); the logits (and tanh) are half.
Status mixClsHead(ChainLayer& layer, const LayerSpec& spec, std::uint64_t s) {
  const Shape& in = layer.inputShape;
  const std::uint64_t n = u(in[0]), tokens = n * u(in[1]), d = u(in[2]), outs = u(spec.outFeatures);
  NamedSum extra;
  CheckedSum work, grad;
  if (spec.norm) extra.add("LayerNorm: mean, rstd", {2, tokens, 4});
  extra.add("the linear's input: token 0's half cast", {n, d, s});
  extra.add("autocast: the weights' half copies", {d, outs, s});
  if (spec.norm) work.add({tokens, d, kF32});  // the normalised tokens, until the cast of token 0
  if (spec.tanhOut) work.add({n, outs, s});
  grad.add({n, d, kF32 + s}).add({d, outs, s}).add({outs, s});  // d(token 0) half and float32; half gradients
  REMAT_RETURN_IF_ERROR(checkedNumbers({&extra.sum(), &work, &grad}, "the head under autocast"));
  extra.writeTo(layer);
  layer.numbers.outBytes = n * outs * s;  // half logits
  layer.numbers.needsInput = spec.norm;
  layer.numbers.fwdWorkspaceBytes = work.value();
  layer.numbers.bwdWorkspaceBytes = grad.value();
  return Status::ok();
}

}  // namespace

bool hasTransformerMixedRule(LayerKind kind) {
  return kind == LayerKind::TokenEmbedding || kind == LayerKind::TransformerBlock || kind == LayerKind::LmHead ||
         kind == LayerKind::PatchEmbedding || kind == LayerKind::ClsHead;
}

Result<DType> mixTransformerLayer(ChainLayer& layer, const LayerSpec& spec, DType half) {
  const std::uint64_t s = dtypeBytes(half);
  Status status = Status::ok();
  DType output = DType::Float32;
  switch (layer.kind) {
    case LayerKind::TokenEmbedding:  // embedding, add, LayerNorm, dropout: float32 throughout
      return DType::Float32;
    case LayerKind::TransformerBlock: status = mixBlock(layer, spec, s); break;
    case LayerKind::LmHead: status = mixLmHead(layer, spec, s); break;
    case LayerKind::PatchEmbedding: status = mixPatchEmbedding(layer, spec, s); break;
    case LayerKind::ClsHead:
      status = mixClsHead(layer, spec, s);
      output = half;
      break;
    default: return Status::internal("no transformer mixed-precision rule for this kind");
  }
  if (!status.isOk()) return status;
  if (spec.hasMeasuredWorkspace) {  // a device's measured (or fitted) scratch stands, as in float32 (chain.cpp)
    layer.numbers.fwdWorkspaceBytes = spec.numbers.fwdWorkspaceBytes;
    layer.numbers.bwdWorkspaceBytes = spec.numbers.bwdWorkspaceBytes;
  }
  return output;
}

std::uint64_t transformerWeightCopyBytes(const ChainLayer& layer) {
  for (const SavedPart& part : layer.extraParts)
    if (part.name == "autocast: the weights' half copies") return part.bytes;
  return 0;
}

}  // namespace remat::detail
