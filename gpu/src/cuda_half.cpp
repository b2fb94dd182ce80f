// The mixed precisions' per-layer dtypes and saved bytes on the GPU (cuda_half.hpp). The dtype of
// every layer comes from precision.cpp's cast policy; the bytes are checked against the chain's
// numbers with the same LayerChecks the float32 path and the CPU use. bf16-mixed and fp16-mixed
// share the layout: bfloat16 and float16 are both two bytes an element, and CUDA's autocast lists
// are the same for both (half_type.hpp picks the kernels' type).
#include "cuda_half.hpp"

#include <optional>
#include <string>

#include "cuda_swin_half_layout.hpp"
#include "cuda_transformer_half_layout.hpp"
#include "remat/base/device_names.hpp"
#include "remat/model/block.hpp"
#include "remat/model/operators.hpp"
#include "remat/model/precision.hpp"

namespace remat::gpu {
namespace {

constexpr std::uint64_t kHalfBytes = 2;   // bfloat16 or float16
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
    default: return isComposite(kind) || isPointwise(kind) || hasHalfTransformerLayout(kind) || isSwinKind(kind);
  }
}

Status refuse(Precision precision, const LayerChecks& check, const std::string& what) {
  return check.fail(
      "precision " + std::string(precisionName(precision)) + ": the GPU has no half layout for " + what +
      " yet (conv2d, linear, batchnorm, the pools, dropout, flatten, the activations, layer norm, "
      "residual blocks and GPT's, BERT's and ViT's kinds have one, Swin's under bf16-mixed); plan and simulate it, "
      "or run it with --device cpu");
}

// A half block's inner ops: convolutions, batch norms, the residual add, the activations,
// Squeeze-and-Excitation's global pool and broadcasting product, the pool branches, the
// concatenation, ShuffleNetV2's channel slices and shuffle, issue 22's add, sub, div (broadcasting
// or not) and dropout, and ConvNeXt's layer norm (bfloat16 data, float32 statistics) and layer
// scale (its float32 gamma promotes the product to float32): the CPU's set (prepare.cpp).
Status checkHalfBlockOps(Precision precision, const BlockGraph& graph, const LayerChecks& check) {
  for (const BlockOp& op : graph.ops) {
    const std::optional<LayerKind> kind = blockOpInfo(op.kind).layer;
    const bool supported =
        op.kind == BlockOpKind::Conv2d || op.kind == BlockOpKind::BatchNorm || op.kind == BlockOpKind::Add ||
        op.kind == BlockOpKind::Sub || op.kind == BlockOpKind::Div || op.kind == BlockOpKind::Dropout ||
        op.kind == BlockOpKind::LayerNorm || op.kind == BlockOpKind::LayerScale ||
        op.kind == BlockOpKind::GlobalAvgPool || op.kind == BlockOpKind::Mul || op.kind == BlockOpKind::MaxPool ||
        op.kind == BlockOpKind::AvgPool || op.kind == BlockOpKind::Concat || op.kind == BlockOpKind::Slice ||
        op.kind == BlockOpKind::ChannelShuffle || (kind && isPointwise(*kind));
    if (!supported)
      return refuse(precision, check,
                    "the block's inner op '" + op.layer.name + "' (" + std::string(blockOpInfo(op.kind).name) + ")");
  }
  return Status::ok();
}

// Inside a bf16-mixed block the float32 tensors (memory-model.md 11.7: x(l-1) after a float32
// layer, layer_scale's product, the residual add after it) meet only the kernels that take them,
// as on the CPU (prepare.cpp's checkFloatTensors): x(l-1)'s cast by the block's first op, a
// convolution (its copy counted once, in E), and the float32 residual add of equal shapes.
Status checkFloatTensors(Precision precision, const BlockGraph& graph, const LayerChecks& check) {
  auto isFloat = [&](std::size_t t) { return graph.tensors[t].dtype == DType::Float32; };
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const BlockOp& op = graph.ops[i];
    const bool castConv = op.kind == BlockOpKind::Conv2d && i == 0 && op.inputs[0] == 0;
    const bool floatAdd = op.kind == BlockOpKind::Add && isFloat(op.output) && op.inputs.size() == 2 &&
                          graph.tensors[op.inputs[0]].shape == graph.tensors[op.inputs[1]].shape;
    for (std::size_t in : op.inputs) {
      if (!isFloat(in) || castConv || floatAdd) continue;
      return refuse(precision, check,
                    "the block's inner op '" + op.layer.name + "' (" + std::string(blockOpInfo(op.kind).name) +
                        ") reading the float32 tensor '" + graph.tensors[in].name + "'");
    }
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

Status checkHalfBlock(Precision precision, const ChainLayer& layer, const LayerSpec& spec, const HalfMode& mode,
                      const LayerChecks& check) {
  auto graph = halfBlockGraph(spec, layer.inputShape, mode.castsInput);
  if (!graph) return check.fail(graph.status().message());
  REMAT_RETURN_IF_ERROR(checkHalfBlockOps(precision, *graph, check));
  REMAT_RETURN_IF_ERROR(checkFloatTensors(precision, *graph, check));
  AutocastCasts casts;
  // A float32 x(l-1) (ConvNeXt's) is read through the first convolution's bfloat16 cast, saved in
  // E before the weight copies (memory-model.md 11.7, rule 3).
  if (mode.castsInput) casts.inputCastBytes = elementCount(layer.inputShape) * kHalfBytes;
  casts.weightCopyBytes = innerWeightCopyBytes(*graph);
  return check.blockNumbers(*graph, layer, casts);
}

}  // namespace

