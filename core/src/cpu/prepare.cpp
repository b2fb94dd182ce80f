// Per-layer preparation of the CPU backend: which layout each activation has, the kernel geometry
// from the inferred shapes, and where the parameters sit. The checks that the chain's model
// numbers say what the kernels actually read and save are layer_checks.hpp's, shared with the GPU.
#include <cstring>

#include "device_impl.hpp"
#include "remat/exec/layer_checks.hpp"

namespace remat::cpu {
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
  g.groups = spec.groups;
  return g;
}

Index convWeightCount(const ConvGeometry& g) { return g.outChannels * (g.inChannels / g.groups) * g.kernel * g.kernel; }

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

Status planBlock(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                 PreparedLayer& prepared) {
  auto graph = buildBlockGraph(spec, layer.inputShape, chain.dtype);
  if (!graph) return check.fail(graph.status().message());
  REMAT_RETURN_IF_ERROR(check.blockNumbers(*graph, layer));
  Index offset = 0;
  for (const BlockOp& op : graph->ops) {
    BlockOpPlan p;
    const Shape& in = graph->tensors[op.inputs[0]].shape;
    const Shape& out = graph->tensors[op.output].shape;
    p.count = static_cast<Index>(elementCount(out));
    p.weightOffset = offset;
    if (op.kind == BlockOpKind::Conv2d) {
      p.conv = convGeometry(op.layer, in, out);
      const Index weights = convWeightCount(p.conv);
      REMAT_RETURN_IF_ERROR(check.innerConv(op, static_cast<std::uint64_t>(weights)));
      ParamSegment seg;
      seg.type = ParamSegment::Type::ConvWeight;
      seg.offset = offset;
      seg.count = weights;
      seg.conv = p.conv;
      prepared.params.push_back(seg);
      p.bias = op.layer.bias;
      p.biasOffset = offset + weights;
      if (p.bias) prepared.params.push_back({ParamSegment::Type::Plain, p.biasOffset, p.conv.outChannels, {}, 0, {}});
    } else if (op.kind == BlockOpKind::Concat) {
      p.rows = out[0] * out[2] * out[3];
      p.channels = out[1];
      REMAT_RETURN_IF_ERROR(check.innerWithoutParams(op));
    } else if (op.kind == BlockOpKind::BatchNorm) {
      p.rows = in[0] * in[2] * in[3];
      p.channels = in[1];
      REMAT_RETURN_IF_ERROR(check.innerBatchNorm(op, static_cast<std::uint64_t>(p.channels)));
      ParamSegment seg;
      seg.offset = offset;
      seg.count = 2 * p.channels;
      prepared.params.push_back(seg);
    } else {
      REMAT_RETURN_IF_ERROR(check.innerWithoutParams(op));
    }
    offset += static_cast<Index>(op.paramCount);
    prepared.blockOps.push_back(p);
  }
  prepared.requiredFwdWorkspace = graph->fwdWorkspaceBytes;
  prepared.requiredBwdWorkspace = graph->bwdWorkspaceBytes;
  prepared.block = std::move(graph).value();
  return Status::ok();
}

void prepareConv(const ChainLayer& layer, const LayerSpec& spec, const PrimitiveParameters& params,
                 PreparedLayer& prepared) {
  prepared.conv = convGeometry(spec, layer.inputShape, layer.outputShape);
  prepared.bias = params.biases > 0;
  ParamSegment w;
  w.type = ParamSegment::Type::ConvWeight;
  w.count = static_cast<Index>(params.weights);
  w.conv = prepared.conv;
  prepared.params.push_back(w);
  if (prepared.bias)
    prepared.params.push_back({ParamSegment::Type::Plain, w.count, prepared.conv.outChannels, {}, 0, {}});
}

void prepareBatchNorm(const Shape& in, PreparedLayer& prepared) {
  if (in.size() == 4) {
    prepared.bnRows = in[0] * in[2] * in[3];
    prepared.bnChannels = in[1];
  } else {
    prepared.bnRows = prepared.in.batch;
    prepared.bnChannels = prepared.in.perSample();
  }
  // Over a flattened channels-last input the features sit in (h, w, c) order.
  const auto type =
      in.size() == 2 && prepared.in.channelsLast ? ParamSegment::Type::FeatureVector : ParamSegment::Type::Plain;
  prepared.params.push_back({type, 0, prepared.bnChannels, {}, 0, prepared.in});
  prepared.params.push_back({type, prepared.bnChannels, prepared.bnChannels, {}, 0, prepared.in});
}

void prepareLinear(const Shape& out, const PrimitiveParameters& params, PreparedLayer& prepared) {
  prepared.inFeatures = prepared.in.perSample();
  prepared.outFeatures = out[1];
  prepared.bias = params.biases > 0;
  ParamSegment w;
  // A weight row is indexed like one sample of the input, so it follows the input's layout.
  w.type = prepared.in.channelsLast ? ParamSegment::Type::LinearWeight : ParamSegment::Type::Plain;
  w.count = static_cast<Index>(params.weights);
  w.outFeatures = prepared.outFeatures;
  w.layout = prepared.in;
  prepared.params.push_back(w);
  if (prepared.bias) prepared.params.push_back({ParamSegment::Type::Plain, w.count, prepared.outFeatures, {}, 0, {}});
}

