// Multi-branch pieces on tensors that are not NCHW through the ONNX importer (issue 22): an MLP's
// x * Sigmoid(y) with y != x (the hostile campaign's pattern-half on the LayerNorm MLPs), an
// activation feeding two branches joined by an Add on a [N, F] head (activation-in-branches on
// MobileNetV3's [N, 1280]), a training-mode Dropout inside a branch (torchvision's
// `Dropout(act(a)) + a`), the same on [N, S, F]. Each imports as one `block` of element-wise inner
// ops and runs on the CPU under every planner's plan with the measured footprint of every op equal
// to the prediction and store-all's gradients; a Mul whose operands do not broadcast is refused at
// its node.
#include <gtest/gtest.h>

#include "executor_helpers.hpp"
#include "onnx_builder.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/block.hpp"

namespace remat {
namespace {

using testing::OnnxBuilder;

std::string gemm(OnnxBuilder& b, const std::string& x, const std::string& module, std::int64_t in, std::int64_t out) {
  return b.node("Gemm", {x, b.weight(module + ".weight", {out, in}), b.weight(module + ".bias", {out})}, module,
                {{"transB", std::int64_t{1}}});
}

std::string trainingDropout(OnnxBuilder& b, const std::string& x, const std::string& module, float p) {
  const std::string name = OnnxBuilder::scopedName(module, "Dropout");
  return b.node("Dropout", {x, b.constantFloat(p), b.constantBool(true)}, module, {}, {name + "_y", name + "_mask"});
}

// input [2, 12] -> fc1 -> [middle on [2, 16]] -> fc2 -> [2, 3].
std::string mlp(const std::function<std::string(OnnxBuilder&, const std::string&)>& middle) {
  OnnxBuilder b(14);  // HardSwish is an op from opset 14
  std::string t = gemm(b, b.input("input", {2, 12}), "fc1", 12, 16);
  t = middle(b, t);
  b.output(gemm(b, t, "fc2", 16, 3));
  return b.bytes();
}

// fc1's output h, Tanh(h), Sigmoid of that, times h: the gate of another tensor than it scales.
std::string gate(OnnxBuilder& b, const std::string& h) {
  const std::string s = b.node("Sigmoid", {b.node("Tanh", {h}, "gate.tanh")}, "gate.sigmoid");
  return b.node("Mul", {h, s}, "gate");
}

// a = HardSwish(h); Dropout(Sigmoid(a)) + a.
std::string dropoutBranch(OnnxBuilder& b, const std::string& h) {
  const std::string a = b.node("HardSwish", {h}, "head.act");
  const std::string branch = trainingDropout(b, b.node("Sigmoid", {a}, "head.branch.act"), "head.branch.drop", 0.25f);
  return b.node("Add", {branch, a}, "head.branch");
}

Result<OnnxImport> imported(const std::string& bytes) {
  return importOnnxModel(bytes, "elementwise.onnx", OnnxImportOptions{.batch = 2});
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

TEST(OnnxElementwiseBlocks, AGateOfAnotherTensorImportsAsABlockAndRuns) {
  auto model = imported(mlp(gate));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const auto& layers = model->spec.layers;
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[1].kind, LayerKind::Block);
  EXPECT_EQ(innerKinds(layers[1]), (std::vector<std::string>{"tanh", "sigmoid", "mul"}));
  expectRunsAsPredicted(*model, 3);
}

TEST(OnnxElementwiseBlocks, ATrainingDropoutInABranchImportsWithItsRatioAndRuns) {
  auto model = imported(mlp([](OnnxBuilder& b, const std::string& h) { return dropoutBranch(b, h); }));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const auto& layers = model->spec.layers;
  ASSERT_EQ(layers.size(), 4u);  // fc1, the HardSwish (a cut on each side), the piece, fc2
  EXPECT_EQ(layers[1].kind, LayerKind::HardSwish);
  ASSERT_EQ(layers[2].kind, LayerKind::Block);
  EXPECT_EQ(innerKinds(layers[2]), (std::vector<std::string>{"sigmoid", "dropout", "add"}));
  EXPECT_FLOAT_EQ(static_cast<float>(layers[2].ops[1].layer.dropoutP), 0.25f);
  auto chain = buildChain(model->spec);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  // E: sigmoid's output (its backward reads it: [2, 16] float32), then at a 16-byte boundary the
  // dropout's bool mask, one byte per element; the add reads nothing, so neither flag is set.
  EXPECT_EQ(chain->at(3).extraBytes, 2u * 16 * 4 + 2u * 16);
  EXPECT_FALSE(chain->at(3).needsInput);
  EXPECT_FALSE(chain->at(3).needsOutput);
  expectRunsAsPredicted(*model, 7);
}

TEST(OnnxElementwiseBlocks, SequenceTensorsImportAsBlocksAndRun) {
  OnnxBuilder b(14);  // HardSwish is an op from opset 14
  std::string t = b.node("Relu", {b.input("input", {2, 6, 8})}, "embed.act");
  t = gate(b, t);
  t = dropoutBranch(b, t);
  t = b.node("Flatten", {t}, "");
  b.output(gemm(b, t, "fc", 48, 4));
  auto model = imported(b.bytes());
  ASSERT_TRUE(model.isOk()) << model.status().message();
  auto chain = buildChain(model->spec);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  ASSERT_GE(chain->layers.size(), 3u);
  EXPECT_EQ(chain->layers[1].kind, LayerKind::Block);
  EXPECT_EQ(chain->layers[1].outputShape, (Shape{2, 6, 8}));
  expectRunsAsPredicted(*model, 11);
}

TEST(OnnxElementwiseBlocks, OperandsThatDoNotBroadcastAreRefusedAtTheMul) {
  OnnxBuilder b(14);  // HardSwish is an op from opset 14
  const std::string h = gemm(b, b.input("input", {2, 12}), "fc1", 12, 16);
  const std::string wide = gemm(b, b.node("Tanh", {h}, "act"), "fc2", 16, 32);
  const std::string s = b.node("Sigmoid", {wide}, "gate.sigmoid");
  b.output(gemm(b, b.node("Mul", {h, s}, "gate"), "fc3", 16, 3));
  auto model = imported(b.bytes());
  ASSERT_FALSE(model.isOk());
  const std::string& message = model.status().message();
  EXPECT_NE(message.find("elementwise.onnx"), std::string::npos) << message;
  EXPECT_NE(message.find("/gate/Mul"), std::string::npos) << message;
}

TEST(OnnxElementwiseBlocks, OperandsOfDifferentRanksAreRefusedAtTheMul) {
  OnnxBuilder c(13);
  std::string u = c.node("Relu", {c.input("input", {2, 6, 8})}, "act");
  const std::string g = c.node("Flatten", {c.node("Sigmoid", {u}, "gate.sigmoid")}, "");
  const std::string bad = c.node("Mul", {u, g}, "gate");  // [2, 6, 8] * [2, 48]: no broadcast
  c.output(c.node("Flatten", {bad}, "out"));
  auto model = imported(c.bytes());
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("/gate/Mul"), std::string::npos) << model.status().message();
}

// torchvision's branch on an NCHW map: Add(t, Dropout(t)) is one block of a dropout and an add (main
// refused it, "is inside a multi-branch piece"); a Gemm inside a piece is still refused at the Gemm.
TEST(OnnxElementwiseBlocks, ADropoutBranchOnAMapImportsAndAGemmInAPieceIsRefused) {
  auto model = imported(testing::withMiddle([](OnnxBuilder& b, const std::string& t) {
    return b.node("Add", {t, trainingDropout(b, t, "m.drop", 0.5f)}, "m");
  }));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  ASSERT_EQ(model->spec.layers[1].kind, LayerKind::Block);
  EXPECT_EQ(innerKinds(model->spec.layers[1]), (std::vector<std::string>{"dropout", "add"}));
  expectRunsAsPredicted(*model, 5);
  auto refused = imported(mlp([](OnnxBuilder& b, const std::string& h) {
    return b.node("Add", {h, gemm(b, h, "m.fc", 16, 16)}, "m");
  }));
  ASSERT_FALSE(refused.isOk());
  const std::string& message = refused.status().message();
  for (const char* part : {"('/m/fc/Gemm', Gemm)", "is inside a multi-branch piece", "Add, Mul, Concat, Dropout"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
}

}  // namespace
}  // namespace remat
