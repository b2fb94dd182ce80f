// Swin's kinds under a mixed precision (docs/memory-model.md 12.10, "Swin under autocast"): what
// PyTorch 2's CPU autocast (aten/src/ATen/autocast_mode.cpp, the AutocastCPU lists) runs in which
// dtype for torchvision's swin_t, and so what autograd saves. conv2d, linear, matmul and bmm are
// lower_precision_fp; layer_norm, softmax, gelu, pad, roll, the index of the bias table and
// adaptive_avg_pool2d are on no CPU list and follow their input (PyTorch 2's CPU layer_norm takes a
// bfloat16 input with float32 weights and writes bfloat16, its statistics float32); the adds
// promote. Unlike ViT's, Swin's residual stream turns half at the patch embedding (its LayerNorm
// reads the conv's half output, with no float32 add in between) and stays half: every Swin layer
// is its half-built self (s = 2) plus autocast's copies, and in the block the one float32 island:
// q k^T (half) + the float32 bias table's gather promotes the scores to float32, so softmax runs
// and saves in float32 and P @ v saves the probabilities' half cast as well.
#include "swin_mixed.hpp"

#include <algorithm>

#include "checked_sum.hpp"

namespace remat::detail {
namespace {

constexpr std::uint64_t kF32 = 4;
constexpr const char* kWeightCopies = "autocast: the weights' half copies";

void addPart(ChainLayer& layer, const char* name, std::uint64_t bytes) {
  if (bytes == 0) return;
  layer.numbers.extraBytes += bytes;
  layer.extraParts.push_back({name, bytes});
}

// swin_embedding: the conv casts the float32 image (its cast saved: in = no) and its kernel; the
// LayerNorm keeps the conv's half output (the half-built number) and writes half.
Status mixEmbedding(ChainLayer& layer, const LayerSpec& spec, std::uint64_t s) {
  const Shape& in = layer.inputShape;
  const std::uint64_t c = u(spec.width), k = u(spec.kernel);
  CheckedSum cast, weights, grads;
  cast.add({u(in[0]), u(in[1]), u(in[2]), u(in[3]), s});
  weights.add({c, u(in[1]), k, k, s});
  grads.add({c, u(in[1]), k, k, s}).add({c, s});  // the conv's half weight and bias gradients
  REMAT_RETURN_IF_ERROR(checkedNumbers({&cast, &weights, &grads}, "the patch embedding under autocast"));
  addPart(layer, "autocast: the input's cast copy", cast.value());
  addPart(layer, kWeightCopies, weights.value());
  layer.numbers.needsInput = false;
  layer.numbers.bwdWorkspaceBytes += grads.value();
  return Status::ok();
}

// swin_block: softmax's float32 result beside P @ v's half cast; the four linears' weight copies.
Status mixBlock(ChainLayer& layer, const LayerSpec& spec, std::uint64_t s) {
  const Shape& in = layer.inputShape;
  const std::uint64_t n = u(in[0]), h = u(in[1]), w = u(in[2]), c = u(in[3]), side = u(spec.window);
  const std::uint64_t padH = (h + side - 1) / side * side, padW = (w + side - 1) / side * side;
  const std::uint64_t windows = (padH / side) * (padW / side), area = side * side, hidden = u(spec.hidden);
  const std::uint64_t tokens = n * h * w, padded = n * padH * padW, heads = u(spec.heads);
  const bool shifted = spec.shift > 0 && (padH > side || padW > side);
  CheckedSum probs, copies, peak, attnGrad, mlpGrad, halfGrad;
  probs.add({n, windows, heads, area, area});
  const std::uint64_t a = probs.value();
  copies.add({4, c, c, s}).add({2, c, hidden, s});
  // The forward's attention moment (memory-model 12.10): norm1's statistics, the windowed input and
  // the q * scale, k^T copies kept so far (one window: qkv), norm1's output, qkv and q * scale,
  // qkv's weight copy, the float32 bias [h, L, L], the float32 scores beside softmax's float32
  // result (and, shifted, the half mask [nW, L, L]).
  const std::uint64_t kept = n * windows == 1 ? 1 : 3;
  peak.add({tokens, 8}).add({kept, padded, c, s}).add({tokens, c, s}).add({4, padded, c, s}).add({3, c, c, s});
  peak.add({heads, area, area, kF32}).add({2, a, kF32});
  if (shifted) peak.add({windows, area, area, s});
  // The backward's: d(P) in half and its float32 cast, d(scores) float32 and its half cast (the
  // cast of the promotion's gradient), dq, dk, dv; the MLP's as half-built; fc1's half weight
  // gradient before its float32 cast.
  attnGrad.add({a, s}).add({2, a, kF32}).add({3, padded, c, s});
  mlpGrad.add({tokens, hidden, s}).add({tokens, c, s});
  halfGrad.add({c, hidden, s}).add({hidden, s});
  REMAT_RETURN_IF_ERROR(
      checkedNumbers({&probs, &copies, &peak, &attnGrad, &mlpGrad, &halfGrad}, "the Swin block under autocast"));
  addPart(layer, "attention: softmax's float32 result", a * kF32);
  addPart(layer, kWeightCopies, copies.value());
  const std::uint64_t ends = layer.numbers.extraBytes + layer.numbers.outBytes;
  layer.numbers.fwdWorkspaceBytes =
      std::max(tokens * c * s, peak.value() > ends ? peak.value() - ends : std::uint64_t{0});
  layer.numbers.bwdWorkspaceBytes = std::max(attnGrad.value(), mlpGrad.value()) + halfGrad.value();
  return Status::ok();
}

// patch_merging and swin_head: one linear each, reading a half input (no cast), its weight copy
// saved and its half weight gradient in the backward's scratch.
Status mixOneLinear(ChainLayer& layer, std::uint64_t weights, std::uint64_t bias, std::uint64_t s) {
  CheckedSum copy, grads;
  copy.add({weights, s});
  grads.add({weights, s}).add({bias, s});
  REMAT_RETURN_IF_ERROR(checkedNumbers({&copy, &grads}, "the linear's copies under autocast"));
  addPart(layer, kWeightCopies, copy.value());
  layer.numbers.bwdWorkspaceBytes += grads.value();
  return Status::ok();
}

}  // namespace

bool hasSwinMixedRule(LayerKind kind) {
  return kind == LayerKind::SwinEmbedding || kind == LayerKind::SwinBlock || kind == LayerKind::PatchMerging ||
         kind == LayerKind::SwinHead;
}

Result<DType> mixSwinLayer(ChainLayer& layer, const ChainLayer& halfLayer, const LayerSpec& spec, DType half) {
  const std::uint64_t s = dtypeBytes(half), paramBytes = layer.numbers.paramBytes;
  layer.numbers = halfLayer.numbers;  // the half stream: every activation and saved tensor at s bytes
  layer.extraParts = halfLayer.extraParts;
  layer.numbers.paramBytes = paramBytes;  // the float32 masters
  Status status = Status::ok();
  const std::uint64_t c = layer.inputShape.size() == 4 ? u(layer.inputShape[3]) : 0;
  switch (layer.kind) {
    case LayerKind::SwinEmbedding: status = mixEmbedding(layer, spec, s); break;
    case LayerKind::SwinBlock: status = mixBlock(layer, spec, s); break;
    case LayerKind::PatchMerging: status = mixOneLinear(layer, 8 * c * c, 0, s); break;
    case LayerKind::SwinHead: status = mixOneLinear(layer, c * u(spec.outFeatures), u(spec.outFeatures), s); break;
    default: return Status::internal("no Swin mixed-precision rule for this kind");
  }
  if (!status.isOk()) return status;
  if (spec.hasMeasuredWorkspace) {  // a device's measured (or fitted) scratch stands, as in float32 (chain.cpp)
    layer.numbers.fwdWorkspaceBytes = spec.numbers.fwdWorkspaceBytes;
    layer.numbers.bwdWorkspaceBytes = spec.numbers.bwdWorkspaceBytes;
  }
  return half;
}

}  // namespace remat::detail
