// Mixed precision as autocast runs it (docs/memory-model.md section 11.7). The chain is built twice
// from its spec, in float32 and in half; each layer takes the numbers of its compute dtype and
// then autocast's casts: the input cast (saved instead of x(l-1) when the backward reads it), the
// half weight copy (saved until B(l)) and the half weight gradient (scratch of B(l)).
#include "remat/model/precision.hpp"

#include <algorithm>

#include "remat/model/block.hpp"
#include "remat/model/operators.hpp"
#include "swin_mixed.hpp"
#include "transformer_mixed.hpp"

namespace remat {
namespace {

// Autocast's three behaviours for our kinds (CUDA's lists, autocast_mode.h).
enum class CastPolicy { LowerPrecision, Float32, FollowInput };

// The one place that maps kinds onto autocast's lists: lower_precision_fp has conv and linear
// (and the convolutions that make a block's every op half); fp32 has layer_norm; the rest falls
// through. A new kind on one of PyTorch's lists gets its row here.
CastPolicy castPolicy(LayerKind kind) {
  if (kind == LayerKind::Conv2d || kind == LayerKind::Linear || isComposite(kind)) return CastPolicy::LowerPrecision;
  if (kind == LayerKind::LayerNorm) return CastPolicy::Float32;
  return CastPolicy::FollowInput;
}

DType halfOf(Precision precision) {
  return precision == Precision::Bf16 || precision == Precision::Bf16Mixed ? DType::BFloat16 : DType::Float16;
}

DType storageDType(Precision precision) {
  if (precision == Precision::Bf16) return DType::BFloat16;
  if (precision == Precision::Fp16) return DType::Float16;
  return DType::Float32;
}

// The weight elements of a conv2d or linear (its parameters less the bias): what autograd saves.
std::uint64_t weightElements(const LayerSpec& spec, std::uint64_t paramCount) {
  if (!spec.bias) return paramCount;
  const auto out = static_cast<std::uint64_t>(spec.kind == LayerKind::Linear ? spec.outFeatures : spec.outChannels);
  return paramCount - std::min(paramCount, out);
}

struct CastBytes {
  std::uint64_t savedWeights = 0;   // the half weight copies saved for the backward
  std::uint64_t largestParams = 0;  // the largest cast op's parameters: its half gradient at once
};

// Over a layer's cast ops: the layer itself (conv2d, linear) or a block's inner convolutions.
Result<CastBytes> castBytesOf(const ChainLayer& layer, const LayerSpec& spec, DType half) {
  CastBytes cast;
  if (!isComposite(layer.kind)) {
    if (layer.kind != LayerKind::Conv2d && layer.kind != LayerKind::Linear) return cast;
    cast.savedWeights = weightElements(spec, layer.paramCount) * dtypeBytes(half);
    cast.largestParams = layer.paramCount * dtypeBytes(half);
    return cast;
  }
  auto graph = buildBlockGraph(spec, layer.inputShape, half);
  if (!graph) return graph.status();
  for (const BlockOp& op : graph->ops) {
    const LayerKind kind = blockOpInfo(op.kind).layer.value_or(LayerKind::Abstract);
    if (kind != LayerKind::Conv2d && kind != LayerKind::Linear) continue;
    cast.savedWeights += weightElements(op.layer, op.paramCount) * dtypeBytes(half);
    cast.largestParams = std::max(cast.largestParams, op.paramCount * dtypeBytes(half));
  }
  return cast;
}

// e grows by `bytes`; a layer whose e is named by parts names this one too.
void addSaved(ChainLayer& layer, const char* name, std::uint64_t bytes) {
  layer.numbers.extraBytes += bytes;
  if (!layer.extraParts.empty() && bytes > 0) layer.extraParts.push_back({name, bytes});
}

// A block under a mixed precision: its half graph with PyTorch's type promotion (BlockAutocast):
// layer_scale's float32 parameter and an add of a float32 x(l-1) make float32 tensors (ConvNeXt's
// block writes a float32 x(l)). Returns the output's dtype.
Result<DType> mixBlock(ChainLayer& layer, const LayerSpec& spec, DType input, DType half) {
  auto graph = buildBlockGraph(spec, layer.inputShape, half, BlockAutocast{input});
  if (!graph) return graph.status();
  LayerNumbers& m = layer.numbers;
  m.outBytes = graph->outBytes;
  m.needsInput = graph->needsInput;
  m.needsOutput = graph->needsOutput;
  m.extraBytes = graph->extraBytes;
  if (!spec.hasMeasuredWorkspace) {  // a device's measured (or fitted) scratch stands (chain.cpp)
    m.fwdWorkspaceBytes = graph->fwdWorkspaceBytes;
    m.bwdWorkspaceBytes = graph->bwdWorkspaceBytes;
  }
  return graph->tensors.back().dtype;
}

// Layer i of the mixed chain, reading an input of dtype `input`; returns its output's dtype.
Result<DType> mixLayer(ChainLayer& layer, const ChainLayer& halfLayer, const LayerSpec& spec, DType input, DType half) {
  if (layer.kind == LayerKind::Abstract) return input;  // states its own bytes
  // The transformer kinds run several of autocast's lists inside one layer (section 12.10).
  if (detail::hasTransformerMixedRule(layer.kind)) return detail::mixTransformerLayer(layer, spec, half);
  if (detail::hasSwinMixedRule(layer.kind)) return detail::mixSwinLayer(layer, halfLayer, spec, half);
  const CastPolicy policy = castPolicy(layer.kind);
  const DType compute = policy == CastPolicy::LowerPrecision ? half
                        : policy == CastPolicy::Float32      ? DType::Float32
                                                             : input;
  if (compute != DType::Float32) {
    const std::uint64_t paramBytes = layer.numbers.paramBytes;  // the float32 master weights
    layer.numbers = halfLayer.numbers;
    layer.extraParts = halfLayer.extraParts;
    layer.numbers.paramBytes = paramBytes;
  }
  DType output = compute;
  if (isComposite(layer.kind)) {
    auto promoted = mixBlock(layer, spec, input, half);
    if (!promoted) return promoted.status();
    output = *promoted;
  }
  LayerNumbers& m = layer.numbers;
  if (compute != input) {  // autocast's cast of x(l-1): saved in its place when the backward reads it
    const std::uint64_t castBytes = elementCount(layer.inputShape) * dtypeBytes(compute);
    if (m.needsInput) {
      m.needsInput = false;
      addSaved(layer, "autocast: the input's cast copy", castBytes);
    } else {
      m.fwdWorkspaceBytes += castBytes;
    }
  }
  if (policy == CastPolicy::LowerPrecision) {
    auto cast = castBytesOf(layer, spec, half);
    if (!cast) return cast.status();
    addSaved(layer, "autocast: the weights' half copies", cast->savedWeights);
    m.bwdWorkspaceBytes += cast->largestParams;
  }
  return output;
}

Result<Chain> buildMixed(const ChainSpec& base, Precision precision) {
  ChainSpec spec = base;
  spec.input.dtype = DType::Float32;
  auto chain = buildChain(spec);
  if (!chain) return chain.status();
  const DType half = halfOf(precision);
  spec.input.dtype = half;
  auto halfChain = buildChain(spec);
  if (!halfChain) return halfChain.status();
  DType input = DType::Float32;  // the data loader's batch
  for (std::size_t i = 0; i < chain->layers.size(); ++i) {
    ChainLayer& layer = chain->layers[i];
    const LayerSpec& layerSpec = chain->spec.layers[layer.specIndex];
    auto output = mixLayer(layer, halfChain->layers[i], layerSpec, input, half);
    if (!output)
      return output.status().withContext("chain " + chain->name + ", " + layerLabel(layerSpec, layer.specIndex));
    input = *output;
  }
  return chain;
}

}  // namespace

DType autocastComputeDType(LayerKind kind, DType input, Precision precision) {
  if (!isMixedPrecision(precision) || kind == LayerKind::Abstract) return input;
  switch (castPolicy(kind)) {
    case CastPolicy::LowerPrecision: return halfOf(precision);
    case CastPolicy::Float32: return DType::Float32;
    case CastPolicy::FollowInput: return input;
  }
  return input;
}

Precision precisionOfDType(DType dtype) {
  if (dtype == DType::BFloat16) return Precision::Bf16;
  if (dtype == DType::Float16) return Precision::Fp16;
  return Precision::Fp32;
}

StepOptions defaultStepOptions(DType dtype) {
  StepOptions options;
  options.precision = precisionOfDType(dtype);
  return options;
}

std::string describeChainDTypes(const Chain& chain) {
  if (!isMixedPrecision(chain.step.precision)) return std::string(dtypeName(chain.dtype));
  return std::string(dtypeName(chain.dtype)) + " weights, " + std::string(precisionName(chain.step.precision)) +
         " (autocast)";
}

Result<Chain> withPrecision(const Chain& chain, Precision precision) {
  if (chain.spec.layers.empty()) {  // a chain made from numbers (makeAbstractChain): nothing to rebuild
    Chain same = chain;
    same.step.precision = precision;
    return same;
  }
  Result<Chain> rebuilt = Status::internal("unset");
  if (isMixedPrecision(precision)) {
    rebuilt = buildMixed(chain.spec, precision);
  } else {
    ChainSpec spec = chain.spec;
    spec.input.dtype = storageDType(precision);
    rebuilt = buildChain(spec);
  }
  if (!rebuilt) return rebuilt.status();
  rebuilt->step = chain.step;
  rebuilt->step.precision = precision;
  return rebuilt;
}

Result<Chain> withStepOptions(Chain chain, const StepOptions& options) {
  if (options.precision == chain.step.precision) {
    chain.step = options;
    return chain;
  }
  auto rebuilt = withPrecision(chain, options.precision);
  if (!rebuilt) return rebuilt.status();
  rebuilt->step = options;
  return rebuilt;
}

std::uint64_t autocastWeightCopyBytes(const Chain& chain) {
  if (!isMixedPrecision(chain.step.precision)) return 0;
  std::uint64_t total = 0;
  for (const ChainLayer& layer : chain.layers) {
    if (detail::hasTransformerMixedRule(layer.kind) || detail::hasSwinMixedRule(layer.kind))
      total += detail::transformerWeightCopyBytes(layer);  // found by the part's name
    if (layer.kind == LayerKind::Abstract || castPolicy(layer.kind) != CastPolicy::LowerPrecision) continue;
    auto cast = castBytesOf(layer, chain.spec.layers[layer.specIndex], halfOf(chain.step.precision));
    if (cast) total += cast->savedWeights;
  }
  return total;
}

}  // namespace remat
