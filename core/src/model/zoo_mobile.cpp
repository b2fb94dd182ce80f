// torchvision's mobile-era CNNs built from blocks of inner ops (torchvision/models/efficientnet.py,
// mobilenetv3.py, regnet.py, shufflenetv2.py), module for module; zoo.cpp registers them.
#include "zoo_mobile.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "layers_common.hpp"
#include "remat/model/operators.hpp"
#include "zoo_builder.hpp"

namespace remat::detail {
namespace {

// A block's inner op: a primitive layer (conv2d with its fields, batchnorm, an activation) or an
// add / mul, reading the tensors `inputs` (empty: the one written just before it).
BlockOpSpec innerOp(std::string name, BlockOpKind kind, std::vector<std::size_t> inputs = {}) {
  BlockOpSpec op;
  op.kind = kind;
  op.layer.name = std::move(name);
  op.inputs = std::move(inputs);
  return op;
}

BlockOpSpec innerConv(std::string name, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t groups,
                      bool bias) {
  BlockOpSpec op = innerOp(std::move(name), BlockOpKind::Conv2d);
  op.layer.kind = LayerKind::Conv2d;
  op.layer.outChannels = out;
  op.layer.kernel = kernel;
  op.layer.stride = stride;
  op.layer.padding = (kernel - 1) / 2;
  op.layer.groups = groups;
  op.layer.bias = bias;
  return op;
}

// The ops of a block, each reading the tensor before it unless it says otherwise; op i writes
// tensor i + 1.
class OpsBuilder {
 public:
  std::size_t conv(const std::string& name, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                   std::int64_t groups, bool bias, std::size_t in) {
    return push(innerConv(name, out, kernel, stride, groups, bias), in);
  }
  std::size_t op(const std::string& name, BlockOpKind kind, std::size_t in) { return push(innerOp(name, kind), in); }
  std::size_t binary(const std::string& name, BlockOpKind kind, std::size_t a, std::size_t b) {
    ops_.push_back(innerOp(name, kind, {a, b}));
    return ops_.size();
  }
  // ShuffleNetV2's channel ops: channels [begin, begin + count) of `in`; `in` shuffled in `groups`.
  std::size_t slice(const std::string& name, std::int64_t begin, std::int64_t count, std::size_t in) {
    BlockOpSpec op = innerOp(name, BlockOpKind::Slice);
    op.layer.channelBegin = begin;
    op.layer.outChannels = count;
    return push(std::move(op), in);
  }
  std::size_t shuffle(const std::string& name, std::int64_t groups, std::size_t in) {
    BlockOpSpec op = innerOp(name, BlockOpKind::ChannelShuffle);
    op.layer.groups = groups;
    return push(std::move(op), in);
  }
  std::vector<BlockOpSpec> take() && { return std::move(ops_); }

