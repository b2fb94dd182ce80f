// Sub, Div and broadcasting Add of two activations inside multi-branch pieces through the ONNX
// importer (issue 22): an MLP's h / Sigmoid(h) - Sigmoid(h) on [N, F], and an NCHW map centred on
// its pooled mean, x - mean + mean, divided by Sigmoid(mean) ([N, C, 1, 1] broadcast against
// [N, C, H, W] on either side). Each imports as one `block` of those inner ops, operands in the
// node's order, and runs on the CPU under every planner's plan with the measured footprint of every
// op equal to the prediction and store-all's gradients. A Sub or Div with a constant operand outside
// LayerNorm's and GELU's patterns, and operands that do not broadcast, are refused at the node.
#include <gtest/gtest.h>

#include "executor_helpers.hpp"
#include "onnx_builder.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/block.hpp"

namespace remat {
namespace {

using testing::OnnxBuilder;
using Ints = std::vector<std::int64_t>;

std::string gemm(OnnxBuilder& b, const std::string& x, const std::string& module, std::int64_t in, std::int64_t out) {
  return b.node("Gemm", {x, b.weight(module + ".weight", {out, in}), b.weight(module + ".bias", {out})}, module,
                {{"transB", std::int64_t{1}}});
}

// input [2, 12] -> fc1 -> [middle on [2, 16]] -> fc2 -> [2, 3].
std::string mlp(const std::function<std::string(OnnxBuilder&, const std::string&)>& middle) {
  OnnxBuilder b(13);
  std::string t = gemm(b, b.input("input", {2, 12}), "fc1", 12, 16);
  t = middle(b, t);
  b.output(gemm(b, t, "fc2", 16, 3));
  return b.bytes();
}

Result<OnnxImport> imported(const std::string& bytes) {
  return importOnnxModel(bytes, "arith.onnx", OnnxImportOptions{.batch = 2});
}

std::vector<std::string> innerKinds(const LayerSpec& block) {
  std::vector<std::string> kinds;
  for (const BlockOpSpec& op : block.ops) kinds.emplace_back(blockOpKindName(op.kind));
  return kinds;
}

void expectRunsAsPredicted(const OnnxImport& model, std::uint64_t seed) {
  auto built = buildChain(model.spec);
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device({.poisonMemory = true});
  const Chain chain = testing::fittedTo(*built, device);
  testing::expectEveryPlanReproducesStoreAll(chain, device, seed);
}

void expectRefused(const std::string& bytes, const std::vector<std::string>& parts) {
  auto model = imported(bytes);
  ASSERT_FALSE(model.isOk());
  for (const std::string& part : parts)
    EXPECT_NE(model.status().message().find(part), std::string::npos) << part << " in: " << model.status().message();
}

TEST(OnnxBroadcastArith, SubAndDivOfTwoActivationsImportAsABlockAndRun) {
  auto model = imported(mlp([](OnnxBuilder& b, const std::string& h) {
    const std::string s = b.node("Sigmoid", {h}, "gate.sigmoid");
    return b.node("Sub", {b.node("Div", {h, s}, "gate.div"), s}, "gate");
  }));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const auto& layers = model->spec.layers;
  ASSERT_EQ(layers.size(), 3u);
  ASSERT_EQ(layers[1].kind, LayerKind::Block);
  EXPECT_EQ(innerKinds(layers[1]), (std::vector<std::string>{"sigmoid", "div", "sub"}));
  EXPECT_EQ(layers[1].ops[1].inputs, (std::vector<std::size_t>{0, 1}));  // h / s: the dividend first
  EXPECT_EQ(layers[1].ops[2].inputs, (std::vector<std::size_t>{2, 1}));  // q - s
  auto chain = buildChain(model->spec);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  EXPECT_TRUE(chain->at(2).needsInput);             // div reads h
  EXPECT_EQ(chain->at(2).extraBytes, 2u * 16 * 4);  // and s; sub reads nothing
  expectRunsAsPredicted(*model, 3);
}

// t - mean, + mean (a broadcasting Add), / Sigmoid(mean): the mean [2, 4, 1, 1] on both sides.
TEST(OnnxBroadcastArith, AMapCentredOnItsMeanImportsAsABlockAndRuns) {
  auto model = imported(testing::withMiddle([](OnnxBuilder& b, const std::string& t) {
    const std::string mean = b.node("GlobalAveragePool", {t}, "centre.pool");
    const std::string centred = b.node("Sub", {t, mean}, "centre.sub");
    const std::string back = b.node("Add", {mean, centred}, "centre.add");
    return b.node("Div", {back, b.node("Sigmoid", {mean}, "centre.gate")}, "centre");
  }));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  ASSERT_EQ(model->spec.layers[1].kind, LayerKind::Block);
  EXPECT_EQ(innerKinds(model->spec.layers[1]),
            (std::vector<std::string>{"global_avgpool", "sub", "add", "sigmoid", "div"}));
  auto chain = buildChain(model->spec);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  EXPECT_EQ(chain->layers[1].outputShape, (Shape{2, 4, 4, 4}));
  expectRunsAsPredicted(*model, 5);
}

TEST(OnnxBroadcastArith, AConstantOperandIsRefusedAtTheNode) {
  expectRefused(mlp([](OnnxBuilder& b, const std::string& h) {
                  return b.node("Sub", {h, b.constantFloat(0.5f)}, "shift");
                }),
                {"arith.onnx", "('/shift/Sub', Sub)", "subtracts with a constant or weight operand",
                 "Sub only of two activations"});
  expectRefused(mlp([](OnnxBuilder& b, const std::string& h) {
                  return b.node("Div", {h, b.weight("scale", {16})}, "scale");
                }),
                {"('/scale/Div', Div)", "divides with a constant or weight operand"});
}

TEST(OnnxBroadcastArith, OperandsThatDoNotBroadcastAreRefusedAtTheNode) {
  OnnxBuilder b(13);
  const std::string h = gemm(b, b.input("input", {2, 12}), "fc1", 12, 16);
  const std::string wide = gemm(b, b.node("Tanh", {h}, "act"), "fc2", 16, 32);
  b.output(gemm(b, b.node("Div", {h, b.node("Sigmoid", {wide}, "gate.sigmoid")}, "gate"), "fc3", 16, 3));
  expectRefused(b.bytes(), {"('/gate/Div', Div)", "divides [2, 16] and [2, 32]", "do not broadcast (axis 1)"});
  expectRefused(
      testing::withMiddle([](OnnxBuilder& c, const std::string& t) {
        const std::string other = c.node("MaxPool", {t}, "p", {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
        return c.node("Sub", {t, other}, "features.1");
      }),
      {"('/features/features.1/Sub', Sub)", "subtracts [2, 4, 2, 2] from [2, 4, 4, 4]", "do not broadcast (axis 2)"});
}

}  // namespace
}  // namespace remat
