// The Swin Transformer kinds' numbers (docs/memory-model.md section 12.6): what PyTorch's autograd
// saves for torchvision's SwinTransformer (swin_t, torchvision 0.14) as one chain layer per patch
// embedding, Swin block, patch merging and head. The residual stream between layers is channels
// last, [N, H, W, C]. Every size is a sum of products summed with overflow checks (checked_sum.hpp).
#include "swin.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "checked_sum.hpp"
#include "layers_common.hpp"

namespace remat::detail {
namespace {

// LayerNorm's statistics: native_layer_norm's mean and rstd, one float32 each per position.
constexpr std::uint64_t kStatsBytesPerPosition = 2 * 4;

Status requireFeatureMap(const Shape& input, std::string_view kind) {
  if (input.size() != 4)
    return Status::invalid(std::string(kind) + " needs a channels-last [N, H, W, C] input (the residual stream), got " +
                           shapeToString(input));
  return Status::ok();
}

std::string mapText(std::int64_t h, std::int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

std::int64_t roundUp(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

// One Swin block's dimensions. torchvision pads H and W up to multiples of the window and shifts
// only along a padded side longer than the window (shifted_window_attention).
struct Windows {
  std::uint64_t n = 0, h = 0, w = 0, c = 0, heads = 0, hidden = 0, side = 0;
  std::uint64_t padH = 0, padW = 0;  // padded to multiples of the window
  std::uint64_t count = 0;           // windows per image
  std::uint64_t area = 0;            // tokens per window, side^2
  bool shifted = false;
  std::uint64_t tokens() const { return n * h * w; }              // T
  std::uint64_t paddedTokens() const { return n * padH * padW; }  // Tp
};

Result<Windows> windowsOf(const LayerSpec& spec, const Shape& input) {
  const std::int64_t side = spec.window, h = input[1], w = input[2];
  if (side > h || side > w)
    return Status::invalid("window " + std::to_string(side) + " is larger than the feature map " + mapText(h, w) +
                           " (H x W)");
  if (spec.shift >= side)
    return Status::invalid("shift " + std::to_string(spec.shift) + " must be smaller than the window " +
                           std::to_string(side));
  if (input[3] % spec.heads != 0)
    return Status::invalid("heads " + std::to_string(spec.heads) +
                           " does not divide the channels C = " + std::to_string(input[3]));
  Windows d;
  d.n = u(input[0]), d.h = u(h), d.w = u(w), d.c = u(input[3]), d.heads = u(spec.heads), d.hidden = u(spec.hidden);
  d.side = u(side);
  d.padH = u(roundUp(h, side)), d.padW = u(roundUp(w, side));
  d.count = (d.padH / d.side) * (d.padW / d.side);
  d.area = d.side * d.side;
  d.shifted = spec.shift > 0 && (d.padH > d.side || d.padW > d.side);
  // Padding can take the map's bytes past 64 bits where the input's fit (tokens() and
  // paddedTokens() are then plain products).
  CheckedSum padded;
  padded.add({d.n, d.padH, d.padW, d.c, 4});
  if (padded.overflow()) return Status::invalid("the feature map padded to whole windows overflows 64-bit bytes");
  return d;
}

}  // namespace

// torchvision's features[0]: Conv2d(3, C, k, stride k), Permute([0, 2, 3, 1]), LayerNorm(C).
Status inferSwinEmbedding(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  if (input.size() != 4) return Status::invalid("swin_embedding needs an NCHW image, got " + shapeToString(input));
  REMAT_RETURN_IF_ERROR(checkEpsilon(spec.epsilon));
  const std::int64_t k = spec.kernel;
  if (input[2] < k || input[3] < k)
    return Status::invalid("the image " + mapText(input[2], input[3]) + " is smaller than one " + mapText(k, k) +
                           " patch");
  const std::int64_t oh = input[2] / k, ow = input[3] / k;
  const std::uint64_t n = u(input[0]), cin = u(input[1]), c = u(spec.width), s = dtypeBytes(dtype);
  const std::uint64_t tokens = n * u(oh) * u(ow);
  CheckedSum params, work, grad;
  NamedSum extra;
  params.add({c, cin, u(k), u(k)}).add({3, c});  // the conv's weight and bias, the norm's
  // LayerNorm keeps its input, the permuted (strided) conv output, and its statistics; it
  // normalises a contiguous copy it makes itself (native_layer_norm's expect_contiguous).
  extra.add("norm: input (the permuted conv output)", {tokens, c, s});
  extra.add("norm: mean and rstd (float32)", {tokens, kStatsBytesPerPosition});
  work.add({tokens, c, s});
  grad.add({2, tokens, c, s});  // the norm's backward: its contiguous copy again, d(conv output)
  REMAT_RETURN_IF_ERROR(checkedNumbers({&params, &extra.sum(), &work, &grad}, "the patch embedding's tensors"));
  const double flop = 2.0 * toD(tokens) * toD(c) * toD(cin) * toD(u(k * k)) + 5.0 * toD(tokens) * toD(c);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, {input[0], oh, ow, spec.width}, dtype, params.value(), flop));
  out.paramTensors = {c * cin * u(k) * u(k), c, c, c};  // the conv's weight and bias, the norm's
  out.numbers.needsInput = true;                        // the conv's weight gradient reads the image
  out.numbers.needsOutput = false;
  extra.writeTo(out);
  out.numbers.fwdWorkspaceBytes = work.value();
  out.numbers.bwdWorkspaceBytes = grad.value();
  return Status::ok();
}

namespace {

// What one block keeps (section 12.6): both norms' statistics; the windowed input the qkv linear
// keeps, the copies of q * scale, k^T and v the two batched matmuls keep, the merged heads proj
// keeps (all padded); norm2's input (the first residual sum) and output; fc1's output (GELU's
// input) and GELU's output (fc2's); softmax's result; stochastic depth's noises.
NamedSum blockExtra(const Windows& d, std::uint64_t probs, std::uint64_t s, double stochasticDepth) {
  // With one window in the whole batch (N * windows = 1) matmul's reshapes of k^T and v are views of
  // qkv, so the matmuls keep all of qkv instead of two copies: one more [Tp, C] (section 12.7).
  const bool single = d.n * d.count == 1;
  const std::uint64_t t = d.tokens();
  NamedSum extra;
  extra.add("norms: mean and rstd (float32)", {2, t, kStatsBytesPerPosition});
  extra.add(single ? "attention: windowed input, q * scale, qkv, merged heads"
                   : "attention: windowed input, q * scale, k^T and v copies, merged heads",
            {single ? 6u : 5u, d.paddedTokens(), d.c, s});
  extra.add("attention: probabilities [N * windows, h, L, L]", {probs, s});
  extra.add("norm2: input (the residual sum) and output", {2, t, d.c, s});
  extra.add("MLP: fc1's and GELU's outputs", {2, t, d.hidden, s});
  // StochasticDepth in training: input * noise, noise [N, 1, 1, 1] not requiring grad, so mul keeps
  // only the noise; with p = 0 it returns its input and keeps nothing.
  if (stochasticDepth > 0.0) extra.add("stochastic depth: two noises [N, 1, 1, 1]", {2, d.n, s});
  return extra;
}

// The most bytes alive inside the attention (the scores and their sum with the bias): norm1's
// statistics, what the block keeps by then (the windowed input, the q * scale and k^T copies),
// norm1's output (shifted_window_attention's argument), qkv, q * scale, the bias [1, heads, L, L],
// the two score tensors and the shift mask [windows, L, L] made in this forward.
CheckedSum attentionPeak(const Windows& d, std::uint64_t probs, std::uint64_t s) {
  const std::uint64_t tp = d.paddedTokens(), keptCopies = d.n * d.count == 1 ? 1 : 3;
  CheckedSum alive;
  alive.add({d.tokens(), kStatsBytesPerPosition}).add({keptCopies, tp, d.c, s}).add({d.tokens(), d.c, s});
  alive.add({4, tp, d.c, s}).add({d.heads, d.area, d.area, s}).add({2, probs, s});
  if (d.shifted) alive.add({d.count, d.area, d.area, s});
  return alive;
}

}  // namespace

// x + sd(attn(norm1(x))), then + sd(mlp(norm2(.))); attn is shifted_window_attention: pad, roll,
// window partition, qkv, q * scale, q k^T, + relative position bias (+ the shift mask), softmax,
// PV, merge heads, proj, reverse windows, roll back. What each op keeps: section 12.6.
Status inferSwinBlock(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  REMAT_RETURN_IF_ERROR(requireFeatureMap(input, "swin_block"));
  REMAT_RETURN_IF_ERROR(checkEpsilon(spec.epsilon));
  if (!(spec.stochasticDepth >= 0.0 && spec.stochasticDepth < 1.0))
    return Status::invalid("stochastic_depth is " + std::to_string(spec.stochasticDepth) + ", must be in [0, 1)");
  auto dims = windowsOf(spec, input);
  if (!dims) return dims.status();
  const Windows& d = *dims;
  const std::uint64_t s = dtypeBytes(dtype), t = d.tokens(), tp = d.paddedTokens();
  CheckedSum params, probs, residual, attnGrad, mlpGrad;
  const std::uint64_t tableSide = 2 * d.side - 1;  // the relative position bias table is tableSide^2 x heads
  params.add({4, d.c, d.c}).add({2, d.c, d.hidden}).add({9, d.c}).add({d.hidden}).add({tableSide, tableSide, d.heads});
  probs.add({d.n, d.count, d.heads, d.area, d.area});  // A: one [N * windows, heads, L, L] tensor
  const NamedSum extra = blockExtra(d, probs.value(), s, spec.stochasticDepth);
  const CheckedSum attention = attentionPeak(d, probs.value(), s);
  residual.add({t, d.c, s});                                 // the last residual add's other operand, beside x(l)
  attnGrad.add({2, probs.value(), s}).add({3, tp, d.c, s});  // d(probabilities), d(scores); dq, dk, dv
  mlpGrad.add({t, d.hidden, s}).add({t, d.c, s});            // d(GELU's output) once fc2's input is freed; d(sd)
  REMAT_RETURN_IF_ERROR(checkedNumbers({&params, &probs, &extra.sum(), &attention, &residual, &attnGrad, &mlpGrad},
                                       "the block's parameters and saved tensors"));
  const double a = toD(probs.value()), c = toD(d.c), hid = toD(d.hidden), tt = toD(t), ttp = toD(tp);
  const double flop = 8.0 * ttp * c * c + 4.0 * a * c / toD(d.heads) + 4.0 * tt * c * hid + 7.0 * a + 8.0 * tt * hid +
                      14.0 * tt * c + ttp * c;
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, input, dtype, params.value(), flop));
  // norm1; the attention's own bias table first, then qkv and proj; norm2; the MLP (torchvision's order).
  out.paramTensors = {d.c,
                      d.c,
                      tableSide * tableSide * d.heads,
                      3 * d.c * d.c,
                      3 * d.c,
                      d.c * d.c,
                      d.c,
                      d.c,
                      d.c,
                      d.hidden * d.c,
                      d.hidden,
                      d.c * d.hidden,
                      d.c};
  out.numbers.needsInput = true;  // norm1 keeps x(l-1)
  out.numbers.needsOutput = false;
  extra.writeTo(out);
  // wf: what the forward holds beyond what it ends with (e and x(l)): the attention's peak when
  // that is higher, else the last add's other operand (section 12.7 measured both).
  std::uint64_t ends = 0;
  if (__builtin_add_overflow(extra.sum().value(), out.numbers.outBytes, &ends))
    ends = std::numeric_limits<std::uint64_t>::max();
  out.numbers.fwdWorkspaceBytes =
      std::max(residual.value(), attention.value() > ends ? attention.value() - ends : std::uint64_t{0});
  out.numbers.bwdWorkspaceBytes = std::max(attnGrad.value(), mlpGrad.value());
  return Status::ok();
}

