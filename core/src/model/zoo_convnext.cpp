// torchvision.models.convnext_tiny (torchvision/models/convnext.py) as a layer chain, as the ONNX
// importer cuts torch's export of it (stochastic_depth_prob = 0): the stem conv 4x4/4 and its
// LayerNorm2d, four stages of CNBlocks (3, 3, 9, 3 blocks of 96, 192, 384, 768 channels) with a
// LayerNorm2d and a 2x2/2 conv between them, then avgpool, LayerNorm2d, flatten and the classifier.
// Each CNBlock is one `block` layer: dwconv 7x7 -> LayerNorm(C) -> Linear(C, 4C) -> GELU ->
// Linear(4C, C) -> layer_scale * x -> + input. Its permutes to channels-last and back are views that
// keep nothing, so the block stays NCHW: the LayerNorm over the last axis of the permuted tensor is
// `layernorm` over the channels and each Linear a 1x1 conv with bias, byte for byte what PyTorch
// saves (docs/memory-model.md section 6). A LayerNorm2d is the primitive `layernorm` over the
// channels of a 4-D input. Names are torchvision's module paths.
#include "zoo_convnext.hpp"

#include <string>

namespace remat::detail {
namespace {

constexpr double kConvNextEpsilon = 1e-6;  // torchvision's LayerNorm2d and CNBlock norm_layer

LayerSpec& addLayer(ChainSpec& spec, std::string name, LayerKind kind) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = kind;
  spec.layers.push_back(std::move(l));
  return spec.layers.back();
}

void conv(ChainSpec& spec, std::string name, std::int64_t out, std::int64_t kernel) {
  LayerSpec& l = addLayer(spec, std::move(name), LayerKind::Conv2d);
  l.outChannels = out;
  l.kernel = kernel;
  l.stride = kernel;  // the stem's 4x4/4 and the downsampling 2x2/2: patchify
  l.bias = true;
}

void layerNorm2d(ChainSpec& spec, std::string name) {
  addLayer(spec, std::move(name), LayerKind::LayerNorm).epsilon = kConvNextEpsilon;
}

// Inner op `kind` named `name` reading tensor `in` (op i writes tensor i + 1).
BlockOpSpec innerOp(std::string name, BlockOpKind kind, std::vector<std::size_t> inputs) {
  BlockOpSpec op;
  op.kind = kind;
  op.layer.name = std::move(name);
  op.inputs = std::move(inputs);
  return op;
}

BlockOpSpec innerConv(std::string name, std::int64_t out, std::int64_t kernel, std::int64_t groups, std::size_t in) {
  BlockOpSpec op = innerOp(std::move(name), BlockOpKind::Conv2d, {in});
  op.layer.kind = LayerKind::Conv2d;
  op.layer.outChannels = out;
  op.layer.kernel = kernel;
  op.layer.stride = 1;
  op.layer.padding = (kernel - 1) / 2;
  op.layer.groups = groups;
  op.layer.bias = true;
  return op;
}

// torchvision's CNBlock on C channels.
std::vector<BlockOpSpec> cnBlockOps(std::int64_t channels) {
  std::vector<BlockOpSpec> ops;
  ops.push_back(innerConv("block.0", channels, 7, channels, 0));  // depthwise
  BlockOpSpec norm = innerOp("block.2", BlockOpKind::LayerNorm, {1});
  norm.layer.epsilon = kConvNextEpsilon;
  ops.push_back(std::move(norm));
  ops.push_back(innerConv("block.3", 4 * channels, 1, 1, 2));  // Linear(C, 4C) over the channels
  ops.push_back(innerOp("block.4", BlockOpKind::Gelu, {3}));
  ops.push_back(innerConv("block.5", channels, 1, 1, 4));  // Linear(4C, C)
  ops.push_back(innerOp("layer_scale", BlockOpKind::LayerScale, {5}));
  ops.push_back(innerOp("add", BlockOpKind::Add, {6, 0}));
  return ops;
}

}  // namespace

void convnextTiny(ChainSpec& spec, const ZooOptions& options) {
  const std::int64_t widths[4] = {96, 192, 384, 768};
  const int depths[4] = {3, 3, 9, 3};
  conv(spec, "features.0.0", widths[0], 4);
  layerNorm2d(spec, "features.0.1");
  for (int s = 0; s < 4; ++s) {
    const std::string stage = "features." + std::to_string(1 + 2 * s);
    for (int i = 0; i < depths[s]; ++i)
      addLayer(spec, stage + "." + std::to_string(i), LayerKind::Block).ops = cnBlockOps(widths[s]);
    if (s == 3) break;
    const std::string down = "features." + std::to_string(2 + 2 * s);
    layerNorm2d(spec, down + ".0");
    conv(spec, down + ".1", widths[s + 1], 2);
  }
  LayerSpec& pool = addLayer(spec, "avgpool", LayerKind::AdaptiveAvgPool);
  pool.outputHeight = pool.outputWidth = 1;
  layerNorm2d(spec, "classifier.0");
  addLayer(spec, "classifier.1", LayerKind::Flatten);
  addLayer(spec, "classifier.2", LayerKind::Linear).outFeatures = options.numClasses;
}

}  // namespace remat::detail
