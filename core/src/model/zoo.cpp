// torchvision's classification CNNs as layer chains, module for module (torchvision/models/
// alexnet.py, vgg.py, resnet.py, mobilenetv2.py; the block-built families in zoo_mobile.cpp), and the registry. Layer
// names are torchvision's module paths; the functional flatten of the forward() methods is a flatten layer named
// "flatten".
#include "remat/model/zoo.hpp"

#include <algorithm>
#include <functional>
#include <tuple>

#include "layers_common.hpp"
#include "remat/base/text.hpp"
#include "remat/model/operators.hpp"
#include "zoo_builder.hpp"
#include "zoo_convnext.hpp"
#include "zoo_inception.hpp"
#include "zoo_mobile.hpp"
#include "zoo_swin.hpp"
#include "zoo_transformers.hpp"

namespace remat {
namespace {

using detail::SpecBuilder;

void alexnet(SpecBuilder& b, const ZooOptions& o) {
  b.conv("features.0", 64, 11, 4, 2, true);
  b.add("features.1", LayerKind::Relu);
  b.maxpool("features.2", 3, 2, 0);
  b.conv("features.3", 192, 5, 1, 2, true);
  b.add("features.4", LayerKind::Relu);
  b.maxpool("features.5", 3, 2, 0);
  b.conv("features.6", 384, 3, 1, 1, true);
  b.add("features.7", LayerKind::Relu);
  b.conv("features.8", 256, 3, 1, 1, true);
  b.add("features.9", LayerKind::Relu);
  b.conv("features.10", 256, 3, 1, 1, true);
  b.add("features.11", LayerKind::Relu);
  b.maxpool("features.12", 3, 2, 0);
  b.adaptiveAvgPool("avgpool", 6);
  b.add("flatten", LayerKind::Flatten);
  b.dropout("classifier.0", 0.5);
  b.linear("classifier.1", 4096);
  b.add("classifier.2", LayerKind::Relu);
  b.dropout("classifier.3", 0.5);
  b.linear("classifier.4", 4096);
  b.add("classifier.5", LayerKind::Relu);
  b.linear("classifier.6", o.numClasses);
}

// torchvision's cfgs; 0 is "M" (max pooling).
const std::vector<int> kVgg11 = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
const std::vector<int> kVgg13 = {64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
const std::vector<int> kVgg16 = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
const std::vector<int> kVgg19 = {64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
                                 512, 512, 512, 512, 0,   512, 512, 512, 512, 0};

void vgg(SpecBuilder& b, const ZooOptions& o, const std::vector<int>& cfg, bool batchNorm) {
  int index = 0;
  auto next = [&] { return "features." + std::to_string(index++); };
  for (int v : cfg) {
    if (v == 0) {
      b.maxpool(next(), 2, 2, 0);
      continue;
    }
    b.conv(next(), v, 3, 1, 1, true);
    if (batchNorm) b.add(next(), LayerKind::BatchNorm);
    b.add(next(), LayerKind::Relu);
  }
  b.adaptiveAvgPool("avgpool", 7);
  b.add("flatten", LayerKind::Flatten);
  b.linear("classifier.0", 4096);
  b.add("classifier.1", LayerKind::Relu);
  b.dropout("classifier.2", 0.5);
  b.linear("classifier.3", 4096);
  b.add("classifier.4", LayerKind::Relu);
  b.dropout("classifier.5", 0.5);
  b.linear("classifier.6", o.numClasses);
}

void resnet(SpecBuilder& b, const ZooOptions& o, LayerKind blockKind, const std::vector<int>& blocks) {
  const bool isBottleneck = blockKind == LayerKind::Bottleneck;
  const std::int64_t expansion = isBottleneck ? 4 : 1;
  b.conv("conv1", 64, 7, 2, 3, false);
  b.add("bn1", LayerKind::BatchNorm);
  b.add("relu", LayerKind::Relu);
  b.maxpool("maxpool", 3, 2, 1);
  const std::int64_t planes[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    for (int i = 0; i < blocks[stage]; ++i) {
      const std::int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(i);
      b.block(name, blockKind, planes[stage] * expansion, stride, isBottleneck ? planes[stage] : 0);
    }
  }
  b.adaptiveAvgPool("avgpool", 1);
  b.add("flatten", LayerKind::Flatten);
  b.linear("fc", o.numClasses);
}

void mobilenetV2(SpecBuilder& b, const ZooOptions& o) {
  auto convBnRelu6 = [&](const std::string& name, std::int64_t out, std::int64_t kernel, std::int64_t stride) {
    b.conv(name + ".0", out, kernel, stride, (kernel - 1) / 2, false);
    b.add(name + ".1", LayerKind::BatchNorm);
    b.add(name + ".2", LayerKind::Relu6);
  };
  convBnRelu6("features.0", 32, 3, 2);
  // t (expansion), c (channels), n (repeats), s (first stride): torchvision's setting at width 1.0.
  const int setting[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                             {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int index = 1;
  for (const auto& row : setting) {
    for (int i = 0; i < row[2]; ++i)
      b.block("features." + std::to_string(index++), LayerKind::InvertedResidual, row[1], i == 0 ? row[3] : 1, 0,
              row[0]);
  }
  convBnRelu6("features." + std::to_string(index), 1280, 1, 1);
  b.adaptiveAvgPool("avgpool", 1);  // nn.functional.adaptive_avg_pool2d(x, (1, 1)) in forward()
  b.add("flatten", LayerKind::Flatten);
  b.dropout("classifier.0", 0.2);
  b.linear("classifier.1", o.numClasses);
}

struct ZooModel {
  ZooEntry entry;
  std::function<void(SpecBuilder&, const ZooOptions&)> build;
};

// The models built in files of their own (zoo_convnext.cpp, zoo_inception.cpp).
void addModelsOfTheirOwnFiles(std::vector<ZooModel>& m) {
  m.push_back({{"convnext_tiny",
                "ConvNeXt-Tiny: 18 CNBlocks (7x7 depthwise conv, channel LayerNorm, 4x MLP, layer scale), 28.6M "
                "parameters",
                32},
               [](SpecBuilder& b, const ZooOptions& o) { detail::convnextTiny(b.spec(), o); }});
  m.push_back({{"inception_v3",
                "Inception-v3 (aux_logits=False): 11 Inception blocks with 1x7 / 7x1 and 1x3 / 3x1 convs, 23.8M "
                "parameters",
                75},
               [](SpecBuilder& b, const ZooOptions& o) { detail::inceptionV3(b.spec(), o); }});
}

const std::vector<ZooModel>& models() {
  static const std::vector<ZooModel> kModels = [] {
    std::vector<ZooModel> m;
    m.push_back({{"alexnet", "AlexNet: 5 conv + 3 linear layers, 61.1M parameters", 63}, alexnet});
    const std::pair<const char*, const std::vector<int>*> vggs[] = {
        {"11", &kVgg11}, {"13", &kVgg13}, {"16", &kVgg16}, {"19", &kVgg19}};
    for (bool bn : {false, true}) {
      for (const auto& [depth, cfg] : vggs) {
        const std::string name = std::string("vgg") + depth + (bn ? "_bn" : "");
        const std::string description =
            std::string("VGG-") + depth + (bn ? " with batch norm" : "") + ": 3x3 conv stacks + 3 linear layers";
        const std::vector<int>* c = cfg;
        m.push_back({{name, description, 32}, [c, bn](SpecBuilder& b, const ZooOptions& o) { vgg(b, o, *c, bn); }});
      }
    }
    const std::tuple<const char*, LayerKind, std::vector<int>> resnets[] = {
        {"18", LayerKind::BasicBlock, {2, 2, 2, 2}},
        {"34", LayerKind::BasicBlock, {3, 4, 6, 3}},
        {"50", LayerKind::Bottleneck, {3, 4, 6, 3}},
        {"101", LayerKind::Bottleneck, {3, 4, 23, 3}},
        {"152", LayerKind::Bottleneck, {3, 8, 36, 3}}};
    for (const auto& [depth, kind, blocks] : resnets) {
      int count = 0;
      for (int n : blocks) count += n;
      const std::string description = std::string("ResNet-") + depth + ": stem + " + std::to_string(count) + " " +
                                      std::string(kindName(kind)) + " layers + linear";
      // Captured by name: clang 14 (the fuzzers' compiler) cannot capture structured bindings.
      m.push_back(
          {{std::string("resnet") + depth, description, 1},
           [kind = kind, blocks = blocks](SpecBuilder& b, const ZooOptions& o) { resnet(b, o, kind, blocks); }});
    }
    m.push_back(
        {{"mobilenet_v2", "MobileNetV2: 17 inverted_residual layers between 3x3 and 1x1 conv layers", 1}, mobilenetV2});
    m.push_back({{"efficientnet_b0",
                  "EfficientNet-B0: 16 MBConv pieces with Squeeze-and-Excitation (blocks), SiLU, 5.3M parameters", 1},
                 detail::efficientNetB0});
    m.push_back(
        {{"mobilenet_v3_large",
          "MobileNetV3-Large: 15 inverted residuals, 8 with Squeeze-and-Excitation, hardswish, 5.5M parameters", 1},
         detail::mobilenetV3Large});
    m.push_back({{"regnet_y_400mf",
                  "RegNetY-400MF: 16 Y blocks (grouped 3x3 conv, Squeeze-and-Excitation, skip), 4.3M parameters", 1},
                 detail::regnetY400mf});
    m.push_back({{"shufflenet_v2_x1_0",
                  "ShuffleNetV2 1.0x: 16 blocks (channel split, branches, concat), each with a channel shuffle, 2.3M "
                  "parameters",
                  1},
                 detail::shufflenetV2});
    addModelsOfTheirOwnFiles(m);
    return m;
  }();
  return kModels;
}

std::string knownNames() {
  std::string names;
  for (const auto& m : models()) names += (names.empty() ? "" : ", ") + m.entry.name;
  for (const auto& entry : detail::transformerZooModels()) names += ", " + entry.name;
  for (const auto& entry : detail::swinZooModels()) names += ", " + entry.name;
  return names;
}

}  // namespace

std::vector<ZooEntry> zooModels() {
  std::vector<ZooEntry> entries;
  for (const auto& m : models()) entries.push_back(m.entry);
  for (auto& entry : detail::transformerZooModels()) entries.push_back(std::move(entry));
  for (auto& entry : detail::swinZooModels()) entries.push_back(std::move(entry));
  return entries;
}

Result<ChainSpec> zooChain(std::string_view name, const ZooOptions& options) {
  if (auto spec = detail::transformerZooChain(name, options)) return std::move(*spec);
  if (auto spec = detail::swinZooChain(name, options)) return std::move(*spec);
  const ZooModel* model = nullptr;
  for (const auto& m : models())
    if (m.entry.name == name) model = &m;
  if (model == nullptr)
    return Status::invalid("unknown zoo model " + quoteText(name, 40) + " (known models: " + knownNames() + ")");
  const std::string label = "zoo model '" + model->entry.name + "'";
  if (options.sequence > 0)
    return Status::invalid(label + ": a sequence length applies to the token models (gpt2, bert_base)");
  REMAT_RETURN_IF_ERROR(detail::checkPositiveField("batch", options.batch).withContext(label));
  REMAT_RETURN_IF_ERROR(detail::checkPositiveField("resolution", options.resolution).withContext(label));
  REMAT_RETURN_IF_ERROR(detail::checkPositiveField("num_classes", options.numClasses).withContext(label));
  if (options.resolution < model->entry.minResolution)
    return Status::invalid(label + ": resolution " + std::to_string(options.resolution) + " is below its minimum " +
                           std::to_string(model->entry.minResolution));
  ChainSpec spec;
  spec.name = model->entry.name;
  spec.input.shape = {options.batch, 3, options.resolution, options.resolution};
  spec.input.dtype = options.dtype;
  SpecBuilder builder(spec);
  model->build(builder, options);
  // The options can still be impossible together (bytes past 2^64, a batch norm that sees one
  // value per channel at batch 1): let shape inference say where.
  auto chain = buildChain(spec);
  if (!chain)
    return chain.status().withContext(label + " at batch " + std::to_string(options.batch) + ", resolution " +
                                      std::to_string(options.resolution));
  return spec;
}

}  // namespace remat
