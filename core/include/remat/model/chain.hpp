#pragma once
// A layer chain: what a chain file says (ChainSpec) and what the memory model sees after shape
// inference (Chain). See docs/memory-model.md section 1.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/step_options.hpp"

namespace remat {

enum class DType { Float32, Float16, BFloat16 };
std::string_view dtypeName(DType dtype);
Result<DType> parseDType(std::string_view name);
std::span<const DType> dtypes();  // every dtype, in the order parseDType's message lists them
std::uint64_t dtypeBytes(DType dtype);

enum class LayerKind {
  Abstract,  // states the model numbers directly
  Conv2d,
  Relu,
  Relu6,
  MaxPool,
  AvgPool,
  AdaptiveAvgPool,  // torchvision's AdaptiveAvgPool2d; output (1,1) is global average pooling
  BatchNorm,
  Linear,
  Dropout,
  Flatten,           // a view: folded into its neighbours, never a chain layer
  BasicBlock,        // ResNet-18/34 residual block (composite)
  Bottleneck,        // ResNet-50/101/152 residual block (composite)
  InvertedResidual,  // MobileNetV2 block (composite)
  Block,             // any multi-branch piece as a graph of inner ops (composite; e.g. imported from ONNX)
  // The pointwise activations of today's CNNs (operators.hpp describes every kind).
  Sigmoid,
  Tanh,
  Silu,  // x * sigmoid(x), torch's SiLU / swish
  HardSwish,
  HardSigmoid,  // PyTorch's: relu6(x + 3) / 6
  Gelu,         // the exact (erf) form, torch's GELU(approximate='none')
  LayerNorm,    // torch's LayerNorm over the last axis of [N, F], or over the channels of [N, C, H, W]
                // (ConvNeXt's LayerNorm2d), elementwise affine (weight and bias)
  // Transformers (docs/memory-model.md section 12; core/src/model/transformer.cpp): the residual
  // stream [N, S, d] between layers is the cut.
  TokenEmbedding,    // integer ids [N, S] -> [N, S, d]: token + position tables (BERT: + segments, LayerNorm)
  TransformerBlock,  // one encoder/decoder layer: attention + MLP, pre- or post-norm
  LmHead,            // [N, S, d] -> log-probabilities [N, S, V]: final LayerNorm, vocabulary projection, cross entropy
  PatchEmbedding,    // ViT: [N, 3, H, W] -> [N, 1 + (H/k)(W/k), d]: patch conv, class token, position table
  ClsHead,           // token 0 of [N, S, d] -> [N, out]: optional LayerNorm, linear, optional tanh (BERT's pooler)
  // Swin Transformer (docs/memory-model.md section 12.6; core/src/model/swin.cpp): the residual
  // stream [N, H, W, C] (channels last) between layers is the cut.
  SwinEmbedding,  // [N, 3, H, W] -> [N, H/k, W/k, C]: patch conv (kernel = stride = k), permute, LayerNorm
  SwinBlock,      // shifted-window attention with relative position bias + MLP, pre-norm, stochastic depth
  PatchMerging,   // [N, H, W, C] -> [N, H/2, W/2, 2C]: 2x2 neighbours concatenated, LayerNorm, linear
  SwinHead,       // [N, H, W, C] -> [N, out]: LayerNorm, global average pool, linear
};
std::string_view kindName(LayerKind kind);  // the chain-file spelling: "conv2d", "basic_block", ...
Result<LayerKind> parseKind(std::string_view name);
std::span<const LayerKind> layerKinds();  // every kind, in the order parseKind's message lists them
bool isComposite(LayerKind kind);

// The kinds of a composite layer's inner ops: the primitive kinds a block may hold, the residual add,
// the channel concatenation and the broadcasting sum, difference, product and quotient (block.hpp; operators.hpp maps
// them to layer kinds).
enum class BlockOpKind {
  Conv2d,
  BatchNorm,
  Relu,
  Relu6,
  Add,
  Concat,
  Sigmoid,
  Tanh,
  Silu,
  HardSwish,
  HardSigmoid,
  Gelu,
  GlobalAvgPool,   // adaptive_avgpool to 1x1 with the dims kept: Squeeze-and-Excitation's squeeze
  Mul,             // a * b with NumPy broadcasting (Squeeze-and-Excitation's [N, C, 1, 1] scale)
  Slice,           // channels [begin, begin + out_channels) of one input (ShuffleNetV2's channel split)
  ChannelShuffle,  // ShuffleNetV2's Reshape [N, g, C/g, H, W] -> Transpose(1, 2) -> Reshape [N, C, H, W]
  LayerNorm,       // layernorm over the channel axis (ConvNeXt's permute - LayerNorm - permute)
  LayerScale,      // y = gamma * x with a per-channel parameter gamma [C, 1, 1] (ConvNeXt's layer_scale)
  MaxPool,         // maxpool's fields (GoogLeNet's and Inception's pool branches); E: its int64 indices
  AvgPool,         // avgpool's fields (Inception-v3's pool branches, count_include_pad)
  Dropout,         // dropout's field p, training mode (torchvision's branch Dropout); E: its bool mask
  Sub,             // a - b with NumPy broadcasting (issue 22); its backward reads nothing
  Div,             // a / b with NumPy broadcasting (issue 22); its backward reads both operands
};

// The memory model's numbers for one layer (docs/memory-model.md section 1). Bytes are bytes; costs are
// in arbitrary but consistent units (GFLOP for real kinds, as stated for abstract layers).
struct LayerNumbers {
  std::uint64_t outBytes = 0;           // a
  bool needsInput = true;               // in
  bool needsOutput = false;             // out
  std::uint64_t extraBytes = 0;         // e
  std::uint64_t fwdWorkspaceBytes = 0;  // wf
  std::uint64_t bwdWorkspaceBytes = 0;  // wb
  std::uint64_t paramBytes = 0;         // p
  double fwdCost = 1.0;
  double bwdCost = 2.0;
  // A tied head's gradient of layer 1's table (memory-model.md 12.2): B(l) writes it and PyTorch's
  // autograd holds it until B(1) adds the embedding's own; 0 for every other layer.
  std::uint64_t sharedGradBytes = 0;
  bool operator==(const LayerNumbers&) const = default;
};

struct BlockOpSpec;

// One layer as written in a chain file. Only the fields of its kind are meaningful; the loader
// rejects fields that do not belong to the kind.
struct LayerSpec {
  std::string name;
  LayerKind kind = LayerKind::Abstract;

