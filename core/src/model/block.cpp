// The inner graphs of the composite blocks, op for op as torchvision builds them:
// torchvision.models.resnet.BasicBlock / Bottleneck (v1.5, stride on the 3x3) and
// torchvision.models.mobilenetv2.InvertedResidual; and the `block` kind, whose ops its spec lists.
#include "remat/model/block.hpp"

#include <algorithm>
#include <optional>

#include "layers_common.hpp"
#include "remat/base/text.hpp"
#include "remat/model/operators.hpp"

namespace remat {

std::string_view blockOpKindName(BlockOpKind kind) { return blockOpInfo(kind).name; }

bool isBinaryBlockOp(BlockOpKind kind) {
  return kind == BlockOpKind::Add || kind == BlockOpKind::Sub || kind == BlockOpKind::Mul || kind == BlockOpKind::Div;
}

Result<BlockOpKind> parseBlockOpKind(std::string_view name) {
  std::string known;
  for (const BlockOpInfo& info : blockOpTable()) {
    if (info.name == name) return info.kind;
    known += (known.empty() ? "" : ", ") + std::string(info.name);
  }
  return Status::invalid("unknown inner op kind " + quoteText(name, 40) + " (known: " + known + ")");
}

namespace {

LayerSpec convSpec(std::string name, std::int64_t outChannels, std::int64_t kernel, std::int64_t stride,
                   std::int64_t padding, std::int64_t groups = 1) {
  LayerSpec spec;
  spec.name = std::move(name);
  spec.kind = LayerKind::Conv2d;
  spec.outChannels = outChannels;
  spec.kernel = kernel;
  spec.stride = stride;
  spec.padding = padding;
  spec.groups = groups;
  spec.bias = false;  // every conv in these blocks is followed by a batch norm
  return spec;
}

LayerSpec simpleSpec(std::string name, LayerKind kind) {
  LayerSpec spec;
  spec.name = std::move(name);
  spec.kind = kind;
  return spec;
}

// Only kinds whose description names a block op reach here (GraphBuilder::layer's callers).
BlockOpKind opKindOf(LayerKind kind) { return operatorInfo(kind).blockOp.value_or(BlockOpKind::Relu6); }

LayerKind layerKindOf(BlockOpKind kind) {
  return blockOpInfo(kind).layer.value_or(LayerKind::Abstract);  // add, concat: no primitive layer
}

class GraphBuilder {
 public:
  GraphBuilder(const LayerSpec& spec, const Shape& input, DType dtype, const BlockAutocast* autocast) {
    graph_.kind = spec.kind;
    graph_.name = spec.name;
    graph_.dtype = dtype;
    promotes_ = autocast != nullptr;
    BlockTensor x;
    x.name = "input";
    x.shape = input;
    x.dtype = autocast != nullptr ? autocast->input : dtype;
    x.bytes = elementCount(input) * dtypeBytes(x.dtype);  // buildChain checked the input's bytes
    graph_.tensors.push_back(std::move(x));
  }

  // Appends a primitive op reading tensor `in`; `layer.name` is relative to the block.
  Result<std::size_t> layer(LayerSpec layer, std::size_t in) {
    layer.name = graph_.name + "." + layer.name;
    ChainLayer inferred;
    // Under a mixed precision a convolution writes half (autocast's lower_precision_fp list); every
    // other primitive op runs in its input's dtype (on no list: it falls through).
    const bool lowerPrecision = layer.kind == LayerKind::Conv2d || layer.kind == LayerKind::Linear;
    const DType dtype = promotes_ && !lowerPrecision ? graph_.tensors[in].dtype : graph_.dtype;
    Status status = detail::inferPrimitiveLayer(layer, graph_.tensors[in].shape, dtype, inferred);
    if (!status) return status.withContext("inner op '" + layer.name + "'");
    BlockOp op;
    op.kind = opKindOf(layer.kind);
    op.inputs = {in};
    op.readsInput = inferred.numbers.needsInput;
    op.readsOutput = inferred.numbers.needsOutput;
    op.statsBytes = inferred.numbers.extraBytes;  // batch norm's statistics, max pool's indices; else 0
    op.paramCount = inferred.paramCount;
    op.paramTensors = std::move(inferred.paramTensors);
    op.fwdCost = inferred.numbers.fwdCost;
    op.layer = std::move(layer);
    return append(std::move(op), std::move(inferred.outputShape), inferred.numbers.outBytes, dtype);
  }

