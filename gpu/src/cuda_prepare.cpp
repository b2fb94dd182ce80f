// Per-layer preparation of the CUDA backend: cuDNN descriptors and algorithm choices from the
// inferred shapes, parameter offsets, and the workspace each kernel needs. Checks that the chain's
// model numbers say what the GPU kernels actually read and save, so a measured run can match the
// simulator.
#include <algorithm>

#include "cuda_device_impl.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::gpu {
namespace {

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
  g.groups = static_cast<int>(spec.groups);
  return g;
}

std::uint64_t convWeightCount(const ConvGeometry& g) {
  return static_cast<std::uint64_t>(g.outChannels) * static_cast<std::uint64_t>(g.input.c / g.groups) *
         static_cast<std::uint64_t>(g.kernel) * static_cast<std::uint64_t>(g.kernel);
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

Status planBlock(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerContext& context,
                 const CudaDeviceOptions& options, const LayerChecks& check, LayerState& state) {
  auto graph = buildBlockGraph(spec, layer.inputShape, chain.dtype);
  if (!graph) return check.fail(graph.status().message());
  REMAT_RETURN_IF_ERROR(check.blockNumbers(*graph, layer));
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
      auto conv = ConvOp::create(context.cudnn, *g, false, policy, op.layer.name);
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
      REMAT_RETURN_IF_ERROR(check.innerWithoutParams(op));
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

Status prepareReal(const Chain& chain, std::size_t l, const LayerSpec& spec, const LayerContext& context,
                const CudaDeviceOptions& options, const LayerChecks& check, LayerState& state) {
  const ChainLayer& layer = chain.layers[l - 1];
  const LayerNumbers& m = layer.numbers;
  const Shape& in = layer.inputShape;
  const Shape& out = layer.outputShape;
  const auto expectedParams = [&](std::uint64_t count) { return check.expectParams(layer.paramCount, count); };
  switch (layer.kind) {
    case LayerKind::Conv2d: {
      auto g = convGeometry(spec, in);
      if (!g) return check.fail(g.status().message());
      const std::uint64_t weights = convWeightCount(*g);
      state.bias = layer.paramCount == weights + static_cast<std::uint64_t>(g->outChannels);
      state.biasOffset = static_cast<Index>(weights);
      REMAT_RETURN_IF_ERROR(expectedParams(weights + (state.bias ? static_cast<std::uint64_t>(g->outChannels) : 0)));
      REMAT_RETURN_IF_ERROR(check.expectFlag(m.needsInput, true, "needs_input"));
      auto conv = ConvOp::create(context.cudnn, *g, state.bias,
                                 convPolicy(options, m.fwdWorkspaceBytes, 0, m.bwdWorkspaceBytes, 0), layer.name);
      if (!conv) return conv.status().withContext("gpu: " + state.label);
      state.requiredFwdWorkspace = conv->forwardWorkspaceBytes();
      state.requiredBwdWorkspace = conv->backwardWorkspaceBytes();
      state.algorithms = conv->describe();
      state.conv = std::move(*conv);
      return Status::ok();
    }
    case LayerKind::Relu:
    case LayerKind::Relu6:
      REMAT_RETURN_IF_ERROR(expectedParams(0));
      return check.expectFlag(m.needsOutput, true, "needs_output");
    case LayerKind::MaxPool:
    case LayerKind::AvgPool: {
      REMAT_RETURN_IF_ERROR(expectedParams(0));
      auto dims = toDims4(in);
      if (!dims || in.size() != 4) return check.fail("pooling needs an NCHW input, got " + shapeToString(in));
      PoolGeometry g;
      g.input = *dims;
      g.kernel = static_cast<int>(spec.kernel);
      g.stride = static_cast<int>(spec.stride);
      g.padding = static_cast<int>(spec.padding);
      g.mode = layer.kind == LayerKind::MaxPool ? PoolMode::Max : PoolMode::AverageIncludePadding;
      auto pool = PoolOp::create(g);
      if (!pool) return pool.status().withContext("gpu: " + state.label);
      const Dims4 o = pool->outputDims();
      if (out.size() != 4 || o.h != out[2] || o.w != out[3])
        return check.fail("cuDNN pools to " + std::to_string(o.h) + "x" + std::to_string(o.w) + ", the chain says " +
                          shapeToString(out) + (spec.ceilMode ? " (ceil_mode is not supported on the GPU)" : ""));
      state.pool = std::move(*pool);
      if (layer.kind == LayerKind::MaxPool) {
        REMAT_RETURN_IF_ERROR(check.expectFlag(m.needsInput, true, "needs_input"));
        return check.expectFlag(m.needsOutput, true, "needs_output");
      }
      return Status::ok();
    }
    case LayerKind::AdaptiveAvgPool:
      REMAT_RETURN_IF_ERROR(expectedParams(0));
      if (in.size() != 4 || out.size() != 4)
        return check.fail("adaptive average pooling needs NCHW tensors, got " + shapeToString(in));
      state.adaptive = {in[0], in[1], in[2], in[3], out[2], out[3]};
      return Status::ok();
    case LayerKind::BatchNorm: {
      auto dims = toDims4(in);
      if (!dims) return check.fail(dims.status().message());
      REMAT_RETURN_IF_ERROR(expectedParams(2 * static_cast<std::uint64_t>(dims->c)));
      REMAT_RETURN_IF_ERROR(check.expectFlag(m.needsInput, true, "needs_input"));
      REMAT_RETURN_IF_ERROR(check.expectExtra(m.extraBytes, 2 * static_cast<std::uint64_t>(dims->c) * 4));
      auto bn = BatchNormOp::create(*dims);
      if (!bn) return bn.status().withContext("gpu: " + state.label);
      state.bn = std::move(*bn);
      if (l == 1) {
        state.dxInWorkspace = true;
        state.requiredBwdWorkspace = chain.inputBytes;
      }
      return Status::ok();
    }
    case LayerKind::Linear: {
      if (in.size() != 2 || out.size() != 2) return check.fail("linear needs [N, features] tensors");
      state.rows = in[0];
      state.inFeatures = in[1];
      state.outFeatures = out[1];
      const auto weights = static_cast<std::uint64_t>(state.inFeatures * state.outFeatures);
      state.bias = layer.paramCount == weights + static_cast<std::uint64_t>(state.outFeatures);
      state.biasOffset = static_cast<Index>(weights);
      if (state.rows > 0x7fffffff || state.inFeatures > 0x7fffffff || state.outFeatures > 0x7fffffff)
        return check.fail("a dimension exceeds cuBLAS's int");
      REMAT_RETURN_IF_ERROR(expectedParams(weights + (state.bias ? static_cast<std::uint64_t>(state.outFeatures) : 0)));
      return check.expectFlag(m.needsInput, true, "needs_input");
    }
    case LayerKind::Dropout:
      state.dropoutP = spec.dropoutP;
      REMAT_RETURN_IF_ERROR(expectedParams(0));
      return check.expectExtra(m.extraBytes, elementCount(out));
    case LayerKind::BasicBlock:
    case LayerKind::Bottleneck:
    case LayerKind::InvertedResidual: return planBlock(chain, layer, spec, context, options, check, state);
    default: break;
  }
  return check.fail("the GPU backend has no kernel for this kind");
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
  const LayerChecks check{"gpu", state.label};
  const LayerState& prev = layers[l - 1];
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