  // conv2d, pools, blocks. A conv2d's kernel, stride and padding are the height's, and the width's
  // too unless the *Width fields below say otherwise.
  std::int64_t outChannels = 0;
  std::int64_t kernel = 0;
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t groups = 1;
  // conv2d: the width's kernel, stride and padding where they differ from the height's (Inception-v3's
  // 1x7 and 7x1 convolutions); kSameAsHeight (the default, and absent from chain files) is square.
  static constexpr std::int64_t kSameAsHeight = -1;
  std::int64_t kernelWidth = kSameAsHeight;
  std::int64_t strideWidth = kSameAsHeight;
  std::int64_t paddingWidth = kSameAsHeight;
  std::int64_t kernelW() const { return kernelWidth == kSameAsHeight ? kernel : kernelWidth; }
  std::int64_t strideW() const { return strideWidth == kSameAsHeight ? stride : strideWidth; }
  std::int64_t paddingW() const { return paddingWidth == kSameAsHeight ? padding : paddingWidth; }
  bool squareConv() const { return kernelW() == kernel && strideW() == stride && paddingW() == padding; }
  // Sets the width's three; each one equal to the height's is kept as kSameAsHeight (files stay square).
  void setWidthAxis(std::int64_t kernelW, std::int64_t strideW, std::int64_t paddingW) {
    kernelWidth = kernelW == kernel ? kSameAsHeight : kernelW;
    strideWidth = strideW == stride ? kSameAsHeight : strideW;
    paddingWidth = paddingW == padding ? kSameAsHeight : paddingW;
  }
  bool bias = true;       // conv2d (torchvision VGG: true, ResNet: false)
  bool ceilMode = false;  // pools
  // adaptive_avgpool
  std::int64_t outputHeight = 1;
  std::int64_t outputWidth = 1;
  // linear
  std::int64_t outFeatures = 0;
  // dropout
  double dropoutP = 0.5;
  // layernorm: added to the variance before its square root (PyTorch's and ONNX's default)
  double epsilon = 1e-5;
  // bottleneck: inner width; inverted_residual: expansion ratio
  std::int64_t width = 0;
  std::int64_t expandRatio = 1;
  // a block's slice: its first channel (out_channels says how many it takes)
  std::int64_t channelBegin = 0;
  // transformer kinds (width is the model width d): vocabulary, position table, heads, MLP width,
  // BERT's segment (token type) table, and the flags of docs/layers.md
  std::int64_t vocab = 0;
  std::int64_t positions = 0;
  std::int64_t heads = 0;
  std::int64_t hidden = 0;
  std::int64_t segments = 0;
  bool causal = false;
  bool preNorm = true;
  bool fusedAttention = true;  // PyTorch 2's scaled_dot_product_attention (flash / memory-efficient)
  bool reluMlp = false;        // transformer_block: a ReLU MLP (nn.TransformerEncoderLayer's default), not GELU
  bool tied = false;           // lm_head: the token embedding's table is its weight (counted once)
  bool norm = true;            // lm_head, cls_head: a LayerNorm first; token_embedding: a LayerNorm after (BERT)
  bool tanhOut = false;        // cls_head: BERT's pooler (tanh after the linear)
  bool embeddingNorm = false;  // token_embedding: BERT's LayerNorm after the sum of the tables
  // swin_block: the attention window's side, the cyclic shift of shifted blocks (0: none) and the
  // stochastic depth probability of its two residual branches (torchvision's StochasticDepth, "row")
  std::int64_t window = 0;
  std::int64_t shift = 0;
  double stochasticDepth = 0.0;
  // abstract: the numbers themselves; for real kinds, optional measured overrides of the
  // workspaces and costs (written by `remat profile`).
  LayerNumbers numbers;
  bool hasMeasuredWorkspace = false;
  bool hasMeasuredCost = false;
  // block: its inner ops in forward order; the last one writes the block's output.
  std::vector<BlockOpSpec> ops;  // no initializer: BlockOpSpec is complete only below (clang)
};

// One inner op of a `block` layer. Tensors are numbered as in BlockGraph: 0 is the block's input
// x(l-1) and i (1-based) the output of op i-1, so an op reads only tensors written before it.
// `layer` holds the name (relative to the block; the graph prefixes "<block>.") and, for conv2d,
// its fields (out_channels, kernel, stride, padding, groups, bias; a slice's begin and out_channels,
// a channel shuffle's groups: blockOpInfo(kind).fields); its kind follows `kind`.
struct BlockOpSpec {
  BlockOpKind kind = BlockOpKind::Relu;
  LayerSpec layer;
  std::vector<std::size_t> inputs;  // add: exactly two; concat: one or more (along channels); else one
};

// Either a full NCHW / NC shape, or (for abstract chains) only a byte count.
struct InputSpec {
  std::vector<std::int64_t> shape;  // empty when only bytes are given
  std::uint64_t bytes = 0;          // used when shape is empty
  DType dtype = DType::Float32;
};

struct ChainSpec {
  std::string name;
  InputSpec input;
  std::vector<LayerSpec> layers;
};

using Shape = std::vector<std::int64_t>;
std::string shapeToString(const Shape& shape);
std::uint64_t elementCount(const Shape& shape);

// One layer of the memory model after shape inference (flatten folded away).
// One named share of a layer's e (what its forward saves for its backward), for the kinds whose
// description names them: the transformer kinds (attention, MLP, norms, masks, memory-model.md
// section 12). A layer's parts sum to its extraBytes.
struct SavedPart {
  std::string name;
  std::uint64_t bytes = 0;
  bool operator==(const SavedPart&) const = default;
};

struct ChainLayer {
  std::string name;
  LayerKind kind = LayerKind::Abstract;
  std::size_t specIndex = 0;  // index into ChainSpec::layers
  Shape inputShape;           // empty for abstract layers
  Shape outputShape;
  std::uint64_t paramCount = 0;
  // The element counts of the layer's parameter tensors in the order PyTorch's parameters() visits
  // them (a conv's weight, then its bias; a block's inner ops in turn), summing to paramCount; what
  // the single-tensor optimizer step allocates per tensor (memory-model.md 11.3). Empty: one tensor
  // of all paramBytes (abstract layers, a kind that does not split them).
  std::vector<std::uint64_t> paramTensors;
  // A block's (or transformer_block's) largest inner op's parameter count: the most parameter
  // gradient its backward makes at once, each inner op's freed before the next runs (memory-model.md
  // 11.2, --grads static). 0: all paramCount at once (one op, or a kind whose kernels do not split
  // its backward by op).
  std::uint64_t largestOpParamCount = 0;
  LayerNumbers numbers;
  std::vector<SavedPart> extraParts;  // empty unless the kind names them; sum = numbers.extraBytes
};

// A chain ready for the simulator and the planners. Layers are 1-based in the model (x0 is the
// input); layers[0] here is layer 1.
struct Chain {
  std::string name;
  DType dtype = DType::Float32;
  std::uint64_t inputBytes = 0;  // a0
  Shape inputShape;
  std::vector<ChainLayer> layers;
  ChainSpec spec;  // what it was built from, for saving
  // The optimizer, foreach and gradient mode of the step (memory-model.md section 11); not part of
  // the chain file: front ends set it from their options.
  StepOptions step;