// Elementwise kinds write their output in their input's layout: a 2-D tensor from a flatten keeps
// its channels-last order.
bool keepsInputLayout(LayerKind kind) {
  return kind == LayerKind::Relu || kind == LayerKind::Relu6 || kind == LayerKind::Dropout ||
         kind == LayerKind::BatchNorm;
}

Status prepareReal(const Chain& chain, const ChainLayer& layer, const LayerSpec& spec, const LayerChecks& check,
                   PreparedLayer& prepared) {
  prepared.out = keepsInputLayout(layer.kind) ? prepared.in : layoutOf(layer.outputShape);
  if (isComposite(layer.kind)) return planBlock(chain, layer, spec, check, prepared);
  auto params = check.primitiveLayer(layer, spec);
  if (!params) return params.status();
  switch (layer.kind) {
    case LayerKind::Conv2d: prepareConv(layer, spec, *params, prepared); return Status::ok();
    case LayerKind::MaxPool:
    case LayerKind::AvgPool:
    case LayerKind::AdaptiveAvgPool:
      prepared.pool = poolGeometry(spec, layer.inputShape, layer.outputShape);
      return Status::ok();
    case LayerKind::BatchNorm: prepareBatchNorm(layer.inputShape, prepared); return Status::ok();
    case LayerKind::Linear: prepareLinear(layer.outputShape, *params, prepared); return Status::ok();
    case LayerKind::Dropout: prepared.dropoutP = spec.dropoutP; return Status::ok();
    case LayerKind::Relu:
    case LayerKind::Relu6: return Status::ok();
    default: return check.noKernel();
  }
}

}  // namespace

Status prepareLayer(const Chain& chain, std::size_t l, std::vector<PreparedLayer>& layers) {
  PreparedLayer prepared;
  prepared.label = layerLabel(chain, l);
  if (l == 0) {
    prepared.real = !chain.inputShape.empty();
    prepared.out = layoutOf(chain.inputShape);
    layers.push_back(prepared);
    return Status::ok();
  }
  const ChainLayer& layer = chain.layers[l - 1];
  prepared.kind = layer.kind;
  if (layer.kind == LayerKind::Abstract) {
    layers.push_back(prepared);
    return Status::ok();
  }
  const LayerChecks check{"cpu", prepared.label};
  const PreparedLayer& prev = layers[l - 1];
  REMAT_RETURN_IF_ERROR(
      check.realLayer(chain, l, prev.real, static_cast<std::uint64_t>(prev.out.batch * prev.out.perSample())));
  prepared.in = prev.out;
  prepared.real = true;
  REMAT_RETURN_IF_ERROR(prepareReal(chain, layer, chain.spec.layers[layer.specIndex], check, prepared));
  layers.push_back(std::move(prepared));
  return Status::ok();
}

namespace {

// Copies `count` channels-last runs of one sample: canonical index c * hw + i <-> position i * C + c.
void permuteSample(const ActivationLayout& layout, const float* from, float* to, bool toCanonical) {
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

void convertActivation(const ActivationLayout& layout, const float* from, float* to, bool toCanonical) {
  const Index perSample = layout.perSample();
  if (!layout.channelsLast) {
    std::memcpy(to, from, static_cast<std::size_t>(layout.batch * perSample) * sizeof(float));
    return;
  }
  for (Index n = 0; n < layout.batch; ++n) permuteSample(layout, from + n * perSample, to + n * perSample, toCanonical);
}

void convertParams(const std::vector<ParamSegment>& segments, const float* from, float* to, bool toCanonical) {
  auto move = [&](Index canonical, Index internal) {
    if (toCanonical)
      to[canonical] = from[internal];
    else
      to[internal] = from[canonical];
  };
  for (const ParamSegment& s : segments) {
    switch (s.type) {
      case ParamSegment::Type::Plain:
        std::memcpy(to + s.offset, from + s.offset, static_cast<std::size_t>(s.count) * sizeof(float));
        break;
      case ParamSegment::Type::ConvWeight: {
        const Index K = s.conv.outChannels, cig = s.conv.inChannels / s.conv.groups, k = s.conv.kernel;
        for (Index co = 0; co < K; ++co)
          for (Index ci = 0; ci < cig; ++ci)
            for (Index kh = 0; kh < k; ++kh)
              for (Index kw = 0; kw < k; ++kw)
                move(s.offset + ((co * cig + ci) * k + kh) * k + kw, s.offset + ((kh * k + kw) * cig + ci) * K + co);
        break;
      }
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

}  // namespace remat::cpu