  // The residual add: main path first, then the skip.
  Result<std::size_t> add(std::size_t main, std::size_t skip, std::string name = "add") {
    return binary(BlockOpKind::Add, main, skip, std::move(name));
  }

  // a + b, a - b, a * b or a / b with NumPy broadcasting over tensors of one rank (NCHW, [N, F],
  // [N, S, F]): every axis equal, or 1 in one of them. What the backward reads is derivatives.yaml's:
  // add and sub nothing, mul and div both operands (operators.cpp).
  Result<std::size_t> binary(BlockOpKind kind, std::size_t a, std::size_t b, std::string name) {
    const Shape& sa = graph_.tensors[a].shape;
    const Shape& sb = graph_.tensors[b].shape;
    name = graph_.name + "." + name;
    const std::string what = "inner op '" + name + "' " + binaryVerb(kind) + " " +
                             (kind == BlockOpKind::Sub ? shapeToString(sb) + " from " + shapeToString(sa)
                                                       : shapeToString(sa) + " and " + shapeToString(sb));
    if (sa.size() != sb.size()) return Status::invalid(what + ": the ranks differ");
    Shape shape(sa.size());
    for (std::size_t i = 0; i < sa.size(); ++i) {
      if (sa[i] != sb[i] && sa[i] != 1 && sb[i] != 1)
        return Status::invalid(what + ": axis " + std::to_string(i) +
                               " differs and is 1 in neither (NumPy broadcasting)");
      shape[i] = std::max(sa[i], sb[i]);
    }
    // Under a mixed precision the wider operand's dtype (type promotion); else the graph's.
    const DType wider = dtypeBytes(graph_.tensors[a].dtype) >= dtypeBytes(graph_.tensors[b].dtype)
                            ? graph_.tensors[a].dtype
                            : graph_.tensors[b].dtype;
    const DType dtype = promotes_ ? wider : graph_.dtype;
    std::uint64_t bytes = dtypeBytes(dtype);
    for (std::int64_t d : shape)
      if (!detail::checkedMul(bytes, static_cast<std::uint64_t>(d), bytes))
        return Status::invalid("inner op '" + name + "' gives " + shapeToString(shape) +
                               ", which overflows 64-bit bytes");
    BlockOp op;
    op.kind = kind;
    op.layer.name = std::move(name);
    op.layer.kind = LayerKind::Abstract;
    op.inputs = {a, b};
    // mul.Tensor: self's gradient is grad * other, other's grad * self; div.Tensor: self's is
    // grad / other, other's -grad * self / other^2 (both read, operators.cpp).
    const bool readsBoth = kind == BlockOpKind::Mul || kind == BlockOpKind::Div;
    op.readsInput = readsBoth;
    op.readsSecondInput = readsBoth;
    op.fwdCost = static_cast<double>(bytes / dtypeBytes(dtype)) / 1e9;  // one operation per element
    return append(std::move(op), std::move(shape), bytes, dtype);
  }

  // Subtracting b from a says "subtracts [b] from [a]"; binary() writes the operands in that order.
  static std::string binaryVerb(BlockOpKind kind) {
    switch (kind) {
      case BlockOpKind::Add: return "adds";
      case BlockOpKind::Sub: return "subtracts";
      case BlockOpKind::Mul: return "multiplies";
      default: return "divides";
    }
  }

  // Concatenates NCHW tensors along the channels, in the order given.
  Result<std::size_t> concat(const std::vector<std::size_t>& inputs, std::string name) {
    name = graph_.name + "." + name;
    Shape shape = graph_.tensors[inputs.front()].shape;
    shape[1] = 0;
    std::uint64_t bytes = 0;
    for (std::size_t in : inputs) {
      const Shape& s = graph_.tensors[in].shape;
      if (s[0] != shape[0] || s[2] != shape[2] || s[3] != shape[3])
        return Status::invalid("inner op '" + name + "' concatenates " +
                               shapeToString(graph_.tensors[inputs[0]].shape) + " and " + shapeToString(s) +
                               ": only the channels may differ");
      if (__builtin_add_overflow(shape[1], s[1], &shape[1]) || shape[1] > detail::kMaxFieldValue ||
          __builtin_add_overflow(bytes, graph_.tensors[in].bytes, &bytes))
        return Status::invalid("inner op '" + name + "' concatenates too many channels");
    }
    BlockOp op;
    op.kind = BlockOpKind::Concat;
    op.layer.name = std::move(name);
    op.layer.kind = LayerKind::Abstract;
    op.inputs = inputs;
    op.fwdCost = static_cast<double>(bytes / dtypeBytes(graph_.dtype)) / 1e9;  // one copy per element
    return append(std::move(op), std::move(shape), bytes);
  }