  std::size_t size() const { return layers.size(); }
  // Model numbering: l in 1..n.
  const LayerNumbers& at(std::size_t l) const { return layers[l - 1].numbers; }
  std::uint64_t outBytes(std::size_t l) const { return l == 0 ? inputBytes : layers[l - 1].numbers.outBytes; }
  std::uint64_t paramBytes() const;
  std::uint64_t paramCount() const;
  // x0 + labels + parameters + parameter gradients when static + optimizer state (memory-model.md
  // sections 1 and 11.1; staticBreakdown has the parts).
  std::uint64_t staticBytes() const;
};

// Every integer field of a layer, and every dimension of input.shape, is at most this
// (docs/layers.md), so the shape arithmetic (dimension + 2 * padding, ...) never overflows.
inline constexpr std::int64_t kMaxIntegerField = 2147483647;

// A max pooling's E(l) is its argmax indices, one int64 per output element whatever the dtype, as
// PyTorch's max_pool2d_with_indices keeps them (docs/memory-model.md section 5.1).
inline constexpr std::uint64_t kMaxPoolIndexBytes = 8;

// The loss's class labels: int64, as PyTorch's cross_entropy and nll_loss targets are; static
// memory with the input (memory-model.md section 1).
using LabelIndex = std::int64_t;
// The labels a real chain's loss reads: one per sample, or one per token (N*S) when it ends in
// lm_head (cross entropy over [N, S, V]); 0 for an abstract last layer.
std::size_t labelCount(const Chain& chain);

// Shape inference: checks every layer and computes the model numbers. Errors name the chain, the
// layer (its 1-based position in spec.layers, its name and kind) and the field:
// "chain 'r', layer 2 ('c', conv2d): kernel 9 is larger than ...".
Result<Chain> buildChain(const ChainSpec& spec);

// "layer 2 ('c', conv2d)": a layer of spec.layers at 0-based `index`, as messages name it.
std::string layerLabel(const LayerSpec& layer, std::size_t index);

// buildChain one step at a time, for a reader that says where each layer stands in its file:
// start(), addLayer(0), addLayer(1), ..., finish(). Each error says what is wrong with the input
// or that one layer, without naming the chain or the layer; the caller adds the place. `spec`
// must outlive the builder.
class ChainBuilder {
 public:
  explicit ChainBuilder(const ChainSpec& spec);
  Status start();                      // the input (shape, bytes); a chain without layers
  Status addLayer(std::size_t index);  // spec.layers[index], in order
  Result<Chain> finish();              // a chain of flatten views alone is an error

 private:
  const ChainSpec& spec_;
  Chain chain_;
  Shape current_;
  std::uint64_t totalBytes_ = 0;  // guards the simulator's sums against overflow
};

// A chain of abstract layers straight from numbers (tests, random chains, benchmarks).
Chain makeAbstractChain(std::string name, std::uint64_t inputBytes, const std::vector<LayerNumbers>& layers);

}  // namespace remat
