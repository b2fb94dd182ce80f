// Per-layer preparation of the CUDA backend: cuDNN descriptors and algorithm choices from the
// inferred shapes, parameter offsets, and the workspace each kernel needs. The checks that the
// chain's model numbers say what the kernels actually read and save are layer_checks.hpp's, shared
// with the CPU.
#include <algorithm>
#include <optional>

#include "cuda_device_impl.hpp"
#include "cuda_half.hpp"
#include "cuda_heads_half.hpp"
#include "cuda_patch_half.hpp"
#include "cuda_swin.hpp"
#include "cuda_swin_half.hpp"
#include "cuda_swin_half_layout.hpp"
#include "cuda_transformer.hpp"
#include "cuda_transformer_ends.hpp"
#include "cuda_transformer_half.hpp"
#include "cuda_transformer_half_layout.hpp"
#include "cuda_vit.hpp"
#include "remat/exec/layer_checks.hpp"
#include "remat/model/operators.hpp"

namespace remat::gpu {

// Shared with bf16-mixed's convolutions (cuda_half_conv.cpp; declared in cuda_device_impl.hpp).
std::uint64_t alignUp(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

Result<ConvGeometry> convGeometry(const LayerSpec& spec, const Shape& in) {
  auto dims = toDims4(in);
  if (!dims) return dims.status();
  if (in.size() != 4) return Status::invalid("conv2d needs an NCHW input, got " + shapeToString(in));
  ConvGeometry g;
  g.input = *dims;
  g.outChannels = static_cast<int>(spec.outChannels);
  g.kernel = static_cast<int>(spec.kernel);
  g.stride = static_cast<int>(spec.stride);
  g.padding = static_cast<int>(spec.padding);
  g.kernelWidth = static_cast<int>(spec.kernelW());
  g.strideWidth = static_cast<int>(spec.strideW());
  g.paddingWidth = static_cast<int>(spec.paddingW());
  g.groups = static_cast<int>(spec.groups);
  return g;
}

std::uint64_t convWeightCount(const ConvGeometry& g) {
  return static_cast<std::uint64_t>(g.outChannels) * static_cast<std::uint64_t>(g.input.c / g.groups) *
         static_cast<std::uint64_t>(g.kernel) * static_cast<std::uint64_t>(g.kernelW());
}

// The workspace a convolution may use: everything the chain gives (policy Chain) past `offset`,
// or the cap (policy Profile).
AlgorithmPolicy convPolicy(const CudaDeviceOptions& options, std::uint64_t fwdBytes, std::uint64_t fwdOffset,
                           std::uint64_t bwdBytes, std::uint64_t bwdOffset) {
  AlgorithmPolicy policy;
  policy.deterministic = options.deterministic;
  policy.allowTf32 = options.allowTf32;
  if (options.workspacePolicy == WorkspacePolicy::Profile) {
    policy.forwardLimitBytes = options.workspaceCapBytes;
    policy.backwardLimitBytes = options.workspaceCapBytes;
  } else {
    policy.forwardLimitBytes = fwdBytes > fwdOffset ? fwdBytes - fwdOffset : 0;
    policy.backwardLimitBytes = bwdBytes > bwdOffset ? bwdBytes - bwdOffset : 0;
  }
  return policy;
}

namespace {

// The pool branches' windows (GoogLeNet, Inception), run by kernels_pool.cu.
kernels::PoolWindowGeometry poolWindows(const LayerSpec& spec, const Shape& in, const Shape& out) {
  kernels::PoolWindowGeometry g;
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

// The parameters of the inner ops that run own kernels: ConvNeXt's channel layer norm (2C, and its
// statistics) and layer_scale (C); none for the others.
Status checkOwnKernelParams(const BlockOp& op, const Shape& in, const LayerChecks& check) {
  if (op.kind == BlockOpKind::LayerNorm) return check.innerLayerNorm(op, in);
  if (op.kind == BlockOpKind::LayerScale) return check.innerLayerScale(op, static_cast<std::uint64_t>(in[1]));
  return check.innerWithoutParams(op);
}

// Every inner op has a GPU kernel (cuda_layers_run.cpp); the model admits tensors of other ranks
// than NCHW only for element-wise blocks, which the kernels' Dims4 hold up to rank 4 ([N, F] and
// [N, S, F] row-major). An inner dropout must keep its one-byte mask, all its backward reads.
Status checkGpuBlockOps(const BlockGraph& graph, const ChainLayer& layer, const LayerChecks& check) {
  for (const BlockTensor& t : graph.tensors)
    if (t.shape.size() < 2 || t.shape.size() > 4)
      return check.fail("the GPU runs blocks on tensors of rank 2 to 4, not on " + shapeToString(t.shape) + " ('" +
                        t.name + "' of " + shapeToString(layer.inputShape) +
                        "); plan and simulate it, or run it on the CPU");
  for (const BlockOp& op : graph.ops)
    if (op.kind == BlockOpKind::Dropout && op.statsBytes != elementCount(graph.tensors[op.inputs[0]].shape))
      return check.fail("inner dropout '" + op.layer.name + "' keeps no one-byte mask per element");
  return Status::ok();
}

Status prepareBlock(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerContext& context,
                    const CudaDeviceOptions& options, const LayerChecks& check, LayerState& state) {
  auto graph = buildBlockGraph(spec, layer.inputShape, chain.dtype);
  if (!graph) return check.fail(graph.status().message());
  REMAT_RETURN_IF_ERROR(check.blockNumbers(*graph, layer));
  REMAT_RETURN_IF_ERROR(checkGpuBlockOps(*graph, layer, check));
  const LayerNumbers& m = layer.numbers;
  BlockState block;
  block.fwdScratchOffset = alignUp(graph->fwdWorkspaceBytes, kBlockTensorAlignBytes);
  block.bwdScratchOffset = alignUp(graph->bwdWorkspaceBytes, kBlockTensorAlignBytes);
  const AlgorithmPolicy policy =
      convPolicy(options, m.fwdWorkspaceBytes, block.fwdScratchOffset, m.bwdWorkspaceBytes, block.bwdScratchOffset);
  Index offset = 0;
  for (const BlockOp& op : graph->ops) {
    BlockOpState s;
    const Shape& in = graph->tensors[op.inputs[0]].shape;
    s.count = static_cast<Index>(elementCount(graph->tensors[op.output].shape));
    s.weightOffset = offset;
    if (op.kind == BlockOpKind::Conv2d) {
      auto g = convGeometry(op.layer, in);
      if (!g) return check.fail("inner conv '" + op.layer.name + "': " + g.status().message());
      REMAT_RETURN_IF_ERROR(check.innerConv(op, convWeightCount(*g)));
      s.biasOffset = offset + static_cast<Index>(convWeightCount(*g));
      auto conv = ConvOp::create(context.cudnn, *g, op.layer.bias, policy, op.layer.name);
      if (!conv) return conv.status().withContext("gpu: " + state.label);
      block.fwdScratchBytes = std::max(block.fwdScratchBytes, conv->forwardWorkspaceBytes());
      block.bwdScratchBytes = std::max(block.bwdScratchBytes, conv->backwardWorkspaceBytes());
      if (!state.algorithms.empty()) state.algorithms += "; ";
      state.algorithms += op.layer.name + ": " + conv->describe();
      s.conv = std::move(*conv);
    } else if (op.kind == BlockOpKind::BatchNorm) {
      auto dims = toDims4(in);
      if (!dims) return check.fail("inner batch norm '" + op.layer.name + "': " + dims.status().message());
      REMAT_RETURN_IF_ERROR(check.innerBatchNorm(op, static_cast<std::uint64_t>(dims->c)));
      auto bn = BatchNormOp::create(*dims);
      if (!bn) return bn.status().withContext("gpu: " + state.label);
      s.bn = std::move(*bn);
    } else {
      const Shape& out = graph->tensors[op.output].shape;
      s.batch = out[0];
      s.outPerSample = s.count / out[0];
      if (op.kind == BlockOpKind::MaxPool || op.kind == BlockOpKind::AvgPool) s.pool = poolWindows(op.layer, in, out);
      REMAT_RETURN_IF_ERROR(checkOwnKernelParams(op, in, check));
    }
    offset += static_cast<Index>(op.paramCount);
    block.ops.push_back(std::move(s));
  }
  state.requiredFwdWorkspace =
      block.fwdScratchBytes > 0 ? block.fwdScratchOffset + block.fwdScratchBytes : graph->fwdWorkspaceBytes;
  state.requiredBwdWorkspace =
      block.bwdScratchBytes > 0 ? block.bwdScratchOffset + block.bwdScratchBytes : graph->bwdWorkspaceBytes;
  block.graph = std::move(graph).value();
  state.block = std::move(block);
  return Status::ok();
}

Status prepareConv(const ChainLayer& layer, const LayerSpec& spec, const LayerContext& context,
                   const CudaDeviceOptions& options, const LayerChecks& check, const PrimitiveParameters& params,
                   LayerState& state) {
  auto g = convGeometry(spec, layer.inputShape);
  if (!g) return check.fail(g.status().message());
  const LayerNumbers& m = layer.numbers;
  state.bias = params.biases > 0;
  state.biasOffset = static_cast<Index>(params.weights);
  auto conv = ConvOp::create(context.cudnn, *g, state.bias,
                             convPolicy(options, m.fwdWorkspaceBytes, 0, m.bwdWorkspaceBytes, 0), layer.name);
  if (!conv) return conv.status().withContext("gpu: " + state.label);
  state.requiredFwdWorkspace = conv->forwardWorkspaceBytes();
  state.requiredBwdWorkspace = conv->backwardWorkspaceBytes();
  state.algorithms = conv->describe();
  state.conv = std::move(*conv);
  return Status::ok();
}

}  // namespace

// cuDNN must pool to the shape that PyTorch's rule gave the chain; it has no ceil mode. A bfloat16
// layer (state.half, bf16-mixed) pools bfloat16 tensors.
Status preparePool(const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check, LayerState& state) {
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  auto dims = toDims4(in);
  if (!dims) return check.fail(dims.status().message());
  PoolGeometry g;
  g.input = *dims;
  g.kernel = static_cast<int>(spec.kernel);
  g.stride = static_cast<int>(spec.stride);
  g.padding = static_cast<int>(spec.padding);
  g.mode = layer.kind == LayerKind::MaxPool ? PoolMode::Max : PoolMode::AverageIncludePadding;
  g.bfloat16 = state.half;
  auto pool = PoolOp::create(g);
  if (!pool) return pool.status().withContext("gpu: " + state.label);
  const Dims4 o = pool->outputDims();
  if (o.h != out[2] || o.w != out[3])
    return check.fail("cuDNN pools to " + std::to_string(o.h) + "x" + std::to_string(o.w) + ", the chain says " +
                      shapeToString(out) + (spec.ceilMode ? " (ceil_mode is not supported on the GPU)" : ""));
  state.pool = std::move(*pool);
  return Status::ok();
}

namespace {

// Layer 1's input needs no gradient, but cuDNN's batch-norm backward always writes dx: it goes to
// the workspace, which the chain must then hold.
Status prepareBatchNorm(const Chain& chain, std::size_t l, const LayerChecks& check, LayerState& state) {
  auto dims = toDims4(chain.layers[l - 1].inputShape);
  if (!dims) return check.fail(dims.status().message());
  auto bn = BatchNormOp::create(*dims);
  if (!bn) return bn.status().withContext("gpu: " + state.label);
  state.bn = std::move(*bn);
  if (l == 1) {
    state.dxInWorkspace = true;
    state.requiredBwdWorkspace = chain.inputBytes;
  }
  return Status::ok();
}

Status prepareLinear(const ChainLayer& layer, const LayerChecks& check, const PrimitiveParameters& params,
                     LayerState& state) {
  state.rows = layer.inputShape[0];
  state.inFeatures = layer.inputShape[1];
  state.outFeatures = layer.outputShape[1];
  state.bias = params.biases > 0;
  state.biasOffset = static_cast<Index>(params.weights);
  if (state.rows > 0x7fffffff || state.inFeatures > 0x7fffffff || state.outFeatures > 0x7fffffff)
    return check.fail("a dimension exceeds cuBLAS's int");
  return Status::ok();
}

// The transformer and Swin kinds, which run their own runners (primitiveLayer would refuse them
// by name); nullopt for the others.
std::optional<Status> prepareOwnRunner(const Chain& chain, std::size_t l, const LayerSpec& spec,
                                       const LayerContext& context, const CudaDeviceOptions& options,
                                       const LayerChecks& check, LayerState& state) {
  const ChainLayer& layer = chain.layers[l - 1];
  switch (layer.kind) {
    case LayerKind::TransformerBlock: return prepareTransformerBlock(layer, spec, check, state);
    case LayerKind::TokenEmbedding: return prepareTokenEmbedding(layer, spec, check, l, state);
    case LayerKind::LmHead: return prepareLmHead(chain, layer, spec, check, state);
    case LayerKind::PatchEmbedding: return preparePatchEmbedding(layer, spec, check, context, options, state);
    case LayerKind::ClsHead: return prepareClsHead(layer, spec, check, state);
    case LayerKind::SwinBlock: return prepareSwinBlock(layer, spec, check, state);
    case LayerKind::SwinEmbedding: return prepareSwinEmbedding(layer, spec, check, context, options, state);
    case LayerKind::PatchMerging: return preparePatchMerging(layer, spec, check, state);
    case LayerKind::SwinHead: return prepareSwinHead(layer, spec, check, state);
    default: return std::nullopt;
  }
}

Status prepareReal(const Chain& chain, std::size_t l, const LayerSpec& spec, const LayerContext& context,
                   const CudaDeviceOptions& options, const LayerChecks& check, LayerState& state) {
  const ChainLayer& layer = chain.layers[l - 1];
  if (isComposite(layer.kind)) return prepareBlock(chain, layer, spec, context, options, check, state);
  if (layer.kind == LayerKind::TransformerBlock && isMixedPrecision(chain.step.precision))
    return prepareHalfTransformerBlock(layer, spec, check, state);
  if (layer.kind == LayerKind::LmHead && isMixedPrecision(chain.step.precision))
    return prepareHalfLmHead(chain, layer, spec, check, state);
  if (layer.kind == LayerKind::PatchEmbedding && isMixedPrecision(chain.step.precision))
    return prepareHalfPatchEmbedding(layer, spec, check, state);
  if (auto own = prepareOwnRunner(chain, l, spec, context, options, check, state)) return *own;
  auto params = check.primitiveLayer(layer, spec);
  if (!params) return params.status();
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  switch (layer.kind) {
    case LayerKind::Conv2d: return prepareConv(layer, spec, context, options, check, *params, state);
    case LayerKind::MaxPool:
    case LayerKind::AvgPool: return preparePool(layer, spec, check, state);
    case LayerKind::AdaptiveAvgPool: state.adaptive = {in[0], in[1], in[2], in[3], out[2], out[3]}; return Status::ok();
    case LayerKind::BatchNorm: return prepareBatchNorm(chain, l, check, state);
    case LayerKind::Linear: return prepareLinear(layer, check, *params, state);
    case LayerKind::Dropout: state.dropoutP = spec.dropoutP; return Status::ok();
    case LayerKind::LayerNorm:  // own kernels (kernels_layernorm.cu), no workspace
      // [N, F], or NCHW over the channels (ConvNeXt's LayerNorm2d): N*H*W rows of C, H*W apart
      state.layerNormInner = in.size() == 4 ? in[2] * in[3] : 1;
      state.rows = in[0] * state.layerNormInner;
      state.inFeatures = in[1];
      state.epsilon = static_cast<float>(spec.epsilon);
      return Status::ok();
    default: return isPointwise(layer.kind) ? Status::ok() : check.noKernel();
  }
}

// bf16-mixed (cuda_half.hpp): the whole chain's dtypes, from the model's cast policy, and bytes are
// checked against its numbers when its first real layer is prepared, so a mismatch anywhere names
// its layer. The chain runs when every bfloat16 layer has bfloat16 kernels (runsHalf) and no
// float32 layer reads a bfloat16 input; otherwise it is refused there, before anything is
// allocated, naming the first layer that cannot run.
Status checkHalfChainRuns(const Chain& chain, std::size_t l) {
  auto modes = checkHalfChain(chain);
  if (!modes) return modes.status();
  for (std::size_t i = 1; i <= chain.size(); ++i) {
    const ChainLayer& layer = chain.layers[i - 1];
    const HalfMode& mode = (*modes)[i];
    // (GPT's, BERT's and ViT's kinds have their own bfloat16 runners, token_embedding its float32
    // one: float32 throughout under autocast.)
    const bool runs = mode.castsFromHalf ? layer.kind == LayerKind::LayerNorm
                                         : !mode.half || runsHalf(layer.kind) || layer.kind == LayerKind::ClsHead ||
                                               isSwinKind(layer.kind);
    const LayerChecks check{std::string(kGpuDeviceName), layerLabel(chain, l), true};
    if (layer.kind == LayerKind::Abstract || runs) continue;
    return check.fail("precision " + std::string(precisionName(chain.step.precision)) +
                      ": the GPU's half layout matches the model for every layer, but " + layerLabel(chain, i) +
                      " has no half kernels on the GPU yet (conv2d, linear, batch norm, the pools, dropout, "
                      "the activations, layer norm, the CNN blocks and GPT's, BERT's and ViT's kinds run); plan and "
                      "simulate it, run it with --device cpu, or run it as fp32");
  }
  return Status::ok();
}

// A layer that runs in bfloat16 (runsHalf): its kernels' E and parameters checked as the float32
// path's, with autocast's copies (autocastCastsOf), and its workspaces; the CNN kinds' cuDNN ops
// and workspaces are cuda_half_conv.cpp's.
Status prepareHalfLayer(const Chain& chain, std::size_t l, const LayerState& prev, const HalfMode& mode,
                        const LayerContext& context, const CudaDeviceOptions& options, const LayerChecks& check,
                        LayerState& state) {
  const ChainLayer& layer = chain.layers[l - 1];
  const LayerSpec& spec = chain.spec.layers[layer.specIndex];
  REMAT_RETURN_IF_ERROR(
      check.realLayer(chain, l, prev.real, static_cast<std::uint64_t>(prev.outCount), mode.floatOutput ? 4 : 2));
  state.real = true;
  state.half = true;
  state.castsInput = mode.castsInput;
  state.floatOutput = mode.floatOutput;
  state.inShape = layer.inputShape;
  state.outShape = layer.outputShape;
  state.inCount = static_cast<Index>(elementCount(layer.inputShape));
  state.outCount = static_cast<Index>(elementCount(layer.outputShape));
  if (isComposite(layer.kind)) return prepareHalfBlock(chain, l, spec, context, options, check, state);
  if (layer.kind == LayerKind::ClsHead) return prepareHalfClsHead(layer, spec, check, state);  // own runner
  if (layer.kind == LayerKind::SwinBlock) return prepareHalfSwinBlock(layer, spec, check, state);
  if (isSwinKind(layer.kind)) return prepareHalfSwinEnd(layer, spec, check, state);
  auto params = check.primitiveLayer(layer, spec, autocastCastsOf(layer, spec, mode));
  if (!params) return params.status();
  if (runsHalfCnn(layer.kind)) return prepareHalfCnnLayer(chain, l, spec, context, options, check, *params, state);
  if (layer.kind == LayerKind::Linear) REMAT_RETURN_IF_ERROR(prepareLinear(layer, check, *params, state));
  if (layer.kind == LayerKind::Dropout) state.dropoutP = spec.dropoutP;
  state.requiredFwdWorkspace = halfForwardWorkspaceBytes(state);
  state.requiredBwdWorkspace = halfBackwardWorkspaceBytes(state, l > 1);
  return Status::ok();
}

}  // namespace

Status prepareLayer(const Chain& chain, std::size_t l, const LayerContext& context, const CudaDeviceOptions& options,
                    std::vector<LayerState>& layers) {
  LayerState state;
  state.label = layerLabel(chain, l);
  if (l == 0) {
    state.real = !chain.inputShape.empty();
    state.outShape = chain.inputShape;
    state.outCount = static_cast<Index>(elementCount(chain.inputShape));
    layers.push_back(std::move(state));
    return Status::ok();
  }
  const ChainLayer& layer = chain.layers[l - 1];
  state.kind = layer.kind;
  if (layer.kind == LayerKind::Abstract) {
    layers.push_back(std::move(state));
    return Status::ok();
  }
  const LayerState& prev = layers[l - 1];
  const bool mixed = isMixedPrecision(chain.step.precision);
  const LayerChecks check{std::string(kGpuDeviceName), state.label, mixed};
  if (mixed) {
    const bool firstReal = std::none_of(layers.begin() + 1, layers.end(), [](const LayerState& s) { return s.real; });
    if (firstReal) REMAT_RETURN_IF_ERROR(checkHalfChainRuns(chain, l));
    auto mode = halfModeOf(chain, layer, prev.outputHalf(), check);
    if (!mode) return mode.status();
    if (mode->half || mode->castsFromHalf) {
      REMAT_RETURN_IF_ERROR(mode->half ? prepareHalfLayer(chain, l, prev, *mode, context, options, check, state)
                                       : prepareLayerNormFromHalf(chain, l, prev, *mode, check, state));
      layers.push_back(std::move(state));
      return Status::ok();
    }
  }
  REMAT_RETURN_IF_ERROR(check.realLayer(chain, l, prev.real, static_cast<std::uint64_t>(prev.outCount)));
  const std::uint64_t inCount = elementCount(layer.inputShape);
  state.real = true;
  state.inShape = layer.inputShape;
  state.outShape = layer.outputShape;
  state.inCount = static_cast<Index>(inCount);
  state.outCount = static_cast<Index>(elementCount(layer.outputShape));
  REMAT_RETURN_IF_ERROR(prepareReal(chain, l, chain.spec.layers[layer.specIndex], context, options, check, state));
  layers.push_back(std::move(state));
  return Status::ok();
}

}  // namespace remat::gpu
