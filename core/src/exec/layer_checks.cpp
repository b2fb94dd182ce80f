#include "remat/exec/layer_checks.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

#include "remat/model/operators.hpp"

namespace remat {

std::string layerLabel(const Chain& chain, std::size_t l) {
  if (l == 0) return "the input x0";
  const ChainLayer& layer = chain.layers[l - 1];
  return "layer " + std::to_string(l) + " ('" + layer.name + "', " + std::string(kindName(layer.kind)) + ")";
}

namespace {
std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

// What a primitive kind's kernels read and save, the same on the CPU and the GPU.
struct KernelNeeds {
  bool readsInput = false;       // the backward reads x(l-1)
  bool readsOutput = false;      // the backward reads x(l)
  std::uint64_t extraBytes = 0;  // what the keep-mode forward saves in E(l)
  PrimitiveParameters params;
};

// The tensor ranks each kind's kernels index into (shape inference gives nothing else).
bool ranksFit(LayerKind kind, const Shape& in, const Shape& out) {
  switch (kind) {
    case LayerKind::Conv2d:
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool: return in.size() == 4 && out.size() == 4;
    case LayerKind::BatchNorm: return in.size() == 2 || in.size() == 4;
    case LayerKind::Linear: return in.size() == 2 && out.size() == 2;
    case LayerKind::LayerNorm: return (in.size() == 2 || in.size() == 4) && out == in;
    default: return true;
  }
}

// conv2d and linear: the weights, then a bias when the layer's parameter count has room for one.
PrimitiveParameters weightsAndBias(std::uint64_t weights, std::int64_t outputs, std::uint64_t paramCount) {
  const auto biases = static_cast<std::uint64_t>(outputs);
  return {weights, paramCount == weights + biases ? biases : 0};
}

std::uint64_t u64(std::int64_t value) { return static_cast<std::uint64_t>(value); }

// The kinds' kernels as both backends implement them; nothing for a kind without primitive kernels.
std::optional<KernelNeeds> kernelNeeds(const ChainLayer& layer, const LayerSpec& spec) {
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  KernelNeeds needs;
  switch (layer.kind) {
    case LayerKind::Conv2d: {
      const std::uint64_t weights = u64(out[1]) * u64(in[1] / spec.groups) * u64(spec.kernel) * u64(spec.kernelW());
      needs.params = weightsAndBias(weights, out[1], layer.paramCount);
      needs.readsInput = true;  // dW correlates x with dy
      return needs;
    }
    case LayerKind::MaxPool:
      // E holds what the forward saved: the CPU's argmax indices (dy goes to them), the GPU's copy of
      // y for cuDNN, which also reads x.
      needs.readsInput = true;
      needs.extraBytes = elementCount(out) * kMaxPoolIndexBytes;
      return needs;
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool: return needs;
    case LayerKind::BatchNorm:
      needs.params = {2 * u64(in[1]), 0};
      needs.readsInput = true;
      needs.extraBytes = 2 * u64(in[1]) * 4;  // float32 mean and inverse std (GPU) or variance (CPU)
      return needs;
    case LayerKind::Linear:
      needs.params = weightsAndBias(u64(in[1]) * u64(out[1]), out[1], layer.paramCount);
      needs.readsInput = true;
      return needs;
    case LayerKind::Dropout: needs.extraBytes = elementCount(out); return needs;  // the mask, a byte each
    case LayerKind::LayerNorm:
      needs.params = {2 * u64(in[1]), 0};
      needs.readsInput = true;
      // float32 mean and variance (CPU) or rstd (GPU) of each row: [N, F]'s N, [N, C, H, W]'s N*H*W
      needs.extraBytes = 2 * u64(in[0]) * (in.size() == 4 ? u64(in[2]) * u64(in[3]) : 1) * 4;
      return needs;
    default: break;
  }
  // The pointwise kinds' kernels read what their description says PyTorch's backward reads (relu:
  // dy where 0 < y; relu6: where 0 < x < 6; sigmoid, tanh from y; the others from x).
  if (isPointwise(layer.kind)) {
    const BackwardReads reads = operatorInfo(layer.kind).backwardReads;
    needs.readsInput = reads == BackwardReads::Input;
    needs.readsOutput = reads == BackwardReads::Output;
    return needs;
  }
  return std::nullopt;
}

}  // namespace

Status LayerChecks::fail(const std::string& message) const {
  return Status::invalid(device + ": " + label + ": " + message);
}

Status LayerChecks::expectFlag(bool have, bool want, const char* field) const {
  if (want && !have)
    return fail("its " + upper(device) + " backward reads that tensor, but the chain says " + field + " = false");
  return Status::ok();
}

Status LayerChecks::expectExtra(std::uint64_t have, std::uint64_t want) const {
  if (have != want)
    return fail("its " + upper(device) + " kernel saves " + std::to_string(want) +
                " extra bytes, the chain says e = " + std::to_string(have));
  return Status::ok();
}

Status LayerChecks::expectParams(std::uint64_t have, std::uint64_t want) const {
  if (have != want)
    return fail("expected " + std::to_string(want) + " parameters, the chain says " + std::to_string(have));
  return Status::ok();
}

Status LayerChecks::realLayer(const Chain& chain, std::size_t l, bool inputReal, std::uint64_t inputElements,
                              std::uint64_t outputElementBytes) const {
  const ChainLayer& layer = chain.layers[l - 1];
  // Autocast's per-op dtypes need half kernels beside the float32 ones (memory-model.md section
  // 11.7). (Abstract layers only move bytes, in any precision.)
  if (isMixedPrecision(chain.step.precision) && !autocastKernels)
    return fail("precision " + std::string(precisionName(chain.step.precision)) + ": the " + upper(device) +
                " backend runs float32 steps only (no autocast kernels); plan and simulate it, or run it as fp32");
  // Pure bf16 runs on the backends with bfloat16 kernels (the CPU's); float16 nowhere yet.
  const bool pureBf16 = autocastKernels && chain.dtype == DType::BFloat16 && chain.step.precision == Precision::Bf16;
  if (chain.dtype != DType::Float32 && !pureBf16)
    return fail("the " + upper(device) + " backend runs float32 only; the chain is " +
                std::string(dtypeName(chain.dtype)));
  if (layer.specIndex >= chain.spec.layers.size())
    return fail("the chain has no layer spec for it (spec index " + std::to_string(layer.specIndex) + ")");
  if (!inputReal) return fail("its input is not a real activation (an abstract layer's bytes)");
  if (layer.inputShape.empty() || layer.outputShape.empty() || inputElements != elementCount(layer.inputShape))
    return fail("its input shape " + shapeToString(layer.inputShape) + " does not match the previous output");
  if (layer.numbers.outBytes != elementCount(layer.outputShape) * outputElementBytes)
    return fail("a = " + std::to_string(layer.numbers.outBytes) + " bytes does not match its output shape " +
                shapeToString(layer.outputShape));
  return Status::ok();
}

Result<PrimitiveParameters> LayerChecks::primitiveLayer(const ChainLayer& layer, const LayerSpec& spec,
                                                        const AutocastCasts& casts) const {
  if (!ranksFit(layer.kind, layer.inputShape, layer.outputShape))
    return fail("its kernels do not take a " + shapeToString(layer.inputShape) + " -> " +
                shapeToString(layer.outputShape) + " layer");
  std::optional<KernelNeeds> needs = kernelNeeds(layer, spec);
  if (needs && casts.inputCastBytes > 0) {  // the backward reads the cast copy, saved in E
    if (needs->readsInput) needs->extraBytes += casts.inputCastBytes;
    needs->readsInput = false;
  }
  if (needs) needs->extraBytes += casts.weightCopyBytes;
  // Kinds the model plans but no backend runs yet (the transformers): say which, by name.
  if (!needs) return fail("no " + upper(device) + " kernel for " + std::string(kindName(layer.kind)) + " yet");
  const LayerNumbers& m = layer.numbers;
  REMAT_RETURN_IF_ERROR(expectParams(layer.paramCount, needs->params.weights + needs->params.biases));
  REMAT_RETURN_IF_ERROR(expectFlag(m.needsInput, needs->readsInput, "needs_input"));
  REMAT_RETURN_IF_ERROR(expectFlag(m.needsOutput, needs->readsOutput, "needs_output"));
  REMAT_RETURN_IF_ERROR(expectExtra(m.extraBytes, needs->extraBytes));
  return needs->params;
}

Status LayerChecks::noKernel() const { return fail("the " + upper(device) + " backend has no kernel for this kind"); }

Status LayerChecks::blockNumbers(const BlockGraph& graph, const ChainLayer& layer, const AutocastCasts& casts) const {
  const LayerNumbers& m = layer.numbers;
  const std::uint64_t extra = graph.extraBytes + casts.inputCastBytes + casts.weightCopyBytes;
  const bool needsInput = graph.needsInput && casts.inputCastBytes == 0;
  if (graph.outBytes != m.outBytes || extra != m.extraBytes || needsInput != m.needsInput ||
      graph.needsOutput != m.needsOutput || graph.paramCount != layer.paramCount)
    return fail("the chain's numbers for this block differ from its inner graph's");
  return Status::ok();
}

Status LayerChecks::innerConv(const BlockOp& op, std::uint64_t weightCount) const {
  const std::uint64_t biases = op.layer.bias ? static_cast<std::uint64_t>(op.layer.outChannels) : 0;
  if (weightCount + biases != op.paramCount)
    return fail("inner conv '" + op.layer.name + "' has an unexpected parameter count");
  return Status::ok();
}

Status LayerChecks::innerBatchNorm(const BlockOp& op, std::uint64_t channels) const {
  if (op.paramCount != 2 * channels || op.statsBytes != 2 * channels * 4)
    return fail("inner batch norm '" + op.layer.name + "' has unexpected parameter or statistics bytes");
  return Status::ok();
}

Status LayerChecks::innerLayerNorm(const BlockOp& op, const Shape& input) const {
  const std::uint64_t positions = u64(input[0]) * u64(input[2]) * u64(input[3]);
  if (op.paramCount != 2 * u64(input[1]) || op.statsBytes != 2 * positions * 4)
    return fail("inner layer norm '" + op.layer.name + "' has unexpected parameter or statistics bytes");
  return Status::ok();
}

Status LayerChecks::innerLayerScale(const BlockOp& op, std::uint64_t channels) const {
  if (op.paramCount != channels || !op.readsInput)
    return fail("inner layer scale '" + op.layer.name + "' has an unexpected parameter count or saved input");
  return Status::ok();
}

Status LayerChecks::innerWithoutParams(const BlockOp& op) const {
  if (op.paramCount != 0) return fail("inner op '" + op.layer.name + "' has parameters");
  return Status::ok();
}

}  // namespace remat