 private:
  std::size_t push(BlockOpSpec op, std::size_t in) {
    op.inputs = {in};
    ops_.push_back(std::move(op));
    return ops_.size();
  }
  std::vector<BlockOpSpec> ops_;
};

// One piece of an inverted residual (torchvision's MBConv and MobileNetV3's InvertedResidual), as
// the chain imports it from ONNX: the plain layers of a block without its skip, and the
// Squeeze-and-Excitation between them a block of its own; with the skip, the whole block is one.
struct InvertedResidualSpec {
  std::string name;                                                                 // "features.2.1"
  std::int64_t in = 0, expanded = 0, out = 0, kernel = 3, stride = 1, squeeze = 0;  // squeeze 0: no SE
  BlockOpKind activation = BlockOpKind::Silu, seActivation = BlockOpKind::Silu, seScale = BlockOpKind::Sigmoid;
};

// torchvision.ops.SqueezeExcitation on tensor `x`: avgpool, fc1, activation, fc2, scale_activation,
// then scale * x; returns the product's tensor.
std::size_t squeezeExcitation(OpsBuilder& o, const std::string& prefix, const InvertedResidualSpec& r, std::size_t x,
                              const std::string& mulName) {
  std::size_t t = o.op(prefix + "avgpool", BlockOpKind::GlobalAvgPool, x);
  t = o.conv(prefix + "fc1", r.squeeze, 1, 1, 1, true, t);
  t = o.op(prefix + "activation", r.seActivation, t);
  t = o.conv(prefix + "fc2", r.expanded, 1, 1, 1, true, t);
  t = o.op(prefix + "scale_activation", r.seScale, t);
  return o.binary(mulName, BlockOpKind::Mul, t, x);
}

std::vector<BlockOpSpec> residualBlockOps(const InvertedResidualSpec& r) {
  OpsBuilder o;
  std::size_t t = 0;
  int index = 0;
  auto prefix = [&] { return "block." + std::to_string(index); };
  if (r.expanded != r.in) {
    t = o.conv(prefix() + ".0", r.expanded, 1, 1, 1, false, t);
    t = o.op(prefix() + ".1", BlockOpKind::BatchNorm, t);
    t = o.op(prefix() + ".2", r.activation, t);
    ++index;
  }
  t = o.conv(prefix() + ".0", r.expanded, r.kernel, r.stride, r.expanded, false, t);
  t = o.op(prefix() + ".1", BlockOpKind::BatchNorm, t);
  t = o.op(prefix() + ".2", r.activation, t);
  ++index;
  if (r.squeeze > 0) {
    t = squeezeExcitation(o, prefix() + ".", r, t, prefix());
    ++index;
  }
  t = o.conv(prefix() + ".0", r.out, 1, 1, 1, false, t);
  t = o.op(prefix() + ".1", BlockOpKind::BatchNorm, t);
  o.binary("add", BlockOpKind::Add, t, 0);
  return std::move(o).take();
}

void invertedResidual(SpecBuilder& b, const InvertedResidualSpec& r) {
  if (r.stride == 1 && r.in == r.out) {
    b.add(r.name, LayerKind::Block).ops = residualBlockOps(r);
    return;
  }
  const LayerKind activation = blockOpInfo(r.activation).layer.value_or(LayerKind::Relu);
  int index = 0;
  auto prefix = [&] { return r.name + ".block." + std::to_string(index); };
  auto convBnAct = [&](std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t groups, bool act) {
    LayerSpec& conv = b.add(prefix() + ".0", LayerKind::Conv2d);
    conv.outChannels = out;
    conv.kernel = kernel;
    conv.stride = stride;
    conv.padding = (kernel - 1) / 2;
    conv.groups = groups;
    conv.bias = false;
    b.add(prefix() + ".1", LayerKind::BatchNorm);
    if (act) b.add(prefix() + ".2", activation);
    ++index;
  };
  if (r.expanded != r.in) convBnAct(r.expanded, 1, 1, 1, true);
  convBnAct(r.expanded, r.kernel, r.stride, r.expanded, true);
  if (r.squeeze > 0) {
    OpsBuilder o;
    squeezeExcitation(o, "", r, 0, "mul");
    b.add(prefix(), LayerKind::Block).ops = std::move(o).take();
    ++index;
  }
  convBnAct(r.out, 1, 1, 1, false);
}

// torchvision.models.efficientnet_b0: MBConv stages (expand ratio, kernel, stride, in, out,
// repeats), SiLU throughout, SE squeezing to max(1, in / 4) of the block's own input.
}  // namespace

void efficientNetB0(SpecBuilder& b, const ZooOptions& o) {
  b.conv("features.0.0", 32, 3, 2, 1, false);
  b.add("features.0.1", LayerKind::BatchNorm);
  b.add("features.0.2", LayerKind::Silu);
  const int stages[7][6] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},   {6, 5, 2, 24, 40, 2},  {6, 3, 2, 40, 80, 3},
                            {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4}, {6, 3, 1, 192, 320, 1}};
  for (int s = 0; s < 7; ++s) {
    const auto& c = stages[s];
    for (int i = 0; i < c[5]; ++i) {
      InvertedResidualSpec r;
      r.name = "features." + std::to_string(s + 1) + "." + std::to_string(i);
      r.in = i == 0 ? c[3] : c[4];
      r.expanded = r.in * c[0];
      r.out = c[4];
      r.kernel = c[1];
      r.stride = i == 0 ? c[2] : 1;
      r.squeeze = std::max<std::int64_t>(1, r.in / 4);
      invertedResidual(b, r);
    }
  }
  b.conv("features.8.0", 1280, 1, 1, 0, false);
  b.add("features.8.1", LayerKind::BatchNorm);
  b.add("features.8.2", LayerKind::Silu);
  b.adaptiveAvgPool("avgpool", 1);
  b.add("flatten", LayerKind::Flatten);
  b.dropout("classifier.0", 0.2);
  b.linear("classifier.1", o.numClasses);
}

namespace {

// torchvision's _make_divisible(v, 8): the SE width of MobileNetV3.
std::int64_t divisibleBy8(std::int64_t v) {
  std::int64_t rounded = std::max<std::int64_t>(8, (v + 4) / 8 * 8);
  if (10 * rounded < 9 * v) rounded += 8;
  return rounded;
}

// torchvision.models.mobilenet_v3_large: (in, kernel, expanded, out, SE, hardswish, stride).
}  // namespace

