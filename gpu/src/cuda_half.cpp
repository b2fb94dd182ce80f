// bf16-mixed's per-layer dtypes and saved bytes on the GPU (cuda_half.hpp). The dtype of every
// layer comes from precision.cpp's cast policy; the bytes are checked against the chain's numbers
// with the same LayerChecks the float32 path and the CPU use.
#include "cuda_half.hpp"

#include <optional>
#include <string>

#include "cuda_transformer_half_layout.hpp"
#include "remat/base/device_names.hpp"
#include "remat/model/block.hpp"
#include "remat/model/operators.hpp"
#include "remat/model/precision.hpp"

namespace remat::gpu {
namespace {

constexpr std::uint64_t kHalfBytes = 2;   // bfloat16
constexpr std::uint64_t kFloatBytes = 4;  // float32

// The kinds whose layer has a bfloat16 layout on the GPU (issue 24): the classic CNN kinds and the
// residual blocks, as on the CPU.
bool hasHalfLayout(LayerKind kind) {
  switch (kind) {
    case LayerKind::Conv2d:
    case LayerKind::Linear:
    case LayerKind::BatchNorm:
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool:
    case LayerKind::Dropout:
    case LayerKind::Flatten:
    case LayerKind::LayerNorm: return true;
    default: return isComposite(kind) || isPointwise(kind) || hasHalfTransformerLayout(kind);
  }
}

Status refuse(const LayerChecks& check, const std::string& what) {
  return check.fail(
      "precision bf16-mixed: the GPU has no bfloat16 layout for " + what +
      " yet (conv2d, linear, batchnorm, the pools, dropout, flatten, the activations, layer norm, "
      "residual blocks and GPT's, BERT's and ViT's kinds have one); plan and simulate it, or run it with --device cpu");
}

// A half block's inner ops: convolutions, batch norms, the residual add and the activations, on
// contiguous tensors (no channel views or gathered copies): ResNet's and MobileNetV2's blocks (the
// CPU runs more in bfloat16: SE, pool branches, channel views and shuffles).
Status checkHalfBlockOps(const BlockGraph& graph, const LayerChecks& check) {
  for (const BlockOp& op : graph.ops) {
    const std::optional<LayerKind> kind = blockOpInfo(op.kind).layer;
    bool supported = op.kind == BlockOpKind::Conv2d || op.kind == BlockOpKind::BatchNorm ||
                     op.kind == BlockOpKind::Add || (kind && isPointwise(*kind));
    supported = supported && !graph.tensors[op.output].isView();
    for (std::size_t j = 0; j < op.inputs.size(); ++j)
      supported = supported && op.gatherOffset[j] == kBlockNoOffset && op.gatherGradOffset[j] == kBlockNoOffset;
    if (!supported)
      return refuse(check,
                    "the block's inner op '" + op.layer.name + "' (" + std::string(blockOpInfo(op.kind).name) + ")");
  }
  return Status::ok();
}

// Autocast's bfloat16 copies of a half block's inner convolution weights (not their biases),
// saved in E after the graph's own saved tensors.
std::uint64_t innerWeightCopyBytes(const BlockGraph& graph) {
  std::uint64_t bytes = 0;
  for (const BlockOp& op : graph.ops)
    if (op.kind == BlockOpKind::Conv2d)
      bytes += (op.paramCount - (op.layer.bias ? static_cast<std::uint64_t>(op.layer.outChannels) : 0)) * kHalfBytes;
  return bytes;
}

Status checkHalfBlock(const ChainLayer& layer, const LayerSpec& spec, const HalfMode& mode, const LayerChecks& check) {
  // Its input's cast would have to stand in for x0 inside the block's graph: only a block after a
  // float32 layer casts, and the CPU refuses it alike.
  if (mode.castsInput) return refuse(check, "a residual block reading a float32 input");
  auto graph = buildBlockGraph(spec, layer.inputShape, DType::BFloat16);
  if (!graph) return check.fail(graph.status().message());
  REMAT_RETURN_IF_ERROR(checkHalfBlockOps(*graph, check));
  AutocastCasts casts;
  casts.weightCopyBytes = innerWeightCopyBytes(*graph);
  return check.blockNumbers(*graph, layer, casts);
}

}  // namespace

Result<HalfMode> halfModeOf(const Chain& chain, const ChainLayer& layer, bool inputHalf, const LayerChecks& check) {
  const Precision precision = chain.step.precision;
  if (!isMixedPrecision(precision)) return HalfMode{};
  if (precision != Precision::Bf16Mixed)
    return check.fail("precision " + std::string(precisionName(precision)) +
                      ": the GPU backend has no float16 kernels; run bf16-mixed (the same model in bfloat16)");
  if (!hasHalfLayout(layer.kind)) return refuse(check, "the " + std::string(kindName(layer.kind)) + " kind");
  // GPT's, BERT's and ViT's kinds keep the float32 residual stream between layers, their bfloat16
  // tensors inside E and the workspaces; only cls_head writes bfloat16 logits (as the CPU's).
  if (hasHalfTransformerLayout(layer.kind))
    return HalfMode{.half = layer.kind == LayerKind::ClsHead, .inputHalf = inputHalf};
  const DType input = inputHalf ? DType::BFloat16 : DType::Float32;
  const DType compute = autocastComputeDType(layer.kind, input, precision);
  HalfMode mode;
  mode.half = compute == DType::BFloat16;
  mode.castsInput = mode.half && input == DType::Float32;
  mode.castsFromHalf = compute == DType::Float32 && input == DType::BFloat16;
  mode.inputHalf = inputHalf;
  return mode;
}

AutocastCasts autocastCastsOf(const ChainLayer& layer, const LayerSpec& spec, const HalfMode& mode) {
  AutocastCasts casts;
  if (mode.castsFromHalf) casts.inputCastBytes = elementCount(layer.inputShape) * kFloatBytes;
  if (!mode.half || (layer.kind != LayerKind::Conv2d && layer.kind != LayerKind::Linear)) return casts;
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  if (mode.castsInput) casts.inputCastBytes = elementCount(in) * kHalfBytes;
  const std::uint64_t weights =
      layer.kind == LayerKind::Linear
          ? elementCount(in) / static_cast<std::uint64_t>(in[0]) * static_cast<std::uint64_t>(out[1])
          : static_cast<std::uint64_t>(out[1] * (in[1] / spec.groups) * spec.kernel * spec.kernelW());
  casts.weightCopyBytes = weights * kHalfBytes;
  return casts;
}

Status checkHalfLayer(const Chain& chain, std::size_t l, const HalfMode& mode, const LayerChecks& check) {
  const ChainLayer& layer = chain.layers[l - 1];
  if (hasHalfTransformerLayout(layer.kind)) return checkHalfTransformerLayer(chain, l, mode.inputHalf, check);
  const LayerSpec& spec = chain.spec.layers[layer.specIndex];
  if (isComposite(layer.kind)) return checkHalfBlock(layer, spec, mode, check);
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  // bfloat16's adaptive pool is an average pool over whole windows (the CPU's rule alike).
  if (mode.half && layer.kind == LayerKind::AdaptiveAvgPool &&
      (in.size() != 4 || out.size() != 4 || out[2] == 0 || out[3] == 0 || in[2] % out[2] != 0 || in[3] % out[3] != 0))
    return refuse(check, "an adaptive average pool whose windows do not tile its input");
  auto params = check.primitiveLayer(layer, spec, autocastCastsOf(layer, spec, mode));
  return params ? Status::ok() : params.status();
}

Result<std::vector<HalfMode>> checkHalfChain(const Chain& chain) {
  std::vector<HalfMode> modes(1);  // x0: the data loader's float32 batch
  bool inputReal = !chain.inputShape.empty();
  std::uint64_t inputElements = elementCount(chain.inputShape);
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    const ChainLayer& layer = chain.layers[l - 1];
    if (layer.kind == LayerKind::Abstract) {  // moves bytes in any dtype; what follows reads no real input
      modes.push_back(modes.back());
      inputReal = false;
      continue;
    }
    const LayerChecks check{std::string(kGpuDeviceName), layerLabel(chain, l), true};
    auto mode = halfModeOf(chain, layer, modes.back().half, check);
    if (!mode) return mode.status();
    REMAT_RETURN_IF_ERROR(check.realLayer(chain, l, inputReal, inputElements, mode->half ? kHalfBytes : kFloatBytes));
    REMAT_RETURN_IF_ERROR(checkHalfLayer(chain, l, *mode, check));
    modes.push_back(*mode);
    inputReal = true;
    inputElements = elementCount(layer.outputShape);
  }
  return modes;
}

}  // namespace remat::gpu
