// The model zoo against torchvision: parameter counts, layer names and output shapes, the minimum
// resolutions, the options, and the u(k) invariant that the linear planner relies on.
#include "remat/model/zoo.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "chain_helpers.hpp"
#include "remat/memory/simulator.hpp"

namespace remat {
namespace {

using testing::zooBuilt;

const ChainLayer* findLayer(const Chain& chain, const std::string& name) {
  for (const auto& l : chain.layers)
    if (l.name == name) return &l;
  ADD_FAILURE() << chain.name << " has no layer '" << name << "'";
  return nullptr;
}

Shape outputOf(const Chain& chain, const std::string& name) {
  const ChainLayer* l = findLayer(chain, name);
  return l ? l->outputShape : Shape{};
}

// Each named layer's output shape.
void expectOutputs(const Chain& chain, const std::vector<std::pair<std::string, Shape>>& expected) {
  for (const auto& [name, shape] : expected) EXPECT_EQ(outputOf(chain, name), shape) << chain.name << " " << name;
}

TEST(Zoo, ListsTorchvisionModels) {
  std::vector<std::string> names;
  for (const auto& e : zooModels()) {
    names.push_back(e.name);
    EXPECT_FALSE(e.description.empty()) << e.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"alexnet",
                                             "vgg11",
                                             "vgg13",
                                             "vgg16",
                                             "vgg19",
                                             "vgg11_bn",
                                             "vgg13_bn",
                                             "vgg16_bn",
                                             "vgg19_bn",
                                             "resnet18",
                                             "resnet34",
                                             "resnet50",
                                             "resnet101",
                                             "resnet152",
                                             "mobilenet_v2",
                                             "efficientnet_b0",
                                             "mobilenet_v3_large",
                                             "regnet_y_400mf",
                                             "shufflenet_v2_x1_0",
                                             "convnext_tiny",
                                             "inception_v3",
                                             "gpt2",
                                             "bert_base",
                                             "vit_b_16"}));
}

TEST(Zoo, ParameterCountsEqualTorchvision) {
  const std::map<std::string, std::uint64_t> expected = {
      {"alexnet", 61100840},
      {"vgg11", 132863336},
      {"vgg13", 133047848},
      {"vgg16", 138357544},
      {"vgg19", 143667240},
      {"vgg11_bn", 132868840},
      {"vgg13_bn", 133053736},
      {"vgg16_bn", 138365992},
      {"vgg19_bn", 143678248},
      {"resnet18", 11689512},
      {"resnet34", 21797672},
      {"resnet50", 25557032},
      {"resnet101", 44549160},
      {"resnet152", 60192808},
      {"mobilenet_v2", 3504872},
      {"efficientnet_b0", 5288548},
      {"mobilenet_v3_large", 5483032},
      {"regnet_y_400mf", 4344144},
      {"shufflenet_v2_x1_0", 2278604},
      {"convnext_tiny", 28589128},
      {"inception_v3", 23834568},  // inception_v3(aux_logits=False)
      // Hugging Face gpt2 (tied), bert-base-uncased (BertModel with pooler), torchvision vit_b_16
      {"gpt2", 124439808},
      {"bert_base", 109482240},
      {"vit_b_16", 86567656}};  // sum(p.numel() for p in m.parameters())
  ASSERT_EQ(expected.size(), zooModels().size());
  for (const auto& [name, count] : expected) {
    const Chain chain = zooBuilt(name);
    EXPECT_EQ(chain.paramCount(), count) << name;
    EXPECT_EQ(chain.paramBytes(), count * 4) << name;
  }
  // The classifier follows num_classes: resnet50's fc is 2048 * 10 + 10.
  EXPECT_EQ(zooBuilt("resnet50", {2, 224, DType::Float32, 10}).paramCount(), 25557032u - 2049u * 1000 + 2049u * 10);
}