void mobilenetV3Large(SpecBuilder& b, const ZooOptions& o) {
  b.conv("features.0.0", 16, 3, 2, 1, false);
  b.add("features.0.1", LayerKind::BatchNorm);
  b.add("features.0.2", LayerKind::HardSwish);
  const int settings[15][7] = {{16, 3, 16, 16, 0, 0, 1},    {16, 3, 64, 24, 0, 0, 2},    {24, 3, 72, 24, 0, 0, 1},
                               {24, 5, 72, 40, 1, 0, 2},    {40, 5, 120, 40, 1, 0, 1},   {40, 5, 120, 40, 1, 0, 1},
                               {40, 3, 240, 80, 0, 1, 2},   {80, 3, 200, 80, 0, 1, 1},   {80, 3, 184, 80, 0, 1, 1},
                               {80, 3, 184, 80, 0, 1, 1},   {80, 3, 480, 112, 1, 1, 1},  {112, 3, 672, 112, 1, 1, 1},
                               {112, 5, 672, 160, 1, 1, 2}, {160, 5, 960, 160, 1, 1, 1}, {160, 5, 960, 160, 1, 1, 1}};
  for (int i = 0; i < 15; ++i) {
    const auto& c = settings[i];
    InvertedResidualSpec r;
    r.name = "features." + std::to_string(i + 1);
    r.in = c[0];
    r.kernel = c[1];
    r.expanded = c[2];
    r.out = c[3];
    r.squeeze = c[4] ? divisibleBy8(r.expanded / 4) : 0;
    r.activation = c[5] ? BlockOpKind::HardSwish : BlockOpKind::Relu;
    r.seActivation = BlockOpKind::Relu;
    r.seScale = BlockOpKind::HardSigmoid;
    r.stride = c[6];
    invertedResidual(b, r);
  }
  b.conv("features.16.0", 960, 1, 1, 0, false);
  b.add("features.16.1", LayerKind::BatchNorm);
  b.add("features.16.2", LayerKind::HardSwish);
  b.adaptiveAvgPool("avgpool", 1);
  b.add("flatten", LayerKind::Flatten);
  b.linear("classifier.0", 1280);
  b.add("classifier.1", LayerKind::HardSwish);
  b.dropout("classifier.2", 0.2);
  b.linear("classifier.3", o.numClasses);
}

namespace {

// torchvision.models.regnet_y_400mf: the stem, then Y blocks (ResBottleneckBlock, bottleneck
// multiplier 1, group width 8, SE squeezing to round(0.25 * the block's input width)) in stages of
// widths 48, 104, 208, 440 and depths 1, 3, 6, 6, each stage's first block strided with a
// conv-BN projection; every block is one block layer (its skip forces it, as the importer cuts it).
std::vector<BlockOpSpec> regnetYBlockOps(std::int64_t in, std::int64_t out, std::int64_t stride) {
  OpsBuilder o;
  std::size_t skip = 0;
  if (in != out || stride != 1) {
    skip = o.conv("proj.0", out, 1, stride, 1, false, 0);
    skip = o.op("proj.1", BlockOpKind::BatchNorm, skip);
  }
  std::size_t t = o.conv("f.a.0", out, 1, 1, 1, false, 0);
  t = o.op("f.a.1", BlockOpKind::BatchNorm, t);
  t = o.op("f.a.2", BlockOpKind::Relu, t);
  t = o.conv("f.b.0", out, 3, stride, out / 8, false, t);
  t = o.op("f.b.1", BlockOpKind::BatchNorm, t);
  const std::size_t x = o.op("f.b.2", BlockOpKind::Relu, t);
  t = o.op("f.se.avgpool", BlockOpKind::GlobalAvgPool, x);
  t = o.conv("f.se.fc1", (in + 2) / 4, 1, 1, 1, true, t);  // round(in / 4); no width here ends in .5
  t = o.op("f.se.activation", BlockOpKind::Relu, t);
  t = o.conv("f.se.fc2", out, 1, 1, 1, true, t);
  t = o.op("f.se.scale_activation", BlockOpKind::Sigmoid, t);
  t = o.binary("f.se", BlockOpKind::Mul, t, x);
  t = o.conv("f.c.0", out, 1, 1, 1, false, t);
  t = o.op("f.c.1", BlockOpKind::BatchNorm, t);
  t = o.binary("add", BlockOpKind::Add, skip, t);
  o.op("activation", BlockOpKind::Relu, t);
  return std::move(o).take();
}

}  // namespace