// torchvision's PatchMerging: pad to even H and W, cat the four 2x2 neighbours (x0, x1, x2, x3)
// along C, LayerNorm(4C), Linear(4C, 2C, bias=False).
Status inferPatchMerging(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  REMAT_RETURN_IF_ERROR(requireFeatureMap(input, "patch_merging"));
  REMAT_RETURN_IF_ERROR(checkEpsilon(spec.epsilon));
  const std::int64_t oh = (input[1] + 1) / 2, ow = (input[2] + 1) / 2;
  if (input[3] > kMaxIntegerField / 2) return Status::invalid("2C channels are more than 2^31");
  const std::uint64_t n = u(input[0]), c = u(input[3]), s = dtypeBytes(dtype);
  const std::uint64_t merged = n * u(oh) * u(ow);  // positions after merging; 4C channels each
  CheckedSum params, grad;
  NamedSum extra;
  params.add({8, c, c}).add({8, c});
  // The concatenation (LayerNorm's input), its statistics and its output (the linear's input).
  extra.add("norm: input (the concatenation)", {merged, 4 * c, s});
  extra.add("reduction: input (the norm's output)", {merged, 4 * c, s});
  extra.add("norm: mean and rstd (float32)", {merged, kStatsBytesPerPosition});
  // No wf: the padded copy of x(l-1) (F.pad copies even when it adds nothing) is freed before the
  // norm's output exists, so the forward never holds more than it ends with (section 12.7).
  grad.add({2, merged, 4 * c, s});  // d(norm output), d(concatenation)
  REMAT_RETURN_IF_ERROR(checkedNumbers({&params, &extra.sum(), &grad}, "the patch merging's tensors"));
  const double m = toD(merged), cc = toD(c);
  const double flop = 16.0 * m * cc * cc + 20.0 * m * cc;
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, {input[0], oh, ow, 2 * input[3]}, dtype, params.value(), flop));
  out.paramTensors = {8 * c * c, 4 * c, 4 * c};  // reduction (no bias), then norm
  out.numbers.needsInput = false;                // pad, slices and cat need only shapes
  out.numbers.needsOutput = false;
  extra.writeTo(out);
  out.numbers.bwdWorkspaceBytes = grad.value();
  return Status::ok();
}

