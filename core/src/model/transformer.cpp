// The transformer kinds' numbers (docs/memory-model.md section 12): what PyTorch's autograd saves for
// one token embedding, one GPT-2 / BERT / ViT layer, the language-model head with its cross entropy,
// ViT's patch embedding and the classification head, as one chain layer each. Every size is a sum
// of products of the dimensions, summed with overflow checks: S x S attention probabilities pass
// 2^64 bytes long before S reaches the field limit.
#include "transformer.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "checked_sum.hpp"
#include "layers_common.hpp"

namespace remat::detail {
namespace {

Status checkDropout(double p) {
  if (!(p >= 0.0 && p < 1.0)) return Status::invalid("p is " + std::to_string(p) + ", must be in [0, 1)");
  return Status::ok();
}

Status requireTokens(const Shape& input, std::string_view kind) {
  if (input.size() != 3)
    return Status::invalid(std::string(kind) + " needs an [N, S, d] input (the residual stream), got " +
                           shapeToString(input));
  return Status::ok();
}

// A dropout's mask: one byte per element (bool, CUDA's native_dropout), none when p = 0 (PyTorch
// returns the input itself).
std::uint64_t maskElementBytes(double p) { return p > 0.0 ? 1 : 0; }

}  // namespace

// ids [N, S] -> tok[ids] + pos[0..S) (+ seg[0]) (-> LayerNorm) -> dropout.
Status inferTokenEmbedding(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  if (input.size() != 2) return Status::invalid("token_embedding reads token ids [N, S], got " + shapeToString(input));
  REMAT_RETURN_IF_ERROR(checkDropout(spec.dropoutP));
  REMAT_RETURN_IF_ERROR(checkEpsilon(spec.epsilon));
  const std::uint64_t n = u(input[0]), seq = u(input[1]), d = u(spec.width), s = dtypeBytes(dtype);
  if (input[1] > spec.positions)
    return Status::invalid("the sequence length " + std::to_string(seq) + " is longer than the position table (" +
                           "positions " + std::to_string(spec.positions) + ")");
  const std::uint64_t tokens = n * seq;  // both at most 2^31
  CheckedSum params, work;
  NamedSum extra;
  params.add({u(spec.vocab) + u(spec.positions) + u(spec.segments), d});
  if (spec.embeddingNorm) params.add({2, d});
  // The position ids (an int64 arange) the position lookup's backward keeps; BERT's token type ids
  // (a buffer of zeros, expanded: S int64 of storage) likewise.
  extra.add("position ids (int64)", {8, seq});
  if (spec.segments > 0) extra.add("token type ids (int64)", {8, seq});
  if (spec.embeddingNorm)  // mean, rstd; the sum it normalises
    extra.add("LayerNorm: mean, rstd", {8, tokens}).add("LayerNorm: its input", {tokens, d, s});
  extra.add("dropout mask", {tokens, d, maskElementBytes(spec.dropoutP)});
  // The lookups before they are added (an upper bound: the model counts them beside the output).
  work.add({tokens, d, s}).add({seq, d, s});
  if (spec.segments > 0) work.add({tokens, d, s});
  if (!spec.embeddingNorm && spec.dropoutP > 0.0) work.add({tokens, d, s});  // the sum before dropout
  // BERT's norm backward: d(its output) from dropout's backward (p > 0) beside d(its input).
  CheckedSum backwardWork;
  if (spec.embeddingNorm) backwardWork.add({spec.dropoutP > 0.0 ? 2u : 1u, tokens, d, s});
  REMAT_RETURN_IF_ERROR(
      checkedNumbers({&params, &extra.sum(), &work, &backwardWork}, "the embedding's tables and saved tensors"));
  const double flop =
      toD(tokens) * toD(d) * (spec.segments > 0 ? 2.0 : 1.0) + (spec.embeddingNorm ? 5.0 : 0.0) * toD(tokens) * toD(d);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, {input[0], input[1], spec.width}, dtype, params.value(), flop));
  // wte, wpe (BERT: word, position, token type), then the norm's weight and bias.
  out.paramTensors = {u(spec.vocab) * d, u(spec.positions) * d};
  if (spec.segments > 0) out.paramTensors.push_back(u(spec.segments) * d);
  if (spec.embeddingNorm) out.paramTensors.insert(out.paramTensors.end(), {d, d});
  out.numbers.needsInput = true;  // the embedding backward reads the ids (x0, static)
  out.numbers.needsOutput = false;
  extra.writeTo(out);
  out.numbers.fwdWorkspaceBytes = work.value();
  out.numbers.bwdWorkspaceBytes = backwardWork.value();
  return Status::ok();
}

