// Squeeze-and-Excitation blocks on the CPU backend: global average pooling, 1x1 convs with bias on
// the pooled [N, C, 1, 1] tensor and the broadcasting product scale * x as a block's inner ops. The
// forward, the input gradient and the parameter gradients equal PyTorch's for torchvision's
// SqueezeExcitation as EfficientNet and MobileNetV3 build it (reference values made by
// scripts/make-se-reference.py with Debian's torch, tests/data/se/torch_reference.json); the
// model keeps what PyTorch's backward reads; an MBConv-like chain run under every planner's plan
// has the measured footprint of the simulator op by op and store-all's gradients.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cpu_harness.hpp"
#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/block.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

const json& reference() { return test::torchReference("se"); }

json conv1x1(const std::string& name, std::int64_t outChannels) {
  return {{"name", name}, {"kind", "conv2d"}, {"out_channels", outChannels}, {"kernel", 1}, {"bias", true}};
}

// torchvision.ops.SqueezeExcitation: avgpool, fc1, activation, fc2, scale_activation, scale * x.
json seOps(std::int64_t channels, std::int64_t squeeze, const std::string& activation, const std::string& scale,
           std::size_t input = 0) {
  json ops = json::array();
  ops.push_back({{"name", "avgpool"}, {"kind", "global_avgpool"}, {"inputs", {input}}});
  ops.push_back(conv1x1("fc1", squeeze));
  ops.push_back({{"name", "activation"}, {"kind", activation}});
  ops.push_back(conv1x1("fc2", channels));
  ops.push_back({{"name", "scale_activation"}, {"kind", scale}});
  return ops;
}

json seBlock(const std::string& activation, const std::string& scale) {
  const json& ref = reference();
  json ops = seOps(ref["shape"][1].get<std::int64_t>(), ref["squeeze"].get<std::int64_t>(), activation, scale);
  ops.push_back({{"name", "mul"}, {"kind", "mul"}, {"inputs", {5, 0}}});  // scale * input, as torchvision writes it
  return {{"name", "se"}, {"kind", "block"}, {"ops", ops}};
}

void checkAgainstTorch(const std::string& variant, const std::string& activation, const std::string& scale) {
  const json& ref = reference();
  const json& want = ref["variants"][variant];
  testing::LayerHarness h(ref["shape"].get<std::vector<std::int64_t>>(), seBlock(activation, scale));
  ASSERT_EQ(h.error(), "");
  ASSERT_EQ(h.paramCount(), want["params"].size());
  const std::vector<float> y =
      h.forward(ref["x"].get<std::vector<float>>(), want["params"].get<std::vector<float>>(), /*keep=*/true);
  test::expectCloseToTorch(y, want["y"], variant + " y");
  const auto g = h.backward(ref["r"].get<std::vector<float>>());
  test::expectCloseToTorch(g.dx, want["dx"], variant + " dx");
  test::expectCloseToTorch(g.dparams, want["dparams"], variant + " dparams");
}

TEST(SqueezeExcitationVsTorch, EfficientNetsForwardAndGradientsMatchPyTorch) {
  checkAgainstTorch("efficientnet", "silu", "sigmoid");
}

TEST(SqueezeExcitationVsTorch, MobileNetV3sForwardAndGradientsMatchPyTorch) {
  checkAgainstTorch("mobilenet_v3", "relu", "hardsigmoid");
}

// mul saves both operands (derivatives.yaml mul.Tensor: self's gradient is grad * other, other's is
// grad * self); the pooling keeps nothing but shapes. So the block keeps x(l-1) (the product's x),
// and E holds the scale (sigmoid's output, also what sigmoid's backward reads), fc2's input (the
// activation's output), the activation's input (SiLU reads it) and fc1's input (the pooled tensor):
// four [N, C or S, 1, 1] tensors, each in its own 256-byte slot (the last one unpadded).
TEST(SqueezeExcitationModel, KeepsBothOperandsOfTheProductAndNothingForThePooling) {
  const json& ref = reference();
  const Shape input = ref["shape"].get<Shape>();
  auto spec = parseChain(json({{"format", "remat-chain/1"},
                               {"name", "se"},
                               {"input", {{"shape", input}, {"dtype", "float32"}}},
                               {"layers", {seBlock("silu", "sigmoid")}}})
                             .dump(),
                         "se");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  const LayerNumbers& m = spec->at(1);
  EXPECT_TRUE(m.needsInput);
  EXPECT_FALSE(m.needsOutput);
  EXPECT_GT(m.extraBytes, 3u * kBlockTensorAlignBytes);
  EXPECT_LE(m.extraBytes, 4u * kBlockTensorAlignBytes);
  EXPECT_EQ(m.outBytes, elementCount(input) * 4);
  auto graph = buildBlockGraph(spec->spec.layers[0], input, DType::Float32);
  ASSERT_TRUE(graph.isOk());
  EXPECT_FALSE(graph->ops[0].readsInput);  // the pooling: shapes only
  EXPECT_TRUE(graph->ops.back().readsInput);
  EXPECT_TRUE(graph->ops.back().readsSecondInput);
  EXPECT_EQ(graph->tensors[1].shape, (Shape{input[0], input[1], 1, 1}));
}