Result<BlockGraph> halfBlockGraph(const LayerSpec& spec, const Shape& input, bool floatInput) {
  // One layout for both half types: the graph's half tensors are laid out as bfloat16 (two bytes).
  return buildBlockGraph(spec, input, DType::BFloat16, BlockAutocast{floatInput ? DType::Float32 : DType::BFloat16});
}

HalfType halfTypeOf(Precision precision) {
  return precision == Precision::Fp16Mixed || precision == Precision::Fp16 ? HalfType::Float16 : HalfType::BFloat16;
}

Result<HalfMode> halfModeOf(const Chain& chain, const ChainLayer& layer, bool inputHalf, const LayerChecks& check) {
  const Precision precision = chain.step.precision;
  if (!isMixedPrecision(precision)) return HalfMode{};
  if (!hasHalfLayout(layer.kind)) return refuse(precision, check, "the " + std::string(kindName(layer.kind)) + " kind");
  // GPT's, BERT's and ViT's kinds keep the float32 residual stream between layers, their bfloat16
  // tensors inside E and the workspaces; only cls_head writes bfloat16 logits (as the CPU's).
  if (hasHalfTransformerLayout(layer.kind))
    return HalfMode{.half = layer.kind == LayerKind::ClsHead, .inputHalf = inputHalf};
  // Swin's stream is bfloat16 from its patch embedding on, logits included (cuda_swin_half.hpp);
  // its kernels are bfloat16's only.
  if (isSwinKind(layer.kind)) {
    if (precision != Precision::Bf16Mixed)
      return refuse(precision, check, "the " + std::string(kindName(layer.kind)) + " kind under float16");
    return HalfMode{.half = true, .inputHalf = inputHalf};
  }
  // The precision's half dtype: bfloat16 (bf16-mixed) or float16 (fp16-mixed).
  const DType halfDType = precision == Precision::Fp16Mixed ? DType::Float16 : DType::BFloat16;
  const DType input = inputHalf ? halfDType : DType::Float32;
  const DType compute = autocastComputeDType(layer.kind, input, precision);
  HalfMode mode;
  mode.half = compute == halfDType;
  mode.castsInput = mode.half && input == DType::Float32;
  mode.castsFromHalf = compute == DType::Float32 && input == halfDType;
  if (mode.half && isComposite(layer.kind)) {  // type promotion may make the block's output float32
    auto graph = halfBlockGraph(chain.spec.layers[layer.specIndex], layer.inputShape, mode.castsInput);
    if (!graph) return check.fail(graph.status().message());
    mode.floatOutput = graph->tensors[graph->outputTensor()].dtype == DType::Float32;
  }
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
  if (isSwinKind(layer.kind)) return checkHalfSwinLayer(chain, l, mode.inputHalf, check);
  const LayerSpec& spec = chain.spec.layers[layer.specIndex];
  if (isComposite(layer.kind)) return checkHalfBlock(chain.step.precision, layer, spec, mode, check);
  // (bfloat16's adaptive pool takes PyTorch's bins, overlapping or not: kernels_half_pool.cu, as
  // the CPU's own kernel for VGG's and AlexNet's 7x7 of a smaller map.)
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
    auto mode = halfModeOf(chain, layer, modes.back().outputHalf(), check);
    if (!mode) return mode.status();
    REMAT_RETURN_IF_ERROR(
        check.realLayer(chain, l, inputReal, inputElements, mode->outputHalf() ? kHalfBytes : kFloatBytes));
    REMAT_RETURN_IF_ERROR(checkHalfLayer(chain, l, *mode, check));
    modes.push_back(*mode);
    inputReal = true;
    inputElements = elementCount(layer.outputShape);
  }
  return modes;
}

}  // namespace remat::gpu