  // Channels [begin, begin + count) of an NCHW tensor (ShuffleNetV2's channel split): a view of
  // `in` unless it is the block's output (layoutBlockGraph decides, block.hpp's BlockTensor::viewOf).
  Result<std::size_t> slice(std::size_t in, std::int64_t begin, std::int64_t count, std::string name) {
    name = graph_.name + "." + name;
    const BlockTensor& x = graph_.tensors[in];
    if (begin < 0 || count <= 0 || begin > x.shape[1] || count > x.shape[1] - begin)
      return Status::invalid("inner op '" + name + "' takes channels [" + std::to_string(begin) + ", " +
                             std::to_string(begin) + " + " + std::to_string(count) + ") of " + shapeToString(x.shape) +
                             ": past its " + std::to_string(x.shape[1]) + " channels");
    Shape shape = x.shape;
    shape[1] = count;
    const std::uint64_t bytes = x.bytes / static_cast<std::uint64_t>(x.shape[1]) * static_cast<std::uint64_t>(count);
    BlockOp op;
    op.kind = BlockOpKind::Slice;
    op.layer.name = std::move(name);
    op.layer.kind = LayerKind::Abstract;
    op.layer.channelBegin = begin;
    op.layer.outChannels = count;
    op.inputs = {in};
    op.fwdCost = static_cast<double>(bytes / dtypeBytes(graph_.dtype)) / 1e9;  // one copy per element
    return append(std::move(op), std::move(shape), bytes);
  }

  // ShuffleNetV2's channel shuffle of an NCHW tensor in `groups` groups: a permuted copy.
  Result<std::size_t> channelShuffle(std::size_t in, std::int64_t groups, std::string name) {
    name = graph_.name + "." + name;
    const BlockTensor& x = graph_.tensors[in];
    if (groups <= 0 || x.shape[1] % groups != 0)
      return Status::invalid("inner op '" + name + "' shuffles " + std::to_string(x.shape[1]) + " channels in groups " +
                             std::to_string(groups) + ": groups must divide the channels");
    BlockOp op;
    op.kind = BlockOpKind::ChannelShuffle;
    op.layer.name = std::move(name);
    op.layer.kind = LayerKind::Abstract;
    op.layer.groups = groups;
    op.inputs = {in};
    op.fwdCost = static_cast<double>(x.bytes / dtypeBytes(graph_.dtype)) / 1e9;  // one copy per element
    Shape shape = x.shape;
    const std::uint64_t bytes = x.bytes;
    return append(std::move(op), std::move(shape), bytes);
  }

  // y = gamma * x, gamma a per-channel parameter [C, 1, 1] (ConvNeXt's layer_scale): mul.Tensor
  // saves both operands; gamma is a parameter (p, no activation bytes), x is the op's input.
  Result<std::size_t> layerScale(std::size_t in, std::string name) {
    name = graph_.name + "." + name;
    const BlockTensor& x = graph_.tensors[in];
    BlockOp op;
    op.kind = BlockOpKind::LayerScale;
    op.layer.name = std::move(name);
    op.layer.kind = LayerKind::Abstract;
    op.inputs = {in};
    op.readsInput = true;
    op.paramCount = static_cast<std::uint64_t>(x.shape[1]);
    op.paramTensors = {op.paramCount};  // gamma
    const std::uint64_t elements = x.bytes / dtypeBytes(x.dtype);
    op.fwdCost = static_cast<double>(elements) / 1e9;  // one product per element
    // Under a mixed precision gamma is a float32 parameter: bfloat16 x times it promotes to float32.
    const DType dtype = promotes_ ? DType::Float32 : x.dtype;
    Shape shape = x.shape;
    return append(std::move(op), std::move(shape), elements * dtypeBytes(dtype), dtype);
  }

  std::size_t tensorCount() const { return graph_.tensors.size(); }
  const std::vector<BlockTensor>& tensors() const { return graph_.tensors; }
  const std::vector<BlockOp>& ops() const { return graph_.ops; }

  std::int64_t channels(std::size_t tensor) const { return graph_.tensors[tensor].shape[1]; }

