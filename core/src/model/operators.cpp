// The operator table: one description per layer kind (operators.hpp). The backward-read rules of
// the pointwise kinds are PyTorch's (tools/autograd/derivatives.yaml), tabulated with their
// reasons in docs/memory-model.md section 5.1.
#include "remat/model/operators.hpp"

#include <algorithm>
#include <array>

#include "layers_common.hpp"
#include "swin.hpp"
#include "transformer.hpp"

namespace remat {
namespace {

using FieldList = std::span<const FieldInfo>;
using S = LayerSpec;

constexpr FieldInfo integer(std::string_view name, std::int64_t S::*member, bool required, std::int64_t minimum = 1) {
  FieldInfo f;
  f.name = name;
  f.required = required;
  f.minimum = minimum;
  f.integer = member;
  return f;
}

constexpr FieldInfo flag(std::string_view name, bool S::*member, bool omitDefault = false) {
  FieldInfo f;
  f.name = name;
  f.type = FieldType::Flag;
  f.flag = member;
  f.omitDefault = omitDefault;
  return f;
}

constexpr FieldInfo withDefaultFrom(FieldInfo f, std::int64_t S::*from) {
  f.defaultFrom = from;
  return f;
}

constexpr FieldInfo omittedWhenDefault(FieldInfo f) {
  f.omitDefault = true;
  return f;
}

constexpr FieldInfo dropoutP() {
  FieldInfo f;
  f.name = "p";
  f.type = FieldType::Real;
  f.real = &S::dropoutP;
  f.realMaximum = 1.0;
  f.atMaximum = "must be below 1 (p = 1 drops everything)";
  return f;
}

// Named, not read through a member: the chain file reads these kinds' fields itself.
constexpr FieldInfo named(std::string_view name) {
  FieldInfo f;
  f.name = name;
  return f;
}

// layernorm's epsilon: a variance offset; 1 or more is no model's (PyTorch's default is 1e-5).
constexpr FieldInfo layerNormEpsilon() {
  FieldInfo f;
  f.name = "epsilon";
  f.type = FieldType::Real;
  f.real = &S::epsilon;
  f.realMaximum = 1.0;
  f.atMaximum = "must be below 1 (it is added to a variance of values normalised to 1)";
  return f;
}

constexpr FieldInfo kAbstractFields[] = {named("out_bytes"),
                                         named("needs_input"),
                                         named("needs_output"),
                                         named("extra_bytes"),
                                         named("fwd_workspace_bytes"),
                                         named("bwd_workspace_bytes"),
                                         named("param_bytes"),
                                         named("fwd_cost"),
                                         named("bwd_cost")};
constexpr FieldInfo kConvFields[] = {integer("out_channels", &S::outChannels, true),
                                     integer("kernel", &S::kernel, true), integer("stride", &S::stride, false),
                                     integer("padding", &S::padding, false, 0),
                                     omittedWhenDefault(integer("groups", &S::groups, false)), flag("bias", &S::bias),
                                     // the width's, when not the height's (LayerSpec::kSameAsHeight)
                                     omittedWhenDefault(integer("kernel_width", &S::kernelWidth, false)),
                                     omittedWhenDefault(integer("stride_width", &S::strideWidth, false)),
                                     omittedWhenDefault(integer("padding_width", &S::paddingWidth, false, 0))};
// PyTorch's default stride of a pool is its kernel size.
constexpr FieldInfo kPoolFields[] = {integer("kernel", &S::kernel, true),
                                     withDefaultFrom(integer("stride", &S::stride, false), &S::kernel),
                                     integer("padding", &S::padding, false, 0), flag("ceil_mode", &S::ceilMode, true)};
constexpr FieldInfo kAdaptiveFields[] = {integer("output_height", &S::outputHeight, false),
                                         integer("output_width", &S::outputWidth, false)};
constexpr FieldInfo kLinearFields[] = {integer("out_features", &S::outFeatures, true), flag("bias", &S::bias)};
constexpr FieldInfo kDropoutFields[] = {dropoutP()};
constexpr FieldInfo kLayerNormFields[] = {layerNormEpsilon()};
constexpr FieldInfo kBasicBlockFields[] = {integer("out_channels", &S::outChannels, true),
                                           integer("stride", &S::stride, false)};
constexpr FieldInfo kBottleneckFields[] = {integer("width", &S::width, true),
                                           integer("out_channels", &S::outChannels, true),
                                           integer("stride", &S::stride, false)};
constexpr FieldInfo kInvertedResidualFields[] = {integer("out_channels", &S::outChannels, true),
                                                 integer("stride", &S::stride, false),
                                                 integer("expand_ratio", &S::expandRatio, false)};
constexpr FieldInfo kBlockFields[] = {named("ops")};
// A block's channel slice: `begin` is its first channel, out_channels how many it takes.
constexpr FieldInfo kSliceFields[] = {integer("begin", &S::channelBegin, true, 0),
                                      integer("out_channels", &S::outChannels, true)};
constexpr FieldInfo kShuffleFields[] = {integer("groups", &S::groups, true)};

// The transformer kinds (docs/layers.md, "Transformers"): their dropout probability is required
// (GPT-2 and BERT train with 0.1, torchvision's ViT with 0), not dropout's 0.5.
constexpr FieldInfo requiredP() {
  FieldInfo f = dropoutP();
  f.required = true;
  return f;
}
constexpr FieldInfo kTokenEmbeddingFields[] = {integer("vocab", &S::vocab, true),
                                               integer("positions", &S::positions, true),
                                               integer("width", &S::width, true),
                                               omittedWhenDefault(integer("segments", &S::segments, false, 0)),
                                               requiredP(),
                                               flag("norm", &S::embeddingNorm, true),
                                               layerNormEpsilon()};
constexpr FieldInfo kTransformerBlockFields[] = {integer("heads", &S::heads, true),
                                                 integer("hidden", &S::hidden, true),
                                                 flag("causal", &S::causal),
                                                 flag("pre_norm", &S::preNorm),
                                                 flag("fused_attention", &S::fusedAttention),
                                                 flag("relu", &S::reluMlp, true),
                                                 requiredP(),
                                                 layerNormEpsilon()};
constexpr FieldInfo kLmHeadFields[] = {integer("vocab", &S::vocab, true), flag("tied", &S::tied),
                                       flag("norm", &S::norm), layerNormEpsilon()};
constexpr FieldInfo kPatchEmbeddingFields[] = {integer("patch", &S::kernel, true), integer("width", &S::width, true),
                                               requiredP()};
constexpr FieldInfo kClsHeadFields[] = {integer("out_features", &S::outFeatures, true), flag("norm", &S::norm),
                                        flag("tanh", &S::tanhOut), flag("bias", &S::bias), layerNormEpsilon()};

// The Swin kinds (docs/layers.md, "Swin Transformer"; torchvision's swin_t trains without dropout).
constexpr FieldInfo stochasticDepth() {
  FieldInfo f;
  f.name = "stochastic_depth";
  f.type = FieldType::Real;
  f.real = &S::stochasticDepth;
  f.realMaximum = 1.0;
  f.atMaximum = "must be below 1 (1 drops every residual branch)";
  return f;
}
constexpr FieldInfo kSwinEmbeddingFields[] = {integer("patch", &S::kernel, true), integer("width", &S::width, true),
                                              layerNormEpsilon()};
constexpr FieldInfo kSwinBlockFields[] = {integer("heads", &S::heads, true),
                                          integer("hidden", &S::hidden, true),
                                          integer("window", &S::window, true),
                                          omittedWhenDefault(integer("shift", &S::shift, false, 0)),
                                          stochasticDepth(),
                                          layerNormEpsilon()};
constexpr FieldInfo kPatchMergingFields[] = {layerNormEpsilon()};
constexpr FieldInfo kSwinHeadFields[] = {integer("out_features", &S::outFeatures, true), layerNormEpsilon()};

OperatorInfo primitive(LayerKind kind, std::string_view name, FieldList fields, InferFn infer,
                       std::optional<BlockOpKind> blockOp, std::string_view onnxOp, std::string_view torchOp) {
  OperatorInfo info;
  info.kind = kind;
  info.name = name;
  info.family = OperatorFamily::Primitive;
  info.fields = fields;
  info.infer = infer;
  info.blockOp = blockOp;
  info.onnxOp = onnxOp;
  info.torchOp = torchOp;
  return info;
}

// y = f(x), elementwise; `reads` is what derivatives.yaml's formula of `torchOp` uses.
OperatorInfo pointwise(LayerKind kind, std::string_view name, BackwardReads reads, double flopPerElement,
                       BlockOpKind blockOp, std::string_view onnxOp, std::string_view torchOp) {
  OperatorInfo info = primitive(kind, name, {}, detail::inferPointwise, blockOp, onnxOp, torchOp);
  info.family = OperatorFamily::Pointwise;
  info.backwardReads = reads;
  info.flopPerElement = flopPerElement;
  return info;
}

OperatorInfo other(LayerKind kind, std::string_view name, OperatorFamily family, FieldList fields) {
  OperatorInfo info;
  info.kind = kind;
  info.name = name;
  info.family = family;
  info.fields = fields;
  return info;
}

using K = LayerKind;
using B = BlockOpKind;
using R = BackwardReads;
using F = OperatorFamily;

// The CNN kinds, in the order parseKind's message lists them (the original kinds first).
std::array<OperatorInfo, 22> cnnKinds() {
  return {
      other(K::Abstract, "abstract", F::Abstract, kAbstractFields),
      primitive(K::Conv2d, "conv2d", kConvFields, detail::inferConv2d, B::Conv2d, "Conv", "convolution"),
      // relu: ReluBackward0 keeps its result (threshold_backward(grad, result, 0)); one compare per element.
      pointwise(K::Relu, "relu", R::Output, 1.0, B::Relu, "Relu", "relu"),
      // relu6 is hardtanh(x, 0, 6): hardtanh_backward(grad, self, ...) keeps its input.
      pointwise(K::Relu6, "relu6", R::Input, 1.0, B::Relu6, "", "hardtanh"),
      // Inside a block as well (GoogLeNet's and Inception's pool branches): max_pool2d_with_indices saves
      // its input and its int64 indices (result1), which the inner op keeps in E as a batch norm keeps
      // its statistics; avg_pool2d saves its input (AvgPool2DBackward0's _saved_self), nothing else.
      primitive(K::MaxPool, "maxpool", kPoolFields, detail::inferPool, B::MaxPool, "MaxPool",
                "max_pool2d_with_indices"),
      primitive(K::AvgPool, "avgpool", kPoolFields, detail::inferPool, B::AvgPool, "AveragePool", "avg_pool2d"),
      // Its backward reads only shapes (derivatives.yaml: _adaptive_avg_pool2d_backward(grad, self) uses
      // self's sizes; the shape rule says in = no). A block holds it pooled to 1x1, as the squeeze of
      // Squeeze-and-Excitation (GlobalAveragePool, or ReduceMean over H and W with keepdims).
      primitive(K::AdaptiveAvgPool, "adaptive_avgpool", kAdaptiveFields, detail::inferAdaptiveAvgPool, B::GlobalAvgPool,
                "GlobalAveragePool", "_adaptive_avg_pool2d"),
      primitive(K::BatchNorm, "batchnorm", {}, detail::inferBatchNorm, B::BatchNorm, "BatchNormalization",
                "native_batch_norm"),
      primitive(K::Linear, "linear", kLinearFields, detail::inferLinear, std::nullopt, "Gemm", "addmm"),
      primitive(K::Dropout, "dropout", kDropoutFields, detail::inferDropout, B::Dropout, "Dropout", "native_dropout"),
      other(K::Flatten, "flatten", F::View, {}),
      other(K::BasicBlock, "basic_block", F::Composite, kBasicBlockFields),
      other(K::Bottleneck, "bottleneck", F::Composite, kBottleneckFields),
      other(K::InvertedResidual, "inverted_residual", F::Composite, kInvertedResidualFields),
      other(K::Block, "block", F::Composite, kBlockFields),
      // sigmoid_backward(grad, result) and tanh_backward(grad, result): the output.
      pointwise(K::Sigmoid, "sigmoid", R::Output, 4.0, B::Sigmoid, "Sigmoid", "sigmoid"),
      pointwise(K::Tanh, "tanh", R::Output, 6.0, B::Tanh, "Tanh", "tanh"),
      // silu_backward(grad, self), hardswish_backward(grad, self), hardsigmoid_backward(grad, self),
      // gelu_backward(grad, self, approximate): the input.
      pointwise(K::Silu, "silu", R::Input, 5.0, B::Silu, "", "silu"),
      pointwise(K::HardSwish, "hardswish", R::Input, 4.0, B::HardSwish, "HardSwish", "hardswish"),
      pointwise(K::HardSigmoid, "hardsigmoid", R::Input, 3.0, B::HardSigmoid, "HardSigmoid", "hardsigmoid"),
      pointwise(K::Gelu, "gelu", R::Input, 8.0, B::Gelu, "Gelu", "gelu"),
      // native_layer_norm_backward(grad, input, normalized_shape, result1, result2, weight, bias): the
      // input and the float32 mean and rstd ([N] each, E), never the output. Its shape rule says so.
      primitive(K::LayerNorm, "layernorm", kLayerNormFields, detail::inferLayerNorm, B::LayerNorm, "LayerNormalization",
                "native_layer_norm"),
  };
}

std::array<OperatorInfo, 5> transformerKinds() {
  return {
      // Transformers: one chain layer per embedding, encoder/decoder layer and head; what each keeps
      // is docs/memory-model.md section 12's rule (transformer.cpp). No kernels yet: the executors
      // refuse them by name.
      primitive(K::TokenEmbedding, "token_embedding", kTokenEmbeddingFields, detail::inferTokenEmbedding, std::nullopt,
                "", "embedding"),
      primitive(K::TransformerBlock, "transformer_block", kTransformerBlockFields, detail::inferTransformerBlock,
                std::nullopt, "", "layer_norm, addmm, scaled_dot_product_attention, gelu"),
      primitive(K::LmHead, "lm_head", kLmHeadFields, detail::inferLmHead, std::nullopt, "",
                "layer_norm, mm, log_softmax, nll_loss"),
      primitive(K::PatchEmbedding, "patch_embedding", kPatchEmbeddingFields, detail::inferPatchEmbedding, std::nullopt,
                "", "convolution, cat, add"),
      primitive(K::ClsHead, "cls_head", kClsHeadFields, detail::inferClsHead, std::nullopt, "",
                "layer_norm, select, addmm"),
  };
}

// Swin Transformer (torchvision's swin_t): section 12.6's rule (swin.cpp); CPU kernels in core/src/cpu/run_swin*.cpp.
std::array<OperatorInfo, 4> swinKinds() {
  return {
      primitive(K::SwinEmbedding, "swin_embedding", kSwinEmbeddingFields, detail::inferSwinEmbedding, std::nullopt, "",
                "convolution, permute, layer_norm"),
      primitive(K::SwinBlock, "swin_block", kSwinBlockFields, detail::inferSwinBlock, std::nullopt, "",
                "layer_norm, roll, addmm, bmm, index, softmax, gelu, mul"),
      primitive(K::PatchMerging, "patch_merging", kPatchMergingFields, detail::inferPatchMerging, std::nullopt, "",
                "constant_pad_nd, slice, cat, layer_norm, mm"),
      primitive(K::SwinHead, "swin_head", kSwinHeadFields, detail::inferSwinHead, std::nullopt, "",
                "layer_norm, permute, _adaptive_avg_pool2d, addmm"),
  };
}

// The CNN kinds, then the transformer kinds, then Swin's: parseKind's message's order.
const std::array<OperatorInfo, 31>& table() {
  static const std::array<OperatorInfo, 31> kTable = [] {
    std::array<OperatorInfo, 31> all;
    const auto cnn = cnnKinds();
    const auto transformer = transformerKinds();
    const auto swin = swinKinds();
    std::copy(cnn.begin(), cnn.end(), all.begin());
    std::copy(transformer.begin(), transformer.end(), all.begin() + cnn.size());
    std::copy(swin.begin(), swin.end(), all.begin() + cnn.size() + transformer.size());
    return all;
  }();
  return kTable;
}

constexpr std::array<BlockOpInfo, 23> kBlockOps = {{
    {BlockOpKind::Conv2d, "conv2d", LayerKind::Conv2d, kConvFields},
    {BlockOpKind::BatchNorm, "batchnorm", LayerKind::BatchNorm},
    {BlockOpKind::Relu, "relu", LayerKind::Relu},
    {BlockOpKind::Relu6, "relu6", LayerKind::Relu6},
    // add: d(output) passes to both inputs unchanged (summed over the axes an operand was broadcast
    // along: NumPy broadcasting, as mul's); concat: each input its channels of it.
    {BlockOpKind::Add, "add", std::nullopt, {}, BackwardReads::Nothing, "add"},
    {BlockOpKind::Concat, "concat", std::nullopt, {}, BackwardReads::Nothing, "cat"},
    {BlockOpKind::Sigmoid, "sigmoid", LayerKind::Sigmoid},
    {BlockOpKind::Tanh, "tanh", LayerKind::Tanh},
    {BlockOpKind::Silu, "silu", LayerKind::Silu},
    {BlockOpKind::HardSwish, "hardswish", LayerKind::HardSwish},
    {BlockOpKind::HardSigmoid, "hardsigmoid", LayerKind::HardSigmoid},
    {BlockOpKind::Gelu, "gelu", LayerKind::Gelu},
    {BlockOpKind::GlobalAvgPool, "global_avgpool", LayerKind::AdaptiveAvgPool},
    // mul: y = a * b with NumPy broadcasting; derivatives.yaml's mul.Tensor saves `other` for self's
    // gradient and `self` for other's, so its backward reads both operands (block.hpp).
    {BlockOpKind::Mul, "mul", std::nullopt, {}, BackwardReads::Input, "mul"},
    // slice: channels [begin, begin + out_channels) of an NCHW tensor, a view as PyTorch's chunk: it
    // allocates nothing and whatever keeps it keeps its source's whole buffer (block.hpp's viewOf;
    // a slice writing the block's output copies, docs/memory-model.md section 6). Its backward reads
    // nothing: d(input) gets d(output) in those channels and zeros elsewhere (slice_backward).
    {BlockOpKind::Slice, "slice", std::nullopt, kSliceFields, BackwardReads::Nothing, "slice"},
    // channel_shuffle: view [N, g, C/g, H, W], transpose(1, 2), contiguous, view [N, C, H, W]: output
    // channel k * g + i is input channel i * (C/g) + k. A permutation: its backward reads nothing
    // and writes d(input) through the inverse permutation.
    {BlockOpKind::ChannelShuffle, "channel_shuffle", std::nullopt, kShuffleFields, BackwardReads::Nothing,
     "transpose + clone"},
    // layernorm over the channel axis: ConvNeXt's permute to channels-last, LayerNorm(C), permute
    // back, which keeps what native_layer_norm keeps (its input, the float32 mean and rstd of each
    // of the N*H*W positions; docs/memory-model.md section 6): the permutes are views.
    {BlockOpKind::LayerNorm, "layernorm", LayerKind::LayerNorm, kLayerNormFields},
    // layer_scale: y = gamma * x, gamma a [C, 1, 1] parameter (counted in p, its gradient static).
    // mul.Tensor saves both operands; gamma is a parameter, so the block keeps x (its input).
    {BlockOpKind::LayerScale, "layer_scale", std::nullopt, {}, BackwardReads::Input, "mul"},
    // pools: the layer kinds' fields and rules (kernel, stride, padding, ceil_mode); a max pool's
    // indices are its E bytes (BlockOp::statsBytes), written in keep mode only.
    {BlockOpKind::MaxPool, "maxpool", LayerKind::MaxPool, kPoolFields},
    {BlockOpKind::AvgPool, "avgpool", LayerKind::AvgPool, kPoolFields},
    // dropout: the layer kind's field and rule (training mode; native_dropout's bool mask, one byte
    // per element, is its E bytes as a max pool's indices are; its backward reads only the mask).
    {BlockOpKind::Dropout, "dropout", LayerKind::Dropout, kDropoutFields},
    // sub: y = a - b with NumPy broadcasting; derivatives.yaml's sub.Tensor saves nothing (self's
    // gradient is grad, other's -grad * alpha, each summed over its broadcast axes).
    {BlockOpKind::Sub, "sub", std::nullopt, {}, BackwardReads::Nothing, "sub"},
    // div: y = a / b with NumPy broadcasting; derivatives.yaml's div.Tensor: self's gradient is
    // grad / other (div_tensor_self_backward saves `other`), other's is -grad * self / other^2
    // (div_tensor_other_backward(grad, self, other) saves both), so its backward reads both
    // operands when the divisor needs a gradient, which an activation inside a block always does.
    {BlockOpKind::Div, "div", std::nullopt, {}, BackwardReads::Input, "div"},
}};
}  // namespace

std::string_view backwardReadsName(BackwardReads reads) {
  switch (reads) {
    case BackwardReads::Nothing: return "nothing";
    case BackwardReads::Input: return "input";
    case BackwardReads::Output: return "output";
  }
  return "?";
}

std::span<const OperatorInfo> operatorTable() { return table(); }

const OperatorInfo& operatorInfo(LayerKind kind) {
  for (const OperatorInfo& info : table())
    if (info.kind == kind) return info;
  return table()[0];  // unreachable: the table lists every kind (operators_test checks it)
}

const OperatorInfo* findOperator(std::string_view name) {
  for (const OperatorInfo& info : table())
    if (info.name == name) return &info;
  return nullptr;
}

const OperatorInfo* findOnnxOperator(std::string_view onnxOp) {
  if (onnxOp.empty()) return nullptr;
  for (const OperatorInfo& info : table())
    if (info.onnxOp == onnxOp) return &info;
  return nullptr;
}

bool isPointwise(LayerKind kind) { return operatorInfo(kind).family == OperatorFamily::Pointwise; }

std::span<const BlockOpInfo> blockOpTable() { return kBlockOps; }

const BlockOpInfo& blockOpInfo(BlockOpKind kind) {
  for (const BlockOpInfo& info : kBlockOps)
    if (info.kind == kind) return info;
  return kBlockOps[0];  // unreachable: the table lists every inner op kind (operators_test checks it)
}

}  // namespace remat
