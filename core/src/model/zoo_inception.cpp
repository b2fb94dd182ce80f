// torchvision.models.inception_v3(aux_logits=False) (torchvision/models/inception.py) as a layer
// chain, as the ONNX importer cuts torch's training-mode export of it: the stem's BasicConv2d
// (conv without bias, BatchNorm, ReLU) as plain layers with two max pools, then the eleven Inception
// modules (Mixed_5b to Mixed_7c), each one `block` layer whose branches are its inner ops and whose
// last op is the concatenation along the channels, then avgpool, dropout (p 0.5), flatten and fc.
// InceptionC, D and E have the factorised 1x7 / 7x1 and 1x3 / 3x1 convolutions (conv2d's per-axis
// fields); InceptionE's inner torch.cat([3x1, 1x3]) is one concat with the outer one, as the
// importer merges them. Names are torchvision's module paths (a BasicConv2d's ReLU takes the
// module's name, its pools the importer's "avgpool" / "maxpool").
#include "zoo_inception.hpp"

#include <string>

namespace remat::detail {
namespace {

// A BasicConv2d's kernel, stride and padding per axis (height, width).
struct Window {
  std::int64_t kh = 1, kw = 1, stride = 1, ph = 0, pw = 0;
};
constexpr Window k1x1{};
constexpr Window k3x3{3, 3, 1, 0, 0};
constexpr Window k3x3pad{3, 3, 1, 1, 1};
constexpr Window k3x3s2{3, 3, 2, 0, 0};
constexpr Window k1x7{1, 7, 1, 0, 3};
constexpr Window k7x1{7, 1, 1, 3, 0};
constexpr Window k1x3{1, 3, 1, 0, 1};
constexpr Window k3x1{3, 1, 1, 1, 0};

LayerSpec convLayer(std::string name, std::int64_t out, const Window& w) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = LayerKind::Conv2d;
  l.outChannels = out;
  l.kernel = w.kh;
  l.stride = w.stride;
  l.padding = w.ph;
  l.setWidthAxis(w.kw, w.stride, w.pw);
  l.bias = false;  // followed by a batch norm
  return l;
}

// A block's inner ops; tensor 0 is the block's input, op i writes tensor i + 1.
class Branches {
 public:
  // BasicConv2d `name` on tensor `in`: conv, bn, relu; returns the relu's tensor.
  std::size_t basicConv(const std::string& name, std::int64_t out, const Window& w, std::size_t in) {
    BlockOpSpec conv;
    conv.kind = BlockOpKind::Conv2d;
    conv.layer = convLayer(name + ".conv", out, w);
    push(std::move(conv), {in});
    push(op(name + ".bn", BlockOpKind::BatchNorm), {ops_.size()});
    return push(op(name, BlockOpKind::Relu), {ops_.size()});
  }
  // A 3x3 pool of the block's input: avg_pool2d(stride 1, padding 1) or max_pool2d(stride 2).
  std::size_t pool(bool average) {
    BlockOpSpec p = op(average ? "avgpool" : "maxpool", average ? BlockOpKind::AvgPool : BlockOpKind::MaxPool);
    p.layer.kind = average ? LayerKind::AvgPool : LayerKind::MaxPool;
    p.layer.kernel = 3;
    p.layer.stride = average ? 1 : 2;
    p.layer.padding = average ? 1 : 0;
    return push(std::move(p), {0});
  }
  std::vector<BlockOpSpec> concat(std::vector<std::size_t> branches) && {
    push(op("concat", BlockOpKind::Concat), std::move(branches));
    return std::move(ops_);
  }