// torchvision's SwinTransformer.norm, permute, AdaptiveAvgPool2d(1), flatten, head (Linear).
Status inferSwinHead(const LayerSpec& spec, const Shape& input, DType dtype, ChainLayer& out) {
  REMAT_RETURN_IF_ERROR(requireFeatureMap(input, "swin_head"));
  REMAT_RETURN_IF_ERROR(checkEpsilon(spec.epsilon));
  const std::uint64_t n = u(input[0]), c = u(input[3]), outs = u(spec.outFeatures), s = dtypeBytes(dtype);
  const std::uint64_t tokens = n * u(input[1]) * u(input[2]);
  CheckedSum params;
  NamedSum extra;
  params.add({2, c}).add({c, outs}).add({outs});
  // norm keeps x(l-1) and its statistics; _adaptive_avg_pool2d saves `self` (the normalised map,
  // although its backward reads only its shape); the linear keeps the pooled [N, C].
  extra.add("norm: mean and rstd (float32)", {tokens, kStatsBytesPerPosition});
  extra.add("avgpool: the normalised map (saved self)", {tokens, c, s});
  extra.add("head: input (the pooled [N, C])", {n, c, s});
  CheckedSum grad;
  grad.add({tokens, c, s});  // the pool's backward: d(normalised map), before the norm's backward
  REMAT_RETURN_IF_ERROR(checkedNumbers({&params, &extra.sum(), &grad}, "the head's tensors"));
  const double flop = 6.0 * toD(tokens) * toD(c) + 2.0 * toD(n) * toD(c) * toD(outs);
  REMAT_RETURN_IF_ERROR(setCommonNumbers(out, {input[0], spec.outFeatures}, dtype, params.value(), flop));
  out.paramTensors = {c, c, outs * c, outs};  // norm, head
  out.numbers.needsInput = true;
  out.numbers.needsOutput = false;
  extra.writeTo(out);
  out.numbers.bwdWorkspaceBytes = grad.value();
  return Status::ok();
}

}  // namespace remat::detail