// Pre-norm (GPT-2, ViT): x + drop(proj(merge(attn(split(qkv(ln1(x))))))) then + drop(fc2(gelu(fc1(ln2(.)))));
// post-norm (BERT): ln1(x + drop(attn(..))) then ln2(. + drop(mlp(.))). Both save the same count
// of [N, S, d] and [N, S, hidden] tensors (section 12.2).
Status inferTransformerBlock(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  REMAT_RETURN_IF_ERROR(requireTokens(input, "transformer_block"));
  REMAT_RETURN_IF_ERROR(checkDropout(spec.dropoutP));
  REMAT_RETURN_IF_ERROR(checkEpsilon(spec.epsilon));
  const std::uint64_t n = u(input[0]), seq = u(input[1]), d = u(input[2]), h = u(spec.heads), hidden = u(spec.hidden);
  if (d % h != 0)
    return Status::invalid("heads " + std::to_string(h) + " does not divide the width d = " + std::to_string(d));
  const std::uint64_t s = dtypeBytes(dtype);
  const std::uint64_t tokens = n * seq;
  const std::uint64_t mask = maskElementBytes(spec.dropoutP);
  CheckedSum params, fwdWork, attnGrad, mlpGrad, probs;
  NamedSum extra;
  params.add({4, d, d}).add({2, d, hidden}).add({9, d}).add({hidden});
  probs.add({n, h, seq, seq});  // one [N, heads, S, S] tensor's elements
  // Both norms' mean and rstd (float32) and ln_2's input h1; the inputs of the qkv and out
  // projections; the MLP's fc input, GELU's input and output; the two residual dropouts' masks.
  extra.add("norms: mean, rstd, ln_2's input", {2, 2, tokens, 4})
      .add("norms: mean, rstd, ln_2's input", {tokens, d, s});
  extra.add("attention: qkv's and out-projection's inputs", {2, tokens, d, s});
  extra.add("MLP: fc's input, GELU's input and output", {tokens, d, s})
      .add("MLP: fc's input, GELU's input and output", {2, tokens, hidden, s});
  extra.add("residual dropout masks", {2, tokens, d, mask});
  if (spec.fusedAttention) {
    // SDPA keeps q, k, v (views of the qkv projection: all of it), its output and the [N, heads, S]
    // float32 log-sum-exp; no S x S tensor.
    extra.add("attention (fused): q, k, v, output, log-sum-exp", {4, tokens, d, s})
        .add("attention (fused): q, k, v, output, log-sum-exp", {n, h, seq, 4});
    attnGrad.add({4, tokens, d, s});  // dq, dk, dv and d(output) inside the backward
  } else {
    // Math attention: the contiguous copies of q, k, v the batched matmuls keep, softmax's result,
    // and with dropout its mask and the dropped probabilities PV's matmul keeps.
    extra.add("attention (math): q, k, v copies", {3, tokens, d, s})
        .add("attention (math): probabilities [N, h, S, S]", {probs.value(), s});
    if (spec.dropoutP > 0.0)
      extra.add("attention (math): dropout mask, dropped probabilities", {probs.value(), s + mask});
    fwdWork.add({3, tokens, d, s}).add({2, probs.value(), s});  // qkv, and scores with their scaled copy
    attnGrad.add({2, probs.value(), s}).add({3, tokens, d, s});
  }
  mlpGrad.add({2, tokens, hidden, s});
  REMAT_RETURN_IF_ERROR(checkedNumbers({&params, &probs, &extra.sum(), &fwdWork, &attnGrad, &mlpGrad},
                                       "the block's parameters and saved tensors"));
  const double t = toD(tokens), dd = toD(d);
  const double flop = 2.0 * t * (4.0 * dd * dd + 2.0 * dd * toD(hidden)) + 4.0 * toD(n) * toD(seq) * toD(seq) * dd +
                      5.0 * toD(probs.value()) + 8.0 * t * toD(hidden) + 12.0 * t * dd;
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, input, dtype, params.value(), flop));
  // ln_1, attention's qkv and output projections, ln_2, the MLP's two linears (nanoGPT's Block;
  // BERT's and torchvision's ViT's blocks hold the same tensors, q, k and v apart in BERT's).
  out.paramTensors = {d, d, 3 * d * d, 3 * d, d * d, d, d, d, hidden * d, hidden, d * hidden, d};
  // --grads static: PyTorch's backward makes one node's gradients at a time (a norm's, a linear's
  // weight and bias) and AccumulateGrad frees them before the next node (memory-model.md 11.2): the
  // MLP's first linear unless hidden < 3d, then the packed qkv (BERT's separate q, k and v: less).
  out.largestOpParamCount = std::max({2 * d, 3 * d * d + 3 * d, d * d + d, hidden * d + hidden, d * hidden + d});
  out.numbers.needsInput = true;  // ln1 (pre-norm) or the qkv linear (post-norm) keeps x(l-1)
  out.numbers.needsOutput = false;
  extra.writeTo(out);
  out.numbers.fwdWorkspaceBytes = fwdWork.value();
  out.numbers.bwdWorkspaceBytes = std::max(attnGrad.value(), mlpGrad.value());
  return Status::ok();
}

