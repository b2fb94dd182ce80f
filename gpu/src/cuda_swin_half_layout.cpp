// The GPU's bfloat16 layout of Swin's kinds under bf16-mixed (cuda_swin_half_layout.hpp). Each
// layout is written out region by region from the CPU's bfloat16 runners, not from the model's sums
// (swin_mixed.cpp), so checking one against the other proves they agree.
#include "cuda_swin_half_layout.hpp"

#include <string>

#include "cuda_swin.hpp"
#include "kernels_window.hpp"

namespace remat::gpu {
namespace {

constexpr std::uint64_t kHalf = 2;   // bfloat16
constexpr std::uint64_t kFloat = 4;  // float32

std::uint64_t u(kernels::Index n) { return static_cast<std::uint64_t>(n); }

// Regions packed back to back, as the model sums E (the workspaces align theirs).
struct Packed {
  std::uint64_t end = 0;
  std::uint64_t add(std::uint64_t bytes) {
    end += bytes;
    return end - bytes;
  }
};

std::uint64_t endParams(LayerKind kind, const Shape& in, const Shape& out, const LayerSpec& spec) {
  switch (kind) {
    case LayerKind::SwinEmbedding: {  // the conv's weight [C, 3, k, k] and bias, the norm's
      const std::uint64_t C = u(out[3]);
      return C * u(in[1] * spec.kernel * spec.kernel) + C + 2 * C;
    }
    case LayerKind::PatchMerging: return 2 * u(in[3]) * 4 * u(in[3]) + 2 * 4 * u(in[3]);  // reduction, norm
    default: return 2 * u(in[3]) + u(spec.outFeatures) * u(in[3]) + u(spec.outFeatures);  // norm, head
  }
}

Status checkShapes(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check) {
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  if (layer.kind == LayerKind::SwinEmbedding) {
    if (in.size() != 4 || out.size() != 4 || spec.kernel <= 0)
      return check.fail("swin_embedding needs an NCHW image and a positive patch size");
  } else if (in.size() != 4) {
    return check.fail(std::string(kindName(layer.kind)) + " needs an [N, H, W, C] input, got " + shapeToString(in));
  }
  if (layer.kind == LayerKind::SwinBlock && (spec.heads <= 0 || in[3] % spec.heads != 0 || spec.window <= 0))
    return check.fail("swin_block needs an [N, H, W, C] input with C divisible by the heads, got " + shapeToString(in));
  const kernels::Index C = layer.kind == LayerKind::SwinEmbedding ? out[3] : in[3];
  if (C % 2 != 0)  // as the CPU's bfloat16 Swin kernels (and every torchvision Swin)
    return check.fail("the GPU's bfloat16 Swin kernels need an even channel count C, got " + std::to_string(C) +
                      " (as the CPU's); run it as fp32");
  return Status::ok();
}

// The inputs' dtypes the layout reads: the float32 image for the embedding, the bfloat16 stream of
// a Swin layer before it for the others.
Status checkInput(const ChainLayer& layer, bool inputHalf, const LayerChecks& check) {
  const bool embedding = layer.kind == LayerKind::SwinEmbedding;
  if (inputHalf == !embedding) return Status::ok();
  return check.fail("precision bf16-mixed: " + std::string(kindName(layer.kind)) + " reads a " +
                    (inputHalf ? "bfloat16" : "float32") +
                    " input; the GPU's bfloat16 Swin layout (as the CPU's) has " +
                    (embedding ? "the patch embedding read the float32 image"
                               : "it read the bfloat16 stream of a Swin layer before it"));
}

}  // namespace

bool isSwinKind(LayerKind kind) {
  return kind == LayerKind::SwinEmbedding || kind == LayerKind::SwinBlock || kind == LayerKind::PatchMerging ||
         kind == LayerKind::SwinHead;
}

HalfSwinBlockLayout halfSwinBlockLayout(const Shape& in, const LayerSpec& spec) {
  const kernels::WindowShape w = kernels::windowShape(in[0], in[1], in[2], in[3], spec.window, spec.shift);
  const std::uint64_t T = u(w.tokens()), Tp = u(w.paddedTokens()), C = u(in[3]), H = u(spec.hidden);
  const std::uint64_t windows = u(in[0] * w.windows()), A = windows * u(spec.heads) * u(w.area() * w.area());
  HalfSwinBlockLayout t;
  Packed e;
  t.stats1 = e.add(2 * T * kFloat);
  t.stats2 = e.add(2 * T * kFloat);
  t.windowed = e.add(Tp * C * kHalf);
  t.qkvCopy = e.add(3 * C * C * kHalf);
  t.q = e.add(Tp * C * kHalf);
  if (windows == 1) {
    t.qkvOut = e.add(3 * Tp * C * kHalf);
  } else {
    t.k = e.add(Tp * C * kHalf);
    t.v = e.add(Tp * C * kHalf);
  }
  t.merged = e.add(Tp * C * kHalf);
  t.projCopy = e.add(C * C * kHalf);
  t.probs32 = e.add(A * kFloat);
  t.probs16 = e.add(A * kHalf);
  t.h1 = e.add(T * C * kHalf);
  t.ln2Out = e.add(T * C * kHalf);
  t.fc1Copy = e.add(H * C * kHalf);
  t.fc = e.add(T * H * kHalf);
  t.gelu = e.add(T * H * kHalf);
  t.fc2Copy = e.add(C * H * kHalf);
  if (spec.stochasticDepth > 0.0) t.noise = e.add(2 * u(in[0]) * kHalf);
  t.savedBytes = e.end;
  return t;
}

HalfSwinEndLayout halfSwinEndLayout(LayerKind kind, const Shape& in, const Shape& out, const LayerSpec& spec) {
  HalfSwinEndLayout t;
  Packed e;
  if (kind == LayerKind::SwinEmbedding) {
    const std::uint64_t C = u(out[3]), T = u(out[0] * out[1] * out[2]);
    t.cast = e.add(u(in[0] * in[1] * in[2] * in[3]) * kHalf);
    t.copy = e.add(C * u(in[1] * spec.kernel * spec.kernel) * kHalf);
    t.a = e.add(T * C * kHalf);
    t.stats = e.add(2 * T * kFloat);
  } else if (kind == LayerKind::PatchMerging) {
    const std::uint64_t C = u(in[3]), T = u(out[0] * out[1] * out[2]);
    t.a = e.add(T * 4 * C * kHalf);
    t.b = e.add(T * 4 * C * kHalf);
    t.stats = e.add(2 * T * kFloat);
    t.copy = e.add(2 * C * 4 * C * kHalf);
  } else {
    const std::uint64_t C = u(in[3]), T = u(in[0] * in[1] * in[2]);
    t.stats = e.add(2 * T * kFloat);
    t.a = e.add(T * C * kHalf);
    t.b = e.add(u(in[0]) * C * kHalf);
    t.copy = e.add(u(spec.outFeatures) * C * kHalf);
  }
  t.savedBytes = e.end;
  return t;
}

Status checkHalfSwinLayer(const Chain& chain, std::size_t l, bool inputHalf, const LayerChecks& check) {
  const ChainLayer& layer = chain.layers[l - 1];
  const LayerSpec& spec = chain.spec.layers[layer.specIndex];
  REMAT_RETURN_IF_ERROR(checkInput(layer, inputHalf, check));
  REMAT_RETURN_IF_ERROR(checkShapes(layer, spec, check));
  const Shape& in = layer.inputShape;
  std::uint64_t params = 0, saved = 0, floatAt = 0;  // floatAt: a float32 region's offset
  bool needsInput = true;
  if (layer.kind == LayerKind::SwinBlock) {
    params = u(swinParams(in[3], spec.hidden, spec.window, spec.heads).count);
    const HalfSwinBlockLayout t = halfSwinBlockLayout(in, spec);
    saved = t.savedBytes, floatAt = t.probs32;
  } else {
    params = endParams(layer.kind, in, layer.outputShape, spec);
    const HalfSwinEndLayout t = halfSwinEndLayout(layer.kind, in, layer.outputShape, spec);
    saved = t.savedBytes, floatAt = t.stats;
    needsInput = layer.kind == LayerKind::SwinHead;  // the embedding saves the image's cast instead
  }
  if (floatAt % 4 != 0)  // an odd-sized bfloat16 region before it (the embedding's odd N*3*H*W)
    return check.fail("the GPU's bfloat16 Swin layout puts a float32 tensor at byte " + std::to_string(floatAt) +
                      " of E, not a multiple of 4 (an odd element count before it); run it as fp32");
  REMAT_RETURN_IF_ERROR(check.expectParams(layer.paramCount, params));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsInput, needsInput, "needs_input"));
  REMAT_RETURN_IF_ERROR(check.expectFlag(layer.numbers.needsOutput, false, "needs_output"));
  return check.expectExtra(layer.numbers.extraBytes, saved);
}

}  // namespace remat::gpu
