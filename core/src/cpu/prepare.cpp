// Per-layer preparation of the CPU backend: which layout each activation has, the kernel geometry
// from the inferred shapes, the oneDNN primitives of each layer (and what scratch they need: the
// device's wf / wb) and where the parameters sit. The checks that the chain's model
// numbers say what the kernels actually read and save are layer_checks.hpp's, shared with the GPU.
#include <cstring>

#include "device_impl.hpp"
#include "remat/exec/layer_checks.hpp"
#include "remat/model/operators.hpp"

namespace remat::cpu {

ConvGeometry convGeometry(const LayerSpec& spec, const Shape& in, const Shape& out) {
  ConvGeometry g;
  g.batch = in[0];
  g.inChannels = in[1];
  g.inHeight = in[2];
  g.inWidth = in[3];
  g.outChannels = out[1];
  g.outHeight = out[2];
  g.outWidth = out[3];
  g.kernel = spec.kernel;
  g.stride = spec.stride;
  g.padding = spec.padding;
  g.kernelW = spec.kernelW();
  g.strideW = spec.strideW();
  g.paddingW = spec.paddingW();
  g.groups = spec.groups;
  return g;
}

PoolGeometry poolGeometry(const LayerSpec& spec, const Shape& in, const Shape& out) {
  PoolGeometry g;
  g.batch = in[0];
  g.channels = in[1];
  g.inHeight = in[2];
  g.inWidth = in[3];
  g.outHeight = out[2];
  g.outWidth = out[3];
  g.kernel = spec.kernel;
  g.stride = spec.stride;
  g.padding = spec.padding;
  return g;
}

namespace {

ActivationLayout layoutOf(const Shape& shape) {
  ActivationLayout layout;
  if (shape.empty()) return layout;
  layout.batch = shape[0];
  if (shape.size() == 4) {
    layout.channels = shape[1];
    layout.height = shape[2];
    layout.width = shape[3];
    layout.channelsLast = true;
  } else {
    Index rest = 1;
    for (std::size_t i = 1; i < shape.size(); ++i) rest *= shape[i];
    layout.channels = rest;
  }
  return layout;
}

// Swin's residual stream [N, H, W, C] (or its head's [N, out]): canonical order, no permutation.
ActivationLayout streamLayout(const Shape& shape) {
  ActivationLayout layout;
  layout.batch = shape[0];
  layout.channels = static_cast<Index>(elementCount(shape) / static_cast<std::uint64_t>(shape[0]));
  return layout;
}

// Under bf16-mixed a block runs every inner op in bfloat16 (memory-model.md 11.7); the inner ops
// with bfloat16 kernels are ResNet's, MobileNetV2's, Squeeze-and-Excitation's and Inception's:
// convolutions (1x7 and 7x1 too), batch norms, the residual add, the activations, the global
// average pool, the broadcasting product, the pool branches' max and average pools, the concat,
// ShuffleNetV2's channel slices (views, read in place or gathered) and channel shuffle, issue 22's
// broadcasting add, sub, div and dropout, ConvNeXt's layer norm (bfloat16 data, float32
// statistics) and layer scale (under bf16-mixed its float32 gamma promotes the product to float32,
// and the residual add after it runs in float32).
Status checkHalfBlockOps(const BlockGraph& graph, const LayerChecks& check, std::string_view precision) {
  for (const BlockOp& op : graph.ops) {
    const std::optional<LayerKind> kind = blockOpInfo(op.kind).layer;
    const bool activation = kind && isPointwise(*kind);
    const bool supported = op.kind == BlockOpKind::LayerNorm || op.kind == BlockOpKind::LayerScale ||
                           op.kind == BlockOpKind::Conv2d || op.kind == BlockOpKind::BatchNorm ||
                           op.kind == BlockOpKind::Add || op.kind == BlockOpKind::Sub || op.kind == BlockOpKind::Div ||
                           op.kind == BlockOpKind::Dropout || op.kind == BlockOpKind::GlobalAvgPool ||
                           op.kind == BlockOpKind::Mul || op.kind == BlockOpKind::MaxPool ||
                           op.kind == BlockOpKind::AvgPool || op.kind == BlockOpKind::Concat ||
                           op.kind == BlockOpKind::ChannelShuffle || op.kind == BlockOpKind::Slice || activation;
    if (!supported)
      return check.fail(
          "precision " + std::string(precision) + ": no bfloat16 kernel on the CPU for the block's inner op '" +
          op.layer.name + "' (" + std::string(blockOpInfo(op.kind).name) +
          ") yet (a block's convolutions, batch norms, layer norms, layer scales, add, sub, mul, div, dropout, "
          "activations, pools, concat, channel slices and shuffle have one); plan and simulate it, or run it as fp32");
  }
  return Status::ok();
}

// Inside a bf16-mixed block the float32 tensors (memory-model.md 11.7: x(l-1) after a float32
// layer, layer_scale's product, the residual add after it) meet only the kernels that take them:
// x(l-1)'s cast by the block's first op, a convolution (its copy counted once, in E), and a float32
// add (of float32 operands or one float32 and one bfloat16); the rest is refused by inner op.
Status checkFloatTensors(const BlockGraph& graph, const LayerChecks& check) {
  auto isFloat = [&](std::size_t t) { return graph.tensors[t].dtype == DType::Float32; };
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const BlockOp& op = graph.ops[i];
    const bool castConv = op.kind == BlockOpKind::Conv2d && i == 0 && op.inputs[0] == 0;
    // The float32 add is the residual add of equal shapes (a broadcasting add runs in one dtype).
    const bool floatAdd = op.kind == BlockOpKind::Add && isFloat(op.output) &&
                          graph.tensors[op.inputs[0]].shape == graph.tensors[op.inputs[1]].shape;
    for (std::size_t in : op.inputs) {
      if (!isFloat(in) || castConv || floatAdd) continue;
      return check.fail("precision bf16-mixed: no kernel on the CPU for the block's inner op '" + op.layer.name +
                        "' (" + std::string(blockOpInfo(op.kind).name) + ") reading the float32 tensor '" +
                        graph.tensors[in].name +
                        "' yet (a float32 block input is cast by a first convolution, a float32 add takes "
                        "it); plan and simulate it, or run it as fp32");
    }
  }
  return Status::ok();
}

// Autocast's half copies of a half block's inner convolution weights, saved in E after the
// graph's own saved tensors (precision.cpp counts them alike).
std::uint64_t innerWeightCopyBytes(const BlockGraph& graph) {
  std::uint64_t bytes = 0;
  for (const BlockOp& op : graph.ops)
    if (op.kind == BlockOpKind::Conv2d)
      bytes += (op.paramCount - (op.layer.bias ? static_cast<std::uint64_t>(op.layer.outChannels) : 0)) * 2;
  return bytes;
}

// A block: its inner graph (checked against the chain's numbers and each inner op's parameters),
// whose parameters keep PyTorch's order, and the primitives of its inner ops (run_blocks.cpp).
// `half`: a bfloat16 block, its arenas laid out for half tensors: bf16-mixed's (autocast's weight
// copies in E) or pure bf16's (prepared.halfParams: bfloat16 parameters, no copies).
// `floatInput`: a bf16-mixed block reading a float32 x(l-1) (after a layer norm or a block whose
// output is float32): its first convolution casts it (autocast's copy in E, before the weight copies).
Status prepareBlock(const DnnlContext& context, const Chain& chain, const ChainLayer& layer, const LayerSpec& spec,
                    const LayerChecks& check, bool firstLayer, bool half, bool floatInput, PreparedLayer& prepared) {
  auto graph = half && !prepared.halfParams
                   ? buildBlockGraph(spec, layer.inputShape, DType::BFloat16,
                                     BlockAutocast{floatInput ? DType::Float32 : DType::BFloat16})
                   : buildBlockGraph(spec, layer.inputShape, half ? DType::BFloat16 : chain.dtype);
  if (!graph) return check.fail(graph.status().message());
  AutocastCasts casts;
  if (half) {
    REMAT_RETURN_IF_ERROR(checkHalfBlockOps(*graph, check, precisionName(chain.step.precision)));
    REMAT_RETURN_IF_ERROR(checkFloatTensors(*graph, check));
    if (floatInput) casts.inputCastBytes = elementCount(layer.inputShape) * 2;
    if (!prepared.halfParams) casts.weightCopyBytes = innerWeightCopyBytes(*graph);
  }
  REMAT_RETURN_IF_ERROR(check.blockNumbers(*graph, layer, casts));
  for (const BlockOp& op : graph->ops) {
    const Shape& in = graph->tensors[op.inputs[0]].shape;
    const Shape& out = graph->tensors[op.output].shape;
    if (op.kind == BlockOpKind::Conv2d) {
      const ConvGeometry g = convGeometry(op.layer, in, out);
      REMAT_RETURN_IF_ERROR(
          check.innerConv(op, static_cast<std::uint64_t>(g.outChannels * (g.inChannels / g.groups) * g.taps())));
    } else if (op.kind == BlockOpKind::BatchNorm) {
      REMAT_RETURN_IF_ERROR(check.innerBatchNorm(op, static_cast<std::uint64_t>(in[1])));
    } else if (op.kind == BlockOpKind::LayerNorm) {
      REMAT_RETURN_IF_ERROR(check.innerLayerNorm(op, in));
    } else if (op.kind == BlockOpKind::LayerScale) {
      REMAT_RETURN_IF_ERROR(check.innerLayerScale(op, static_cast<std::uint64_t>(in[1])));
    } else if (op.kind == BlockOpKind::Dropout && op.statsBytes != elementCount(in)) {
      return check.fail("inner dropout '" + op.layer.name + "' keeps no one-byte mask per element");
    } else {
      REMAT_RETURN_IF_ERROR(check.innerWithoutParams(op));
    }
  }
  prepared.block = std::move(graph).value();
  return prepareBlockOps(context, *prepared.block, firstLayer, prepared);
}

Index elements(const ActivationLayout& layout) { return layout.batch * layout.perSample(); }

// Stores a kind's primitives and the scratch they need as the layer's wf / wb.
template <typename Op>
Status setOp(Result<Op> op, PreparedLayer& prepared) {
  if (!op) return op.status();
  prepared.requiredFwdWorkspace = op->forwardScratchBytes();
  prepared.requiredBwdWorkspace = op->backwardScratchBytes();
  prepared.op = std::move(op).value();
  return Status::ok();
}

// bf16-mixed (memory-model.md section 11.7): whether the layer runs in bfloat16 (then its oneDNN
// primitives take bf16 data), and whether it casts a float32 input (conv2d, linear).
struct HalfMode {
  bool half = false;
  bool pure = false;  // pure bf16: bfloat16 parameters and gradients as well, no casts at all
  bool castsInput = false;
  bool castsFromHalf = false;  // a float32 layer (layer norm) reading a bfloat16 input
  bool floatOutput = false;    // a half block whose x(l) type promotion makes float32 (ConvNeXt's)
  dnnl::memory::data_type type() const { return half ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32; }
};

Status prepareConv(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec,
                   const PrimitiveParameters& params, InputGrad grad, HalfMode mode, PreparedLayer& prepared) {
  const ConvGeometry g = convGeometry(spec, layer.inputShape, layer.outputShape);
  const bool bias = params.biases > 0;
  if (bias) prepared.biasOffset = static_cast<Index>(params.weights);
  // PyTorch's weight order is the one the parameter buffer keeps (dnnl_conv.cpp).
  prepared.params.push_back({ParamSegment::Type::Plain, 0, static_cast<Index>(params.weights + params.biases), 0, {}});
  if (mode.half)
    return setOp(HalfConvOp::create(context, g, bias, mode.castsInput, grad, prepared.label, mode.pure), prepared);
  return setOp(ConvOp::create(context, g, bias, grad, prepared.label), prepared);
}

Status prepareBatchNorm(const DnnlContext& context, const Shape& in, InputGrad grad, HalfMode mode,
                        PreparedLayer& prepared) {
  const bool image = in.size() == 4;
  const Index channels = image ? in[1] : prepared.in.perSample();
  // Over a flattened channels-last input the features sit in (h, w, c) order.
  const auto type = !image && prepared.in.channelsLast ? ParamSegment::Type::FeatureVector : ParamSegment::Type::Plain;
  prepared.params.push_back({type, 0, channels, 0, prepared.in});
  prepared.params.push_back({type, channels, channels, 0, prepared.in});
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::desc data = image ? dnnl::memory::desc({in[0], in[1], in[2], in[3]}, mode.type(), tag::nhwc)
                                        : dnnl::memory::desc({prepared.in.batch, channels}, mode.type(), tag::nc);
  return setOp(BatchNormOp::create(context, data, channels, grad, prepared.label, mode.pure), prepared);
}

// Over a flattened channels-last input the features sit in (h, w, c) order: the weight and bias
// follow them (the row statistics do not depend on the order).
// Pure bf16: bfloat16 data and parameters (HalfMode::pure), float32 statistics.
Status prepareLayerNorm(const DnnlContext& context, const LayerSpec& spec, const Shape& in, InputGrad grad,
                        HalfMode mode, PreparedLayer& prepared) {
  const auto epsilon = static_cast<float>(spec.epsilon);
  if (in.size() == 4) {
    // Over the channels of NCHW (ConvNeXt's LayerNorm2d): channels-last data is N*H*W rows of C.
    prepared.params.push_back({ParamSegment::Type::Plain, 0, in[1], 0, {}});
    prepared.params.push_back({ParamSegment::Type::Plain, in[1], in[1], 0, {}});
    return setOp(LayerNormOp::create(context, in[0] * in[2] * in[3], in[1], epsilon, grad, prepared.label, mode.type(),
                                     mode.pure),
                 prepared);
  }
  const Index features = prepared.in.perSample();
  const auto type = prepared.in.channelsLast ? ParamSegment::Type::FeatureVector : ParamSegment::Type::Plain;
  prepared.params.push_back({type, 0, features, 0, prepared.in});
  prepared.params.push_back({type, features, features, 0, prepared.in});
  return setOp(
      LayerNormOp::create(context, prepared.in.batch, features, epsilon, grad, prepared.label, mode.type(), mode.pure),
      prepared);
}

Status prepareLinear(const DnnlContext& context, const Shape& out, const PrimitiveParameters& params, InputGrad grad,
                     HalfMode mode, PreparedLayer& prepared) {
  const Index inFeatures = prepared.in.perSample(), outFeatures = out[1];
  const bool bias = params.biases > 0;
  ParamSegment w;
  // A weight row is indexed like one sample of the input, so it follows the input's layout.
  w.type = prepared.in.channelsLast ? ParamSegment::Type::LinearWeight : ParamSegment::Type::Plain;
  w.count = static_cast<Index>(params.weights);
  w.outFeatures = outFeatures;
  w.layout = prepared.in;
  prepared.params.push_back(w);
  if (bias) {
    prepared.biasOffset = w.count;
    prepared.params.push_back({ParamSegment::Type::Plain, w.count, outFeatures, 0, {}});
  }
  if (mode.half)
    return setOp(HalfLinearOp::create(context, prepared.in.batch, inFeatures, outFeatures, bias, mode.castsInput, grad,
                                      prepared.label, mode.pure),
                 prepared);
  return setOp(LinearOp::create(context, prepared.in.batch, inFeatures, outFeatures, bias, grad, prepared.label),
               prepared);
}

bool tilesSquare(const ChainLayer& layer) {
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  return in[2] == in[3] && out[2] == out[3] && out[2] != 0 && in[2] % out[2] == 0;
}

Status preparePool(const DnnlContext& context, const ChainLayer& layer, const LayerSpec& spec, HalfMode mode,
                   PreparedLayer& prepared) {
  prepared.pool = poolGeometry(spec, layer.inputShape, layer.outputShape);
  if (layer.kind == LayerKind::AdaptiveAvgPool && mode.half && tilesSquare(layer)) {
    // In bfloat16 an adaptive pool whose windows tile the input (a global pool, VGG's 7x7 of a 7x7
    // input) runs on oneDNN's average pooling, any other on the own bfloat16 kernel (run_half.cpp);
    // float32 keeps the own kernel.
    PoolGeometry tiles = prepared.pool;
    tiles.kernel = tiles.inHeight / tiles.outHeight;
    tiles.stride = tiles.kernel;
    tiles.padding = 0;
    return setOp(PoolOp::create(context, tiles, false, prepared.label, mode.type()), prepared);
  }
  if (layer.kind == LayerKind::AdaptiveAvgPool) return Status::ok();
  const bool max = layer.kind == LayerKind::MaxPool;
  prepared.ownAvgPool = !max && !prepared.pool.windowsInsidePadding();
  if (prepared.ownAvgPool) return Status::ok();
  return setOp(PoolOp::create(context, prepared.pool, max, prepared.label, mode.type()), prepared);
}

// Elementwise kinds write their output in their input's layout: a 2-D tensor from a flatten keeps
// its channels-last order.
bool keepsInputLayout(LayerKind kind) {
  return isPointwise(kind) || kind == LayerKind::Dropout || kind == LayerKind::BatchNorm ||
         kind == LayerKind::LayerNorm;
}

// Layer 1's backward writes no d(x0).
struct LayerContext {
  const DnnlContext& dnnl;
  const Chain& chain;
  std::size_t l = 0;
  HalfMode mode;
  InputGrad grad() const { return l == 1 ? InputGrad::None : InputGrad::Write; }
};

// Autocast's copies a half layer saves (layer_checks.hpp), as HalfConvOp / HalfLinearOp save them.
AutocastCasts autocastCasts(const ChainLayer& layer, const LayerSpec& spec, HalfMode mode) {
  AutocastCasts casts;
  if (mode.pure) return casts;  // the model cast to bfloat16: nothing is cast
  if (mode.castsFromHalf) casts.inputCastBytes = elementCount(layer.inputShape) * 4;
  if (!mode.half || (layer.kind != LayerKind::Conv2d && layer.kind != LayerKind::Linear)) return casts;
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  if (mode.castsInput) casts.inputCastBytes = elementCount(in) * 2;
  const std::uint64_t weights =
      layer.kind == LayerKind::Linear
          ? elementCount(in) / static_cast<std::uint64_t>(in[0]) * static_cast<std::uint64_t>(out[1])
          : static_cast<std::uint64_t>(out[1] * (in[1] / spec.groups) * spec.kernel * spec.kernel);
  casts.weightCopyBytes = weights * 2;
  return casts;
}

bool isSwinKind(LayerKind kind) {
  return kind == LayerKind::SwinEmbedding || kind == LayerKind::SwinBlock || kind == LayerKind::PatchMerging ||
         kind == LayerKind::SwinHead;
}

// Swin's x(l) is the residual stream [N, H, W, C] in canonical order (flat: not a CNN's channels-last
// NCHW map), which the layers after the embedding read as such.
Status prepareSwin(const LayerContext& c, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                   PreparedLayer& prepared) {
  prepared.out = streamLayout(layer.outputShape);
  // bf16-mixed and pure bf16: the bfloat16 stream (run_swin_half.cpp, run_swin_ends_half.cpp)
  const bool half = c.mode.half, pure = c.mode.pure;
  if (layer.kind == LayerKind::SwinEmbedding)
    return half ? prepareHalfSwinEmbedding(c.dnnl, layer, spec, check, c.l == 1, pure, prepared)
                : prepareSwinEmbedding(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (prepared.in.channelsLast)
    return check.fail(
        "the CPU runs this Swin kind on the [N, H, W, C] residual stream of a Swin layer before it, "
        "not on a convolution's NCHW map");
  if (layer.kind == LayerKind::SwinBlock)
    return half ? prepareHalfSwinBlock(c.dnnl, layer, spec, check, pure, prepared)
                : prepareSwinBlock(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::PatchMerging)
    return half ? prepareHalfPatchMerging(c.dnnl, layer, spec, check, pure, prepared)
                : preparePatchMerging(c.dnnl, layer, spec, check, prepared);
  return half ? prepareHalfSwinHead(c.dnnl, layer, spec, check, pure, prepared)
              : prepareSwinHead(c.dnnl, layer, spec, check, c.l == 1, prepared);
}

// A layer norm under bf16-mixed reading a bfloat16 input (HalfMode::castsFromHalf): E is [its
// statistics][the float32 cast copy], as precision.cpp appends the copy; each workspace starts
// with a float32 tensor of the input's size (the discard-mode copy, d(input) before its cast).
void castThroughFloat(const ChainLayer& layer, PreparedLayer& prepared) {
  prepared.castsFromHalf = true;
  const std::uint64_t castBytes = elementCount(layer.inputShape) * 4;
  prepared.castOffset = layer.numbers.extraBytes - castBytes;
  prepared.castScratchBytes = (castBytes + 63) / 64 * 64;  // oneDNN's scratchpads start aligned
  prepared.requiredFwdWorkspace += prepared.castScratchBytes;
  prepared.requiredBwdWorkspace += prepared.castScratchBytes;
}

Status prepareReal(const LayerContext& c, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                   PreparedLayer& prepared) {
  // A block on [N, F] or [N, S, F] holds element-wise ops only (block.cpp): x(l) has x(l-1)'s shape
  // and is written in its layout (a flatten's channels-last order included).
  const bool elementwiseBlock = isComposite(layer.kind) && layer.outputShape.size() < 4;
  prepared.out = keepsInputLayout(layer.kind) || elementwiseBlock ? prepared.in : layoutOf(layer.outputShape);
  if (isComposite(layer.kind))
    return prepareBlock(c.dnnl, c.chain, layer, spec, check, c.l == 1, c.mode.half, c.mode.castsInput, prepared);
  if (layer.kind == LayerKind::TransformerBlock && c.chain.step.precision == Precision::Bf16Mixed)
    return prepareHalfTransformerBlock(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::TransformerBlock && c.mode.pure)
    return preparePureTransformerBlock(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::TransformerBlock)
    return prepareTransformerBlock(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::TokenEmbedding) return prepareTokenEmbedding(c.dnnl, layer, spec, check, c.l, prepared);
  if (layer.kind == LayerKind::LmHead) return prepareLmHead(c.dnnl, c.chain, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::PatchEmbedding && c.chain.step.precision == Precision::Bf16Mixed)
    return prepareHalfPatchEmbedding(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::PatchEmbedding && c.mode.pure)
    return preparePurePatchEmbedding(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::PatchEmbedding)
    return preparePatchEmbedding(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::ClsHead && c.chain.step.precision == Precision::Bf16Mixed)
    return prepareHalfClsHead(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::ClsHead && c.mode.pure)
    return preparePureClsHead(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::ClsHead) return prepareClsHead(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (isSwinKind(layer.kind)) return prepareSwin(c, layer, spec, check, prepared);
  auto params = check.primitiveLayer(layer, spec, autocastCasts(layer, spec, c.mode));
  if (!params) return params.status();
  switch (layer.kind) {
    case LayerKind::Conv2d: return prepareConv(c.dnnl, layer, spec, *params, c.grad(), c.mode, prepared);
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool: return preparePool(c.dnnl, layer, spec, c.mode, prepared);
    case LayerKind::BatchNorm: return prepareBatchNorm(c.dnnl, layer.inputShape, c.grad(), c.mode, prepared);
    case LayerKind::Linear: return prepareLinear(c.dnnl, layer.outputShape, *params, c.grad(), c.mode, prepared);
    case LayerKind::Dropout: prepared.dropoutP = spec.dropoutP; return Status::ok();
    case LayerKind::LayerNorm:
      REMAT_RETURN_IF_ERROR(prepareLayerNorm(c.dnnl, spec, layer.inputShape, c.grad(), c.mode, prepared));
      if (c.mode.castsFromHalf) castThroughFloat(layer, prepared);
      return Status::ok();
    default:
      if (isPointwise(layer.kind))
        return setOp(
            EltwiseOp::create(c.dnnl, elements(prepared.out), layer.kind, c.grad(), prepared.label, c.mode.type()),
            prepared);
      return check.noKernel();
  }
}

bool isTransformerKind(LayerKind kind) {
  return kind == LayerKind::TransformerBlock || kind == LayerKind::TokenEmbedding || kind == LayerKind::LmHead ||
         kind == LayerKind::PatchEmbedding || kind == LayerKind::ClsHead || isSwinKind(kind);
}

// Pure bf16 (the model cast with .to(torch.bfloat16), memory-model.md 11.7): every layer runs in
// bfloat16 on its bfloat16 parameters, with the bf16-mixed kernels minus autocast's casts
// (run_half.cpp, dnnl_half.cpp with HalfCopies::pure; the layer norm on oneDNN's bf16 layer
// normalization); transformer_block in run_transformer_pure.cpp, token_embedding in
// run_embeddings.cpp, lm_head in run_heads_pure.cpp, patch_embedding and cls_head in
// run_vit_pure.cpp, Swin's kinds on their bf16-mixed kernels with `pure` (run_swin_half.cpp).
bool hasPureTransformerKernels(LayerKind kind) {
  return kind == LayerKind::TransformerBlock || kind == LayerKind::TokenEmbedding || kind == LayerKind::LmHead ||
         kind == LayerKind::PatchEmbedding || kind == LayerKind::ClsHead || isSwinKind(kind);
}

Result<HalfMode> pureHalfMode(const ChainLayer& layer, const LayerChecks& check) {
  if (isTransformerKind(layer.kind) && !hasPureTransformerKernels(layer.kind))
    return check.fail("precision bf16: no pure bfloat16 kernel on the CPU for " + std::string(kindName(layer.kind)) +
                      " yet (conv2d, linear, batchnorm, layernorm, the pools, dropout, the activations, CNN blocks "
                      "and the transformer and Swin kinds have one); plan and simulate it, run it as "
                      "bf16-mixed or as fp32");
  HalfMode mode;
  mode.half = true;
  mode.pure = true;
  return mode;
}

// Which dtype layer l runs in (memory-model.md 11.7): under bf16-mixed conv2d, linear and blocks
// run in half, layer norm in float32 (from a cast copy of a half input), the others in their
// input's dtype; fp16-mixed has no CPU kernels (oneDNN 2.6 has no float16
// convolution on the CPU), and the pure half modes are refused by realLayer as a half file is.
Result<HalfMode> halfModeOf(const Chain& chain, const ChainLayer& layer, const PreparedLayer& prev,
                            const LayerChecks& check) {
  if (isPureHalf(chain)) return pureHalfMode(layer, check);
  if (!isMixedPrecision(chain.step.precision)) return HalfMode{};
  if (chain.step.precision != Precision::Bf16Mixed)
    return check.fail(
        "precision " + std::string(precisionName(chain.step.precision)) +
        ": oneDNN 2.6 has no float16 convolution on the CPU; run bf16-mixed (the same model in bfloat16)");
  // GPT's and BERT's kinds keep the float32 residual stream between layers: their half tensors lie
  // inside E and the workspaces (run_transformer_half.cpp, run_heads_half.cpp); cls_head writes
  // half logits (run_vit_half.cpp), patch_embedding a float32 x(l) (run_patch_half.cpp); Swin's
  // stream is bfloat16 from its patch embedding on, logits included (run_swin_half.cpp).
  if (hasHalfTransformerKernels(layer.kind)) return HalfMode{.half = layer.kind == LayerKind::ClsHead};
  if (isSwinKind(layer.kind)) return HalfMode{.half = true};
  if (isTransformerKind(layer.kind))
    return check.fail("precision bf16-mixed: no bfloat16 kernel on the CPU for " + std::string(kindName(layer.kind)) +
                      " yet (GPT's, BERT's, ViT's and Swin's kinds have one); plan and simulate it, or run it as fp32");
  HalfMode mode;
  const bool lowerPrecision =
      layer.kind == LayerKind::Conv2d || layer.kind == LayerKind::Linear || isComposite(layer.kind);
  const bool float32 = layer.kind == LayerKind::LayerNorm;  // autocast's fp32 list
  mode.half = lowerPrecision || (prev.half && !float32);
  mode.castsInput = lowerPrecision && !prev.half;
  mode.castsFromHalf = float32 && prev.half;
  // The model's a(l) says the block's output dtype (precision.cpp's type promotion).
  mode.floatOutput =
      isComposite(layer.kind) && mode.half && layer.numbers.outBytes == elementCount(layer.outputShape) * 4;
  return mode;
}

}  // namespace

Status prepareLayer(const DnnlContext& context, const Chain& chain, std::size_t l, std::vector<PreparedLayer>& layers) {
  PreparedLayer prepared;
  prepared.label = layerLabel(chain, l);
  if (l == 0) {
    prepared.real = !chain.inputShape.empty();
    prepared.out = layoutOf(chain.inputShape);
    prepared.half = isPureHalf(chain);  // pure bf16: the input batch is bfloat16 as well
    // A chain that starts inside a Swin (a block, merging or head first) takes the [N, H, W, C]
    // stream as it is: canonical, not an NCHW image.
    if (prepared.real && !chain.layers.empty() && isSwinKind(chain.layers[0].kind) &&
        chain.layers[0].kind != LayerKind::SwinEmbedding)
      prepared.out = streamLayout(chain.inputShape);
    layers.push_back(prepared);
    return Status::ok();
  }
  const ChainLayer& layer = chain.layers[l - 1];
  prepared.kind = layer.kind;
  if (layer.kind == LayerKind::Abstract) {
    layers.push_back(prepared);
    return Status::ok();
  }
  const LayerChecks check{std::string(kCpuDeviceName), prepared.label, true};
  const PreparedLayer& prev = layers[l - 1];
  auto mode = halfModeOf(chain, layer, prev, check);
  if (!mode) return mode.status();
  prepared.half = mode->half && !mode->floatOutput;  // x(l)'s dtype; a block runs its graph's (run_blocks.cpp)
  prepared.halfParams = mode->pure;
  REMAT_RETURN_IF_ERROR(check.realLayer(
      chain, l, prev.real, static_cast<std::uint64_t>(prev.out.batch * prev.out.perSample()), prepared.half ? 2 : 4));
  prepared.in = prev.out;
  prepared.real = true;
  REMAT_RETURN_IF_ERROR(
      prepareReal({context, chain, l, *mode}, layer, chain.spec.layers[layer.specIndex], check, prepared));
  layers.push_back(std::move(prepared));
  return Status::ok();
}

namespace {

// Copies `count` channels-last runs of one sample: canonical index c * hw + i <-> position i * C + c.
template <typename T>
void permuteSample(const ActivationLayout& layout, const T* from, T* to, bool toCanonical) {
  const Index hw = layout.height * layout.width, channels = layout.channels;
  for (Index i = 0; i < hw; ++i)
    for (Index c = 0; c < channels; ++c) {
      if (toCanonical)
        to[c * hw + i] = from[i * channels + c];
      else
        to[i * channels + c] = from[c * hw + i];
    }
}

}  // namespace

namespace {

template <typename T>
void convertActivationOf(const ActivationLayout& layout, const T* from, T* to, bool toCanonical) {
  const Index perSample = layout.perSample();
  if (!layout.channelsLast) {
    std::memcpy(to, from, static_cast<std::size_t>(layout.batch * perSample) * sizeof(T));
    return;
  }
  for (Index n = 0; n < layout.batch; ++n) permuteSample(layout, from + n * perSample, to + n * perSample, toCanonical);
}

}  // namespace

void convertActivation(const ActivationLayout& layout, const float* from, float* to, bool toCanonical) {
  convertActivationOf(layout, from, to, toCanonical);
}
void convertActivation(const ActivationLayout& layout, const BFloat16* from, BFloat16* to, bool toCanonical) {
  convertActivationOf(layout, from, to, toCanonical);
}

namespace {

template <typename T>
void convertParamsOf(const std::vector<ParamSegment>& segments, const T* from, T* to, bool toCanonical) {
  for (const ParamSegment& s : segments) {
    switch (s.type) {
      case ParamSegment::Type::Plain:
        std::memcpy(to + s.offset, from + s.offset, static_cast<std::size_t>(s.count) * sizeof(T));
        break;
      case ParamSegment::Type::LinearWeight: {
        // Each weight row is indexed like one sample of the (flattened channels-last) input.
        const Index in = s.count / s.outFeatures;
        for (Index o = 0; o < s.outFeatures; ++o)
          permuteSample(s.layout, from + s.offset + o * in, to + s.offset + o * in, toCanonical);
        break;
      }
      case ParamSegment::Type::FeatureVector:
        permuteSample(s.layout, from + s.offset, to + s.offset, toCanonical);
        break;
    }
  }
}

}  // namespace

void convertParams(const std::vector<ParamSegment>& segments, const float* from, float* to, bool toCanonical) {
  convertParamsOf(segments, from, to, toCanonical);
}
// Pure bf16's parameters: the same segments over bfloat16 elements.
void convertParams(const std::vector<ParamSegment>& segments, const BFloat16* from, BFloat16* to, bool toCanonical) {
  convertParamsOf(segments, from, to, toCanonical);
}

}  // namespace remat::cpu