 private:
  static BlockOpSpec op(std::string name, BlockOpKind kind) {
    BlockOpSpec o;
    o.kind = kind;
    o.layer.name = std::move(name);
    return o;
  }
  std::size_t push(BlockOpSpec o, std::vector<std::size_t> inputs) {
    o.inputs = std::move(inputs);
    ops_.push_back(std::move(o));
    return ops_.size();
  }
  std::vector<BlockOpSpec> ops_;
};

std::vector<BlockOpSpec> inceptionA(std::int64_t poolFeatures) {
  Branches b;
  const std::size_t b1 = b.basicConv("branch1x1", 64, k1x1, 0);
  std::size_t b5 = b.basicConv("branch5x5_1", 48, k1x1, 0);
  b5 = b.basicConv("branch5x5_2", 64, {5, 5, 1, 2, 2}, b5);
  std::size_t b3 = b.basicConv("branch3x3dbl_1", 64, k1x1, 0);
  b3 = b.basicConv("branch3x3dbl_2", 96, k3x3pad, b3);
  b3 = b.basicConv("branch3x3dbl_3", 96, k3x3pad, b3);
  const std::size_t bp = b.basicConv("branch_pool", poolFeatures, k1x1, b.pool(true));
  return std::move(b).concat({b1, b5, b3, bp});
}

std::vector<BlockOpSpec> inceptionB() {
  Branches b;
  const std::size_t b3 = b.basicConv("branch3x3", 384, k3x3s2, 0);
  std::size_t dbl = b.basicConv("branch3x3dbl_1", 64, k1x1, 0);
  dbl = b.basicConv("branch3x3dbl_2", 96, k3x3pad, dbl);
  dbl = b.basicConv("branch3x3dbl_3", 96, k3x3s2, dbl);
  return std::move(b).concat({b3, dbl, b.pool(false)});
}

std::vector<BlockOpSpec> inceptionC(std::int64_t c7) {
  Branches b;
  const std::size_t b1 = b.basicConv("branch1x1", 192, k1x1, 0);
  std::size_t b7 = b.basicConv("branch7x7_1", c7, k1x1, 0);
  b7 = b.basicConv("branch7x7_2", c7, k1x7, b7);
  b7 = b.basicConv("branch7x7_3", 192, k7x1, b7);
  std::size_t dbl = b.basicConv("branch7x7dbl_1", c7, k1x1, 0);
  dbl = b.basicConv("branch7x7dbl_2", c7, k7x1, dbl);
  dbl = b.basicConv("branch7x7dbl_3", c7, k1x7, dbl);
  dbl = b.basicConv("branch7x7dbl_4", c7, k7x1, dbl);
  dbl = b.basicConv("branch7x7dbl_5", 192, k1x7, dbl);
  const std::size_t bp = b.basicConv("branch_pool", 192, k1x1, b.pool(true));
  return std::move(b).concat({b1, b7, dbl, bp});
}

std::vector<BlockOpSpec> inceptionD() {
  Branches b;
  std::size_t b3 = b.basicConv("branch3x3_1", 192, k1x1, 0);
  b3 = b.basicConv("branch3x3_2", 320, k3x3s2, b3);
  std::size_t b7 = b.basicConv("branch7x7x3_1", 192, k1x1, 0);
  b7 = b.basicConv("branch7x7x3_2", 192, k1x7, b7);
  b7 = b.basicConv("branch7x7x3_3", 192, k7x1, b7);
  b7 = b.basicConv("branch7x7x3_4", 192, k3x3s2, b7);
  return std::move(b).concat({b3, b7, b.pool(false)});
}

std::vector<BlockOpSpec> inceptionE() {
  Branches b;
  const std::size_t b1 = b.basicConv("branch1x1", 320, k1x1, 0);
  const std::size_t b3 = b.basicConv("branch3x3_1", 384, k1x1, 0);
  const std::size_t b3a = b.basicConv("branch3x3_2a", 384, k1x3, b3);
  const std::size_t b3b = b.basicConv("branch3x3_2b", 384, k3x1, b3);
  std::size_t dbl = b.basicConv("branch3x3dbl_1", 448, k1x1, 0);
  dbl = b.basicConv("branch3x3dbl_2", 384, k3x3pad, dbl);
  const std::size_t dblA = b.basicConv("branch3x3dbl_3a", 384, k1x3, dbl);
  const std::size_t dblB = b.basicConv("branch3x3dbl_3b", 384, k3x1, dbl);
  const std::size_t bp = b.basicConv("branch_pool", 192, k1x1, b.pool(true));
  return std::move(b).concat({b1, b3a, b3b, dblA, dblB, bp});
}

LayerSpec& addLayer(ChainSpec& spec, std::string name, LayerKind kind) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = kind;
  spec.layers.push_back(std::move(l));
  return spec.layers.back();
}

void basicConv(ChainSpec& spec, const std::string& name, std::int64_t out, const Window& w) {
  spec.layers.push_back(convLayer(name + ".conv", out, w));
  addLayer(spec, name + ".bn", LayerKind::BatchNorm);
  addLayer(spec, name, LayerKind::Relu);
}

void maxPool(ChainSpec& spec, std::string name) {
  LayerSpec& l = addLayer(spec, std::move(name), LayerKind::MaxPool);
  l.kernel = 3;
  l.stride = 2;
}

}  // namespace

void inceptionV3(ChainSpec& spec, const ZooOptions& options) {
  basicConv(spec, "Conv2d_1a_3x3", 32, {3, 3, 2, 0, 0});
  basicConv(spec, "Conv2d_2a_3x3", 32, k3x3);
  basicConv(spec, "Conv2d_2b_3x3", 64, k3x3pad);
  maxPool(spec, "maxpool1");
  basicConv(spec, "Conv2d_3b_1x1", 80, k1x1);
  basicConv(spec, "Conv2d_4a_3x3", 192, k3x3);
  maxPool(spec, "maxpool2");
  addLayer(spec, "Mixed_5b", LayerKind::Block).ops = inceptionA(32);
  addLayer(spec, "Mixed_5c", LayerKind::Block).ops = inceptionA(64);
  addLayer(spec, "Mixed_5d", LayerKind::Block).ops = inceptionA(64);
  addLayer(spec, "Mixed_6a", LayerKind::Block).ops = inceptionB();
  const std::pair<const char*, std::int64_t> cs[] = {
      {"Mixed_6b", 128}, {"Mixed_6c", 160}, {"Mixed_6d", 160}, {"Mixed_6e", 192}};
  for (const auto& [name, c7] : cs) addLayer(spec, name, LayerKind::Block).ops = inceptionC(c7);
  addLayer(spec, "Mixed_7a", LayerKind::Block).ops = inceptionD();
  addLayer(spec, "Mixed_7b", LayerKind::Block).ops = inceptionE();
  addLayer(spec, "Mixed_7c", LayerKind::Block).ops = inceptionE();
  LayerSpec& pool = addLayer(spec, "avgpool", LayerKind::AdaptiveAvgPool);
  pool.outputHeight = pool.outputWidth = 1;
  addLayer(spec, "dropout", LayerKind::Dropout).dropoutP = 0.5;
  addLayer(spec, "flatten", LayerKind::Flatten);
  addLayer(spec, "fc", LayerKind::Linear).outFeatures = options.numClasses;
}

}  // namespace remat::detail