  Result<BlockGraph> finish() && {
    REMAT_RETURN_IF_ERROR(detail::layoutBlockGraph(graph_));
    return std::move(graph_);
  }

 private:
  // `dtype`: the output's; the graph's unless a mixed precision promotes it.
  std::size_t append(BlockOp op, Shape shape, std::uint64_t bytes, std::optional<DType> dtype = std::nullopt) {
    BlockTensor t;
    t.name = op.layer.name;
    t.shape = std::move(shape);
    t.bytes = bytes;
    t.dtype = dtype.value_or(graph_.dtype);
    t.producer = graph_.ops.size();
    op.output = graph_.tensors.size();
    graph_.ops.push_back(std::move(op));
    graph_.tensors.push_back(std::move(t));
    return graph_.tensors.size() - 1;
  }

  BlockGraph graph_;
  bool promotes_ = false;  // a mixed precision's type promotion (BlockAutocast)
};

#define REMAT_ASSIGN_OR_RETURN(lhs, expr)              \
  do {                                                 \
    auto remat_result_ = (expr);                       \
    if (!remat_result_) return remat_result_.status(); \
    lhs = *remat_result_;                              \
  } while (0)

// conv -> bn; returns the last tensor.
Result<std::size_t> convBn(GraphBuilder& b, std::size_t in, LayerSpec conv, std::string bnName) {
  std::size_t t = 0;
  REMAT_ASSIGN_OR_RETURN(t, b.layer(std::move(conv), in));
  REMAT_ASSIGN_OR_RETURN(t, b.layer(simpleSpec(std::move(bnName), LayerKind::BatchNorm), t));
  return t;
}

// conv -> bn -> activation (relu, relu6); returns the last tensor.
Result<std::size_t> convBnAct(GraphBuilder& b, std::size_t in, LayerSpec conv, std::string bnName,
                              LayerSpec activation) {
  std::size_t t = 0;
  REMAT_ASSIGN_OR_RETURN(t, convBn(b, in, std::move(conv), std::move(bnName)));
  return b.layer(std::move(activation), t);
}

LayerSpec relu() { return simpleSpec("relu", LayerKind::Relu); }

// The end of both ResNet blocks: the main path t plus the skip path (identity, or downsample =
// conv1x1(stride) + bn when the shape changes: torchvision's rule), then relu.
Result<BlockGraph> addSkipAndRelu(GraphBuilder b, std::size_t t, const LayerSpec& spec) {
  std::size_t skip = 0;
  if (spec.stride != 1 || b.channels(0) != spec.outChannels)
    REMAT_ASSIGN_OR_RETURN(skip,
                           convBn(b, 0, convSpec("downsample.0", spec.outChannels, 1, spec.stride, 0), "downsample.1"));
  REMAT_ASSIGN_OR_RETURN(t, b.add(t, skip));
  REMAT_ASSIGN_OR_RETURN(t, b.layer(relu(), t));
  return std::move(b).finish();
}

Result<BlockGraph> basicBlock(const LayerSpec& spec, GraphBuilder b) {
  std::size_t t = 0;
  REMAT_ASSIGN_OR_RETURN(t, convBnAct(b, 0, convSpec("conv1", spec.outChannels, 3, spec.stride, 1), "bn1", relu()));
  REMAT_ASSIGN_OR_RETURN(t, convBn(b, t, convSpec("conv2", spec.outChannels, 3, 1, 1), "bn2"));
  return addSkipAndRelu(std::move(b), t, spec);
}

Result<BlockGraph> bottleneck(const LayerSpec& spec, GraphBuilder b) {
  std::size_t t = 0;
  REMAT_ASSIGN_OR_RETURN(t, convBnAct(b, 0, convSpec("conv1", spec.width, 1, 1, 0), "bn1", relu()));
  REMAT_ASSIGN_OR_RETURN(t, convBnAct(b, t, convSpec("conv2", spec.width, 3, spec.stride, 1), "bn2", relu()));
  REMAT_ASSIGN_OR_RETURN(t, convBn(b, t, convSpec("conv3", spec.outChannels, 1, 1, 0), "bn3"));
  return addSkipAndRelu(std::move(b), t, spec);
}

Result<BlockGraph> invertedResidual(const LayerSpec& spec, GraphBuilder b) {
  const std::int64_t in = b.channels(0);
  std::int64_t hidden = 0;  // round(in * expand_ratio), exact for an integer ratio
  if (__builtin_mul_overflow(in, spec.expandRatio, &hidden) || hidden > detail::kMaxFieldValue)
    return Status::invalid("expand_ratio " + std::to_string(spec.expandRatio) + " times the " + std::to_string(in) +
                           " input channels is too many hidden channels");
  std::size_t t = 0;
  int index = 0;  // torchvision numbers the Sequential's children
  auto prefix = [&] { return "conv." + std::to_string(index); };
  auto relu6 = [&] { return simpleSpec(prefix() + ".2", LayerKind::Relu6); };
  if (spec.expandRatio != 1) {
    REMAT_ASSIGN_OR_RETURN(t, convBnAct(b, t, convSpec(prefix() + ".0", hidden, 1, 1, 0), prefix() + ".1", relu6()));
    ++index;
  }
  REMAT_ASSIGN_OR_RETURN(
      t, convBnAct(b, t, convSpec(prefix() + ".0", hidden, 3, spec.stride, 1, hidden), prefix() + ".1", relu6()));
  ++index;
  REMAT_ASSIGN_OR_RETURN(t, b.layer(convSpec(prefix(), spec.outChannels, 1, 1, 0), t));
  ++index;
  REMAT_ASSIGN_OR_RETURN(t, b.layer(simpleSpec(prefix(), LayerKind::BatchNorm), t));
  if (spec.stride == 1 && in == spec.outChannels) REMAT_ASSIGN_OR_RETURN(t, b.add(t, 0));
  return std::move(b).finish();
}

// Every inner op's inputs exist when it runs and have the count its kind takes.
Status checkBlockOpInputs(const BlockOpSpec& op, std::size_t index, std::size_t tensorCount, const std::string& where) {
  const std::size_t count = op.inputs.size();
  const bool binary = isBinaryBlockOp(op.kind);
  const bool arityOk = binary ? count == 2 : op.kind == BlockOpKind::Concat ? count >= 1 : count == 1;
  if (!arityOk)
    return Status::invalid(where + ": " + std::string(blockOpKindName(op.kind)) + " takes " +
                           (binary                           ? "two inputs"
                            : op.kind == BlockOpKind::Concat ? "one or more inputs"
                                                             : "one input") +
                           ", it has " + std::to_string(count));
  for (std::size_t in : op.inputs)
    if (in >= tensorCount)
      return Status::invalid(where + ": input " + std::to_string(in) + " is not written before it (op " +
                             std::to_string(index) + " may read tensor 0, the block's input, up to tensor " +
                             std::to_string(index) + ")");
  return Status::ok();
}

// A tensor nobody reads would be wasted memory that no executor frees; x(l-1) is the chain's, so
// the block may leave it unread.
Status checkEveryTensorRead(const GraphBuilder& b, const std::string& blockName) {
  const auto& tensors = b.tensors();
  std::vector<bool> read(tensors.size(), false);
  for (const BlockOp& op : b.ops())
    for (std::size_t in : op.inputs) read[in] = true;
  for (std::size_t t = 1; t + 1 < tensors.size(); ++t)
    if (!read[t])
      return Status::invalid("block '" + blockName + "': the output of inner op " + std::to_string(t - 1) + " ('" +
                             tensors[t].name + "') is read by no later op (only the last op writes the output)");
  return Status::ok();
}

// The element-wise inner ops, which take a tensor of any rank: the activations, dropout, add, sub,
// mul and div (NumPy broadcasting). The others (convolutions, norms, pools, the channel ops) need NCHW.
bool isElementwise(BlockOpKind kind) {
  if (isBinaryBlockOp(kind) || kind == BlockOpKind::Dropout) return true;
  const std::optional<LayerKind> layer = blockOpInfo(kind).layer;
  return layer && isPointwise(*layer);
}

// A block on an [N, F] or [N, S, F] tensor (an MLP's, a head's) holds element-wise ops only.
Status checkRank(const BlockOpSpec& op, std::size_t rank, const std::string& where) {
  if (rank == 4 || isElementwise(op.kind)) return Status::ok();
  return Status::invalid(
      where + ": " + std::string(blockOpKindName(op.kind)) + " needs an NCHW tensor; a block on a " +
      std::to_string(rank) +
      "-dimensional input holds element-wise ops only (the activations, dropout, add, sub, mul, div)");
}

Result<BlockGraph> listedBlock(const LayerSpec& spec, GraphBuilder b) {
  if (spec.ops.empty()) return Status::invalid("field 'ops' is empty: a block needs at least one inner op");
  for (std::size_t i = 0; i < spec.ops.size(); ++i) {
    const BlockOpSpec& op = spec.ops[i];
    const std::string where =
        "inner op " + std::to_string(i) + " ('" + op.layer.name + "', " + std::string(blockOpKindName(op.kind)) + ")";
    REMAT_RETURN_IF_ERROR(checkBlockOpInputs(op, i, b.tensorCount(), where));
    REMAT_RETURN_IF_ERROR(checkRank(op, b.tensors().front().shape.size(), where));
    Result<std::size_t> out = std::size_t{0};
    if (isBinaryBlockOp(op.kind)) {
      out = b.binary(op.kind, op.inputs[0], op.inputs[1], op.layer.name);
    } else if (op.kind == BlockOpKind::Concat) {
      out = b.concat(op.inputs, op.layer.name);
    } else if (op.kind == BlockOpKind::Slice) {
      out = b.slice(op.inputs[0], op.layer.channelBegin, op.layer.outChannels, op.layer.name);
    } else if (op.kind == BlockOpKind::ChannelShuffle) {
      out = b.channelShuffle(op.inputs[0], op.layer.groups, op.layer.name);
    } else if (op.kind == BlockOpKind::LayerScale) {
      out = b.layerScale(op.inputs[0], op.layer.name);
    } else {
      LayerSpec layer = op.layer;
      layer.kind = layerKindOf(op.kind);
      layer.outputHeight = layer.outputWidth = 1;  // global_avgpool: pooled to 1x1, dims kept
      out = b.layer(std::move(layer), op.inputs[0]);
    }
    if (!out) return out.status().withContext(where);
  }
  REMAT_RETURN_IF_ERROR(checkEveryTensorRead(b, spec.name));
  return std::move(b).finish();
}

#undef REMAT_ASSIGN_OR_RETURN

Result<BlockGraph> buildGraph(const LayerSpec& spec, const Shape& input, DType dtype, const BlockAutocast* autocast) {
  const std::string kind(kindName(spec.kind));
  if (!isComposite(spec.kind)) return Status::internal("'" + kind + "' is not a composite block kind");
  // A listed block of element-wise ops also runs on an MLP's [N, F] or a sequence's [N, S, F].
  const bool anyRank = spec.kind == LayerKind::Block && (input.size() == 2 || input.size() == 3);
  if (input.size() != 4 && !anyRank)
    return Status::invalid(kind + " needs an NCHW input (4 dimensions)" +
                           (spec.kind == LayerKind::Block ? ", or [N, F] or [N, S, F] for element-wise ops" : "") +
                           ", got " + shapeToString(input));
  std::uint64_t inputBytes = dtypeBytes(dtype);
  for (auto d : input) {
    if (d <= 0) return Status::invalid(kind + " needs a positive input shape, got " + shapeToString(input));
    if (!detail::checkedMul(inputBytes, static_cast<std::uint64_t>(d), inputBytes))
      return Status::invalid(kind + " input " + shapeToString(input) + " overflows 64-bit bytes");
  }
  GraphBuilder builder(spec, input, dtype, autocast);
  if (spec.kind == LayerKind::Block) return listedBlock(spec, std::move(builder));
  REMAT_RETURN_IF_ERROR(detail::checkPositiveField("out_channels", spec.outChannels));
  REMAT_RETURN_IF_ERROR(detail::checkPositiveField("stride", spec.stride));
  switch (spec.kind) {
    case LayerKind::BasicBlock: return basicBlock(spec, std::move(builder));
    case LayerKind::Bottleneck:
      REMAT_RETURN_IF_ERROR(detail::checkPositiveField("width", spec.width));
      return bottleneck(spec, std::move(builder));
    default:
      REMAT_RETURN_IF_ERROR(detail::checkPositiveField("expand_ratio", spec.expandRatio));
      return invertedResidual(spec, std::move(builder));
  }
}

}  // namespace

Result<BlockGraph> buildBlockGraph(const LayerSpec& spec, const Shape& input, DType dtype) {
  return buildGraph(spec, input, dtype, nullptr);
}

Result<BlockGraph> buildBlockGraph(const LayerSpec& spec, const Shape& input, DType dtype,
                                   const BlockAutocast& autocast) {
  return buildGraph(spec, input, dtype, &autocast);
}

}  // namespace remat