TEST(Zoo, ResNetShapesAndNames) {
  const Chain r50 = zooBuilt("resnet50", {8, 224, DType::Float32, 1000});
  std::vector<std::string> names;
  for (const auto& l : r50.spec.layers) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1",    "bn1",      "relu",     "maxpool",  "layer1.0", "layer1.1",
                                             "layer1.2", "layer2.0", "layer2.1", "layer2.2", "layer2.3", "layer3.0",
                                             "layer3.1", "layer3.2", "layer3.3", "layer3.4", "layer3.5", "layer4.0",
                                             "layer4.1", "layer4.2", "avgpool",  "flatten",  "fc"}));
  EXPECT_EQ(r50.inputShape, (Shape{8, 3, 224, 224}));
  expectOutputs(r50, {{"conv1", {8, 64, 112, 112}},
                      {"maxpool", {8, 64, 56, 56}},
                      {"layer1.2", {8, 256, 56, 56}},
                      {"layer2.3", {8, 512, 28, 28}},
                      {"layer3.5", {8, 1024, 14, 14}},
                      {"layer4.2", {8, 2048, 7, 7}},
                      {"avgpool", {8, 2048, 1, 1}},
                      {"fc", {8, 1000}}});
  const LayerSpec& stem = r50.spec.layers[0];
  EXPECT_EQ(stem.kernel, 7);
  EXPECT_EQ(stem.stride, 2);
  EXPECT_EQ(stem.padding, 3);
  EXPECT_FALSE(stem.bias);
  EXPECT_EQ(r50.spec.layers[4].kind, LayerKind::Bottleneck);
  EXPECT_EQ(r50.spec.layers[4].width, 64);
  EXPECT_EQ(r50.spec.layers[7].width, 128);
  EXPECT_EQ(r50.spec.layers[7].stride, 2);

  const Chain r18 = zooBuilt("resnet18", {8, 224, DType::Float32, 1000});
  EXPECT_EQ(r18.spec.layers[4].kind, LayerKind::BasicBlock);
  expectOutputs(r18, {{"layer1.1", {8, 64, 56, 56}}, {"layer2.1", {8, 128, 28, 28}}, {"layer4.1", {8, 512, 7, 7}}});
  EXPECT_EQ(zooBuilt("resnet152").size(), 4u + 50 + 2);
  EXPECT_EQ(zooBuilt("resnet101").size(), 4u + 33 + 2);
  EXPECT_EQ(zooBuilt("resnet34").size(), 4u + 16 + 2);
}

TEST(Zoo, VggAndAlexNetShapes) {
  const Chain vgg16 = zooBuilt("vgg16", {4, 224, DType::Float32, 1000});
  EXPECT_EQ(vgg16.spec.layers[30].name, "features.30");
  EXPECT_EQ(vgg16.spec.layers[30].kind, LayerKind::MaxPool);
  EXPECT_EQ(outputOf(vgg16, "features.30"), (Shape{4, 512, 7, 7}));
  EXPECT_EQ(outputOf(vgg16, "avgpool"), (Shape{4, 512, 7, 7}));
  EXPECT_EQ(findLayer(vgg16, "classifier.0")->inputShape, (Shape{4, 25088}));
  EXPECT_EQ(outputOf(vgg16, "classifier.6"), (Shape{4, 1000}));
  EXPECT_EQ(vgg16.spec.layers[findLayer(vgg16, "classifier.2")->specIndex].dropoutP, 0.5);
  const Chain vgg16bn = zooBuilt("vgg16_bn", {4, 224, DType::Float32, 1000});
  EXPECT_EQ(outputOf(vgg16bn, "features.43"), (Shape{4, 512, 7, 7}));
  EXPECT_EQ(findLayer(vgg16bn, "features.1")->kind, LayerKind::BatchNorm);

  const Chain alexnet = zooBuilt("alexnet", {4, 224, DType::Float32, 1000});
  expectOutputs(alexnet, {{"features.0", {4, 64, 55, 55}},
                          {"features.2", {4, 64, 27, 27}},
                          {"features.12", {4, 256, 6, 6}},
                          {"avgpool", {4, 256, 6, 6}}});
  EXPECT_EQ(findLayer(alexnet, "classifier.0")->kind, LayerKind::Dropout);
  EXPECT_EQ(findLayer(alexnet, "classifier.1")->inputShape, (Shape{4, 9216}));
  EXPECT_EQ(outputOf(alexnet, "classifier.6"), (Shape{4, 1000}));
}

TEST(Zoo, MobileNetV2ShapesAndNames) {
  const Chain m = zooBuilt("mobilenet_v2", {4, 224, DType::Float32, 1000});
  expectOutputs(m, {{"features.0.2", {4, 32, 112, 112}},
                    {"features.1", {4, 16, 112, 112}},
                    {"features.3", {4, 24, 56, 56}},
                    {"features.6", {4, 32, 28, 28}},
                    {"features.13", {4, 96, 14, 14}},
                    {"features.17", {4, 320, 7, 7}},
                    {"features.18.2", {4, 1280, 7, 7}},
                    {"classifier.1", {4, 1000}}});
  const ChainLayer* dropout = findLayer(m, "classifier.0");
  ASSERT_NE(dropout, nullptr);
  EXPECT_EQ(m.spec.layers[dropout->specIndex].dropoutP, 0.2);
  EXPECT_EQ(findLayer(m, "features.2")->kind, LayerKind::InvertedResidual);
  EXPECT_EQ(m.spec.layers[findLayer(m, "features.2")->specIndex].expandRatio, 6);
  EXPECT_EQ(m.spec.layers[findLayer(m, "features.1")->specIndex].expandRatio, 1);
}

TEST(Zoo, ForwardCostMatchesTorchvisionGflops) {
  // torchvision documents multiply-adds ("GFLOPS") at batch 1; a forward is 2 flops per
  // multiply-add plus the element-wise work.
  const std::map<std::string, double> macs = {
      {"alexnet", 0.71}, {"vgg16", 15.47}, {"resnet18", 1.81}, {"resnet50", 4.09}, {"mobilenet_v2", 0.30}};
  for (const auto& [name, g] : macs) {
    const Chain chain = zooBuilt(name, {1, 224, DType::Float32, 1000});
    double cost = 0;
    for (const auto& l : chain.layers) cost += l.numbers.fwdCost;
    EXPECT_GE(cost, 2 * g) << name;
    EXPECT_LE(cost, 2 * g * 1.08) << name;
  }
}

