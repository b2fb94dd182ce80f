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
// ShuffleNetV2's channel slices (views, read in place or gathered) and channel shuffle. Not yet:
// ConvNeXt's inner layer norm and layer scale.
Status checkHalfBlockOps(const BlockGraph& graph, const LayerChecks& check, std::string_view precision) {
  for (const BlockOp& op : graph.ops) {
    const std::optional<LayerKind> kind = blockOpInfo(op.kind).layer;
    const bool activation = kind && isPointwise(*kind);
    const bool supported = op.kind == BlockOpKind::Conv2d || op.kind == BlockOpKind::BatchNorm ||
                           op.kind == BlockOpKind::Add || op.kind == BlockOpKind::GlobalAvgPool ||
                           op.kind == BlockOpKind::Mul || op.kind == BlockOpKind::MaxPool ||
                           op.kind == BlockOpKind::AvgPool || op.kind == BlockOpKind::Concat ||
                           op.kind == BlockOpKind::ChannelShuffle || op.kind == BlockOpKind::Slice || activation;
    if (!supported)
      return check.fail(
          "precision " + std::string(precision) + ": no bfloat16 kernel on the CPU for the block's inner op '" +
          op.layer.name + "' (" + std::string(blockOpInfo(op.kind).name) +
          ") yet (a block's convolutions, batch norms, residual add, activations, pools, product, concat, "
          "channel slices and shuffle have one); plan and simulate it, or run it as fp32");
    // The residual add's bfloat16 kernel adds equal shapes; a broadcasting add runs float32 only.
    if (op.kind == BlockOpKind::Add && graph.tensors[op.inputs[0]].shape != graph.tensors[op.inputs[1]].shape)
      return check.fail("precision " + std::string(precision) +
                        ": no bfloat16 kernel on the CPU for the block's "
                        "broadcasting add '" +
                        op.layer.name + "' (" + shapeToString(graph.tensors[op.inputs[0]].shape) + " and " +
                        shapeToString(graph.tensors[op.inputs[1]].shape) +
                        ") yet; plan and simulate it, or run it "
                        "as fp32");
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
Status prepareBlock(const DnnlContext& context, const Chain& chain, const ChainLayer& layer, const LayerSpec& spec,
                    const LayerChecks& check, bool firstLayer, bool half, PreparedLayer& prepared) {
  auto graph = buildBlockGraph(spec, layer.inputShape, half ? DType::BFloat16 : chain.dtype);
  if (!graph) return check.fail(graph.status().message());
  AutocastCasts casts;
  if (half) {
    REMAT_RETURN_IF_ERROR(checkHalfBlockOps(*graph, check, precisionName(chain.step.precision)));
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
Status prepareLayerNorm(const DnnlContext& context, const LayerSpec& spec, const Shape& in, InputGrad grad,
                        PreparedLayer& prepared) {
  if (in.size() == 4) {
    // Over the channels of NCHW (ConvNeXt's LayerNorm2d): channels-last data is N*H*W rows of C.
    prepared.params.push_back({ParamSegment::Type::Plain, 0, in[1], 0, {}});
    prepared.params.push_back({ParamSegment::Type::Plain, in[1], in[1], 0, {}});
    return setOp(LayerNormOp::create(context, in[0] * in[2] * in[3], in[1], static_cast<float>(spec.epsilon), grad,
                                     prepared.label),
                 prepared);
  }
  const Index features = prepared.in.perSample();
  const auto type = prepared.in.channelsLast ? ParamSegment::Type::FeatureVector : ParamSegment::Type::Plain;
  prepared.params.push_back({type, 0, features, 0, prepared.in});
  prepared.params.push_back({type, features, features, 0, prepared.in});
  return setOp(
      LayerNormOp::create(context, prepared.in.batch, features, static_cast<float>(spec.epsilon), grad, prepared.label),
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
    return prepareBlock(c.dnnl, c.chain, layer, spec, check, c.l == 1, c.mode.half, prepared);
  if (layer.kind == LayerKind::TransformerBlock && c.chain.step.precision == Precision::Bf16Mixed)
    return prepareHalfTransformerBlock(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::TransformerBlock)
    return prepareTransformerBlock(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::TokenEmbedding) return prepareTokenEmbedding(c.dnnl, layer, spec, check, c.l, prepared);
  if (layer.kind == LayerKind::LmHead) return prepareLmHead(c.dnnl, c.chain, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::PatchEmbedding && c.chain.step.precision == Precision::Bf16Mixed)
    return prepareHalfPatchEmbedding(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::PatchEmbedding)
    return preparePatchEmbedding(c.dnnl, layer, spec, check, c.l == 1, prepared);
  if (layer.kind == LayerKind::ClsHead && c.chain.step.precision == Precision::Bf16Mixed)
    return prepareHalfClsHead(c.dnnl, layer, spec, check, c.l == 1, prepared);
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
      REMAT_RETURN_IF_ERROR(prepareLayerNorm(c.dnnl, spec, layer.inputShape, c.grad(), prepared));
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

// The kinds with bfloat16 kernels on the CPU; the rest are refused under bf16-mixed by name (a
// block's inner ops by prepareBlock).
Status prepareHalfKind(const ChainLayer& layer, const HalfMode& mode, const LayerChecks& check) {
  const char* missing = nullptr;
  // Its input's cast would have to stand in for x0 inside the block: only a block after a
  // float32 layer (the first layer, one after a layer norm) casts, and none of our zoo's does.
  if (isComposite(layer.kind) && mode.castsInput) missing = "a residual block reading a float32 input";
  if (missing == nullptr) return Status::ok();
  return check.fail("precision bf16-mixed: no bfloat16 kernel on the CPU for " + std::string(missing) +
                    " yet (conv2d, linear, batchnorm, the pools, the activations and blocks have one); "
                    "plan and simulate it, or run it as fp32");
}

// Pure bf16 (the model cast with .to(torch.bfloat16), memory-model.md 11.7): every layer runs in
// bfloat16 on its bfloat16 parameters, with the bf16-mixed kernels minus autocast's casts
// (run_half.cpp, dnnl_half.cpp with HalfCopies::pure). Not yet: the layer norm and the transformer
// kinds but Swin's, refused by name.
Result<HalfMode> pureHalfMode(const ChainLayer& layer, const LayerChecks& check) {
  // Swin's kinds run pure on their bf16-mixed kernels with `pure` (run_swin_half.cpp).
  if ((isTransformerKind(layer.kind) && !isSwinKind(layer.kind)) || layer.kind == LayerKind::LayerNorm)
    return check.fail("precision bf16: no pure bfloat16 kernel on the CPU for " + std::string(kindName(layer.kind)) +
                      " yet (conv2d, linear, batchnorm, the pools, dropout, the activations and CNN blocks have "
                      "one); plan and simulate it, run it as bf16-mixed or as fp32");
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
  if (mode.half) REMAT_RETURN_IF_ERROR(prepareHalfKind(layer, mode, check));
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
  prepared.half = mode->half;
  prepared.halfParams = mode->pure;
  REMAT_RETURN_IF_ERROR(check.realLayer(
      chain, l, prev.real, static_cast<std::uint64_t>(prev.out.batch * prev.out.perSample()), mode->half ? 2 : 4));
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