void regnetY400mf(SpecBuilder& b, const ZooOptions& o) {
  b.conv("stem.0", 32, 3, 2, 1, false);
  b.add("stem.1", LayerKind::BatchNorm);
  b.add("stem.2", LayerKind::Relu);
  const std::int64_t widths[4] = {48, 104, 208, 440};
  const int depths[4] = {1, 3, 6, 6};
  std::int64_t in = 32;
  for (int s = 0; s < 4; ++s) {
    for (int i = 0; i < depths[s]; ++i) {
      const std::string stage = "block" + std::to_string(s + 1);
      b.add("trunk_output." + stage + "." + stage + "-" + std::to_string(i), LayerKind::Block).ops =
          regnetYBlockOps(in, widths[s], i == 0 ? 2 : 1);
      in = widths[s];
    }
  }
  b.adaptiveAvgPool("avgpool", 1);
  b.add("flatten", LayerKind::Flatten);
  b.linear("fc", o.numClasses);
}

namespace {

// torchvision.models.shufflenet_v2_x1_0: stem conv-BN-ReLU and max pool, stages of 4, 8 and 4
// InvertedResidual blocks (116, 232, 464 channels), conv5, x.mean([2, 3]) and fc. A strided block
// concatenates branch1 (depthwise conv-BN, 1x1 conv-BN-ReLU) and branch2 of its input; the others
// split the channels in halves (x.chunk(2, dim=1): two slices) and concatenate the first half with
// branch2 of the second; both end in channel_shuffle(x, 2). As the importer cuts torch's export:
// the concatenation is an articulation point, so each block is a block layer up to the concat and
// a one-op block of the shuffle (the mean is named after its ReduceMean).
std::vector<BlockOpSpec> shuffleBlockOps(std::int64_t in, std::int64_t out, std::int64_t stride) {
  OpsBuilder o;
  const std::int64_t half = out / 2;
  std::size_t left = 0, right = 0;
  if (stride > 1) {
    left = o.conv("branch1.0", in, 3, stride, in, false, 0);
    left = o.op("branch1.1", BlockOpKind::BatchNorm, left);
    left = o.conv("branch1.2", half, 1, 1, 1, false, left);
    left = o.op("branch1.3", BlockOpKind::BatchNorm, left);
    left = o.op("branch1.4", BlockOpKind::Relu, left);
  } else {
    left = o.slice("slice", 0, in / 2, 0);
    right = o.slice("slice_1", in / 2, in / 2, 0);
  }
  std::size_t t = o.conv("branch2.0", half, 1, 1, 1, false, right);
  t = o.op("branch2.1", BlockOpKind::BatchNorm, t);
  t = o.op("branch2.2", BlockOpKind::Relu, t);
  t = o.conv("branch2.3", half, 3, stride, half, false, t);
  t = o.op("branch2.4", BlockOpKind::BatchNorm, t);
  t = o.conv("branch2.5", half, 1, 1, 1, false, t);
  t = o.op("branch2.6", BlockOpKind::BatchNorm, t);
  t = o.op("branch2.7", BlockOpKind::Relu, t);
  o.binary("concat", BlockOpKind::Concat, left, t);
  return std::move(o).take();
}

}  // namespace

void shufflenetV2(SpecBuilder& b, const ZooOptions& o) {
  b.conv("conv1.0", 24, 3, 2, 1, false);
  b.add("conv1.1", LayerKind::BatchNorm);
  b.add("conv1.2", LayerKind::Relu);
  b.maxpool("maxpool", 3, 2, 1);
  const std::int64_t widths[3] = {116, 232, 464};
  const int repeats[3] = {4, 8, 4};
  std::int64_t in = 24;
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < repeats[s]; ++i) {
      const std::string name = "stage" + std::to_string(s + 2) + "." + std::to_string(i);
      b.add(name, LayerKind::Block).ops = shuffleBlockOps(in, widths[s], i == 0 ? 2 : 1);
      OpsBuilder shuffle;
      shuffle.shuffle("channel_shuffle", 2, 0);
      b.add(name + ".channel_shuffle", LayerKind::Block).ops = std::move(shuffle).take();
      in = widths[s];
    }
  }
  b.conv("conv5.0", 1024, 1, 1, 0, false);
  b.add("conv5.1", LayerKind::BatchNorm);
  b.add("conv5.2", LayerKind::Relu);
  b.adaptiveAvgPool("reducemean", 1);
  b.add("reducemean.flatten", LayerKind::Flatten);
  b.linear("fc", o.numClasses);
}

}  // namespace remat::detail