TEST(Zoo, MinimumResolutions) {
  const std::map<std::string, std::int64_t> expected = {
      {"alexnet", 63}, {"vgg16", 32}, {"resnet50", 1}, {"mobilenet_v2", 1}, {"inception_v3", 75}};
  for (const auto& entry : zooModels()) {
    if (expected.count(entry.name)) {
      EXPECT_EQ(entry.minResolution, expected.at(entry.name)) << entry.name;
    }
    ZooOptions options;
    options.resolution = entry.minResolution;
    auto atMin = zooChain(entry.name, options);
    EXPECT_TRUE(atMin.isOk()) << entry.name << ": " << atMin.status().message();
    if (entry.minResolution > 1) {
      // Below the minimum, the shapes themselves are impossible (not just the zoo's check).
      auto spec = zooChain(entry.name, options);
      ASSERT_TRUE(spec.isOk());
      spec->input.shape = {64, 3, entry.minResolution - 1, entry.minResolution - 1};
      EXPECT_FALSE(buildChain(*spec).isOk()) << entry.name;
      options.resolution = entry.minResolution - 1;
      auto below = zooChain(entry.name, options);
      ASSERT_FALSE(below.isOk()) << entry.name;
      EXPECT_NE(below.status().message().find("minimum"), std::string::npos) << below.status().message();
    }
  }
}

TEST(Zoo, OptionErrors) {
  auto unknown = zooChain("resnet51", {});
  ASSERT_FALSE(unknown.isOk());
  EXPECT_EQ(unknown.status().code(), ErrorCode::InvalidInput);
  EXPECT_NE(unknown.status().message().find("resnet51"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("mobilenet_v2"), std::string::npos);  // lists the known ones
  for (auto [options, field] :
       std::vector<std::pair<ZooOptions, std::string>>{{{0, 224, DType::Float32, 1000}, "batch"},
                                                       {{8, 0, DType::Float32, 1000}, "resolution"},
                                                       {{8, 224, DType::Float32, 0}, "num_classes"}}) {
    auto r = zooChain("vgg11", options);
    ASSERT_FALSE(r.isOk()) << field;
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
  }
  // Batch 1 at 32: layer4's batch norms see one value per channel, which training cannot do.
  auto tiny = zooChain("resnet50", {1, 32, DType::Float32, 1000});
  ASSERT_FALSE(tiny.isOk());
  EXPECT_NE(tiny.status().message().find("layer4.0"), std::string::npos) << tiny.status().message();
  EXPECT_NE(tiny.status().message().find("one value per channel"), std::string::npos) << tiny.status().message();
}

TEST(Zoo, DTypeScalesBytes) {
  const Chain f32 = zooBuilt("mobilenet_v2", {2, 96, DType::Float32, 1000});
  const Chain f16 = zooBuilt("mobilenet_v2", {2, 96, DType::Float16, 1000});
  ASSERT_EQ(f32.size(), f16.size());
  EXPECT_EQ(f16.dtype, DType::Float16);
  EXPECT_EQ(f16.paramBytes() * 2, f32.paramBytes());
  for (std::size_t l = 1; l <= f32.size(); ++l) EXPECT_EQ(f16.at(l).outBytes * 2, f32.at(l).outBytes) << l;
}

// docs/memory-model.md section 4: u(k) = T(k-1) + a(k) is nondecreasing along the zoo's chains,
// except MobileNetV2's, EfficientNet-B0's and MobileNetV3's, whose last activation's output (ReLU6,
// SiLU and hardswish read their input) only the global average pooling (a mean, which keeps
// nothing) reads: u falls at the pooling, and `linear` takes its O(n log n) path there.
TEST(Zoo, KeptPrefixPlusOutputIsNondecreasing) {
  for (const auto& entry : zooModels()) {
    const Chain chain = zooBuilt(entry.name);
    ASSERT_GT(chain.size(), 1u) << entry.name;
    std::uint64_t kept = 0;  // T(k-1)
    std::uint64_t previous = 0;
    std::vector<std::string> falls;
    for (std::size_t k = 1; k <= chain.size(); ++k) {
      const std::uint64_t u = kept + chain.outBytes(k);
      if (u < previous) falls.push_back(chain.layers[k - 1].name);
      previous = u;
      kept += keptBytes(chain, k);
    }
    const std::vector<std::string> expected =
        entry.name == "mobilenet_v2" || entry.name == "efficientnet_b0" || entry.name == "mobilenet_v3_large"
            ? std::vector<std::string>{"avgpool"}
            : std::vector<std::string>{};
    EXPECT_EQ(falls, expected) << entry.name << ": the layers where u(k) < u(k-1)";
  }
}

}  // namespace
}  // namespace remat