TEST(SqueezeExcitationModel, RefusesShapesThatDoNotBroadcast) {
  json block = seBlock("silu", "sigmoid");
  block["ops"][3]["out_channels"] = 3;  // a scale of 3 channels for 8
  auto spec = parseChain(json({{"format", "remat-chain/1"},
                               {"name", "se"},
                               {"input", {{"shape", {2, 8, 5, 5}}, {"dtype", "float32"}}},
                               {"layers", {block}}})
                             .dump(),
                         "se");
  ASSERT_FALSE(spec.isOk());
  EXPECT_NE(spec.status().message().find("multiplies [2, 3, 1, 1] and [2, 8, 5, 5]"), std::string::npos)
      << spec.status().message();
  EXPECT_NE(spec.status().message().find("inner op 5 ('mul', mul)"), std::string::npos) << spec.status().message();
}

// EfficientNet's MBConv with its residual: expand conv-bn-silu, depthwise conv-bn-silu, SE, project
// conv-bn, add; then MobileNetV3's SE (relu, hardsigmoid) on its own: the pooled tensors and the
// scale cross the block's arena, E and the gradient arena under every plan.
TEST(SqueezeExcitationRun, MeasuredFootprintEqualsPredictionUnderEveryPlan) {
  auto conv = [](const std::string& name, std::int64_t out, std::int64_t kernel, std::int64_t groups) {
    return json{{"name", name},          {"kind", "conv2d"}, {"out_channels", out}, {"kernel", kernel},
                {"padding", kernel / 2}, {"groups", groups}, {"bias", false}};
  };
  json mb = json::array({conv("expand", 16, 1, 1),
                         {{"name", "bn0"}, {"kind", "batchnorm"}},
                         {{"name", "act0"}, {"kind", "silu"}},
                         conv("dw", 16, 3, 16),
                         {{"name", "bn1"}, {"kind", "batchnorm"}},
                         {{"name", "act1"}, {"kind", "silu"}}});
  for (json op : seOps(16, 4, "silu", "sigmoid", 6)) mb.push_back(op);
  mb.push_back({{"name", "scale"}, {"kind", "mul"}, {"inputs", {11, 6}}});
  mb.push_back(conv("project", 8, 1, 1));
  mb.push_back({{"name", "bn2"}, {"kind", "batchnorm"}});
  mb.push_back({{"name", "add"}, {"kind", "add"}, {"inputs", {14, 0}}});
  json v3 = seOps(8, 4, "relu", "hardsigmoid");
  v3.push_back({{"name", "mul"}, {"kind", "mul"}, {"inputs", {0, 5}}});  // operands the other way round
  const json j = {{"format", "remat-chain/1"},
                  {"name", "se-chain"},
                  {"input", {{"shape", {2, 3, 8, 8}}, {"dtype", "float32"}}},
                  {"layers",
                   {conv("stem", 8, 3, 1),
                    {{"name", "bn"}, {"kind", "batchnorm"}},
                    {{"name", "act"}, {"kind", "silu"}},
                    {{"name", "mbconv"}, {"kind", "block"}, {"ops", mb}},
                    {{"name", "se"}, {"kind", "block"}, {"ops", v3}},
                    {{"name", "pool"}, {"kind", "adaptive_avgpool"}},
                    {{"name", "flat"}, {"kind", "flatten"}},
                    {{"name", "fc"}, {"kind", "linear"}, {"out_features", 5}}}}};
  auto built = parseChain(j.dump(), "se-chain");
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device({.poisonMemory = true});
  const Chain chain = testing::fittedTo(*built, device);
  testing::expectEveryPlanReproducesStoreAll(chain, device, 7);
}

}  // namespace
}  // namespace remat