// x [N, S, d] -> ln_f -> x W^T -> log_softmax: the chain's output is the log-probabilities that
// cross entropy keeps; the logits live only inside the forward.
Status inferLmHead(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  REMAT_RETURN_IF_ERROR(requireTokens(input, "lm_head"));
  REMAT_RETURN_IF_ERROR(checkEpsilon(spec.epsilon));
  const std::uint64_t n = u(input[0]), seq = u(input[1]), d = u(input[2]), vocab = u(spec.vocab);
  const std::uint64_t s = dtypeBytes(dtype), tokens = n * seq;
  CheckedSum params, logits, grad;
  NamedSum extra;
  if (spec.norm) params.add({2, d});
  if (!spec.tied) params.add({vocab, d});
  if (spec.norm) out.paramTensors = {d, d};  // ln_f, then the projection's own table
  if (!spec.tied) out.paramTensors.push_back(vocab * d);
  if (spec.norm)  // mean, rstd; the normalised x the linear keeps
    extra.add("ln_f: mean, rstd", {2, tokens, 4}).add("the projection's input (ln_f's output)", {tokens, d, s});
  logits.add({tokens, vocab, s});
  grad.add({tokens, vocab, s}).add({tokens, d, s});  // d(logits), then d(ln_f's output)
  REMAT_RETURN_IF_ERROR(checkedNumbers({&params, &extra.sum(), &logits, &grad}, "the head's logits"));
  const double t = toD(tokens);
  const double flop = 2.0 * t * toD(d) * toD(vocab) + 4.0 * t * toD(vocab) + (spec.norm ? 5.0 * t * toD(d) : 0.0);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, {input[0], input[1], spec.vocab}, dtype, params.value(), flop));
  out.numbers.needsInput = true;
  out.numbers.needsOutput = true;  // log_softmax's and nll_loss's backward read the log-probabilities
  extra.writeTo(out);
  out.numbers.fwdWorkspaceBytes = logits.value();
  out.numbers.bwdWorkspaceBytes = grad.value();
  // Tied: the head's gradient of the table (vocab x d) waits in autograd's input buffer of the
  // table's AccumulateGrad until the embedding's backward brings the other half (PyTorch 1.13,
  // measured: memory-model.md 12.5).
  if (spec.tied) out.numbers.sharedGradBytes = vocab * d * s;
  return Status::ok();
}

// torchvision's ViT: conv_proj (kernel = stride = patch), flatten, permute, cat the class token, add
// the position table, dropout.
Status inferPatchEmbedding(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  if (input.size() != 4) return Status::invalid("patch_embedding needs an NCHW image, got " + shapeToString(input));
  REMAT_RETURN_IF_ERROR(checkDropout(spec.dropoutP));
  const std::int64_t k = spec.kernel;
  if (input[2] % k != 0 || input[3] % k != 0)
    return Status::invalid("the image " + std::to_string(input[2]) + "x" + std::to_string(input[3]) +
                           " is not a whole number of " + std::to_string(k) + "x" + std::to_string(k) + " patches");
  const std::uint64_t n = u(input[0]), c = u(input[1]), d = u(spec.width), s = dtypeBytes(dtype);
  const std::uint64_t patches = u(input[2] / k) * u(input[3] / k);
  CheckedSum seq, params, work;
  NamedSum extra;
  seq.add({patches}).add({1});
  params.add({d, c, u(k), u(k)}).add({2, d}).add({seq.value(), d});
  extra.add("dropout mask", {n, seq.value(), d, maskElementBytes(spec.dropoutP)});
  work.add({n, patches, d, s}).add({n, seq.value(), d, s});  // the conv's output, the concatenation
  REMAT_RETURN_IF_ERROR(checkedNumbers({&seq, &params, &extra.sum(), &work}, "the patch embedding's tensors"));
  if (seq.value() > u(kMaxIntegerField)) return Status::invalid("more than 2^31 patches");
  const double flop =
      2.0 * toD(n) * toD(patches) * toD(d) * toD(c) * toD(u(k * k)) + toD(n) * toD(seq.value()) * toD(d);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, {input[0], static_cast<std::int64_t>(seq.value()), spec.width}, dtype,
                                         params.value(), flop));
  // torchvision's VisionTransformer: class_token (its own parameter first), conv_proj, pos_embedding.
  out.paramTensors = {d, d * c * u(k) * u(k), d, seq.value() * d};
  out.numbers.needsInput = true;  // the conv's weight gradient reads the image
  out.numbers.needsOutput = false;
  extra.writeTo(out);
  out.numbers.fwdWorkspaceBytes = work.value();
  return Status::ok();
}

// [N, S, d] -> (LayerNorm) -> token 0 -> linear (-> tanh): ViT's heads, BERT's pooler.
Status inferClsHead(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  REMAT_RETURN_IF_ERROR(requireTokens(input, "cls_head"));
  REMAT_RETURN_IF_ERROR(checkEpsilon(spec.epsilon));
  const std::uint64_t n = u(input[0]), seq = u(input[1]), d = u(input[2]), outs = u(spec.outFeatures);
  const std::uint64_t s = dtypeBytes(dtype), tokens = n * seq;
  CheckedSum params, work;
  NamedSum extra;
  if (spec.norm) params.add({2, d});
  params.add({d, outs});
  if (spec.bias) params.add({outs});
  // The linear keeps x[:, 0], a view: the whole normalised tensor (or x(l-1) without a norm) stays.
  if (spec.norm)
    extra.add("LayerNorm: mean, rstd", {2, tokens, 4})
        .add("the linear's input x[:, 0], a view of all tokens", {tokens, d, s});
  if (spec.tanhOut) work.add({n, outs, s});  // the linear's output before tanh
  REMAT_RETURN_IF_ERROR(checkedNumbers({&params, &extra.sum(), &work}, "the head's parameters"));
  const double flop = 2.0 * toD(n) * toD(d) * toD(outs) + (spec.norm ? 5.0 * toD(tokens) * toD(d) : 0.0) +
                      (spec.tanhOut ? 6.0 * toD(n) * toD(outs) : 0.0);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, {input[0], spec.outFeatures}, dtype, params.value(), flop));
  if (spec.norm) out.paramTensors = {d, d};
  out.paramTensors.push_back(d * outs);
  if (spec.bias) out.paramTensors.push_back(outs);
  out.numbers.needsInput = true;
  out.numbers.needsOutput = spec.tanhOut;  // tanh_backward(grad, result)
  extra.writeTo(out);
  out.numbers.fwdWorkspaceBytes = work.value();
  return Status::ok();
}

}  // namespace remat::detail
