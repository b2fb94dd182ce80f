// Blocks of element-wise inner ops on tensors that are not NCHW (issue 22): an MLP's [N, F] and a
// sequence's [N, S, F], with the activations, add, the broadcasting mul and dropout as inner ops, and
// dropout inside NCHW blocks too (torchvision's `Dropout(act(a)) + a` branch). The model keeps what
// PyTorch's autograd keeps (mul both operands, sigmoid and tanh their outputs, hardswish its input,
// dropout its one-byte bool mask and nothing else); the CPU runs them under every planner's plan
// with the measured footprint of every op equal to the prediction and store-all's gradients (the
// inner dropout's mask redrawn bit for bit on recomputation); non-element-wise ops on such a block
// are refused naming the op.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "executor_helpers.hpp"
#include "precision_runs.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/block.hpp"

namespace remat {
namespace {

using nlohmann::json;

json op(const std::string& name, const std::string& kind, std::vector<std::size_t> inputs = {}) {
  json o = {{"name", name}, {"kind", kind}};
  if (!inputs.empty()) o["inputs"] = inputs;
  return o;
}

json dropoutOp(const std::string& name, double p, std::size_t input) {
  json o = op(name, "dropout", {input});
  o["p"] = p;
  return o;
}

// x * Sigmoid(Tanh(x)): the gate of another tensor than the one it scales (the hostile campaign's
// pattern-half on an MLP), one block reading x twice.
json gateBlock(const std::string& name) {
  return {{"name", name},
          {"kind", "block"},
          {"ops", {op("tanh", "tanh", {0}), op("sigmoid", "sigmoid", {1}), op("mul", "mul", {0, 2})}}};
}

// Dropout(HardSwish(a)) + a: torchvision's branch with dropout, p 0.3.
json dropoutBranch(const std::string& name, const std::string& activation = "hardswish") {
  return {{"name", name},
          {"kind", "block"},
          {"ops", {op("act", activation, {0}), dropoutOp("drop", 0.3, 1), op("add", "add", {2, 0})}}};
}

Result<Chain> chainOf(const Shape& input, const json& layers, const std::string& name) {
  const json j = {{"format", "remat-chain/1"},
                  {"name", name},
                  {"input", {{"shape", input}, {"dtype", "float32"}}},
                  {"layers", layers}};
  return parseChain(j.dump(), name);
}

json linear(const std::string& name, std::int64_t out) {
  return {{"name", name}, {"kind", "linear"}, {"out_features", out}};
}

// mul.Tensor saves both operands; tanh and sigmoid their results: in = yes (x is mul's operand),
// E = tanh's output (its own 256-byte slot) and sigmoid's output (the last, unpadded), out = no.
TEST(ElementwiseBlockModel, AnMlpGateKeepsWhatAutogradKeeps) {
  auto chain = chainOf({4, 12}, {linear("fc1", 16), gateBlock("gate"), linear("fc2", 3)}, "gate");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  const LayerNumbers& m = chain->at(2);
  EXPECT_TRUE(m.needsInput);
  EXPECT_FALSE(m.needsOutput);
  EXPECT_EQ(m.outBytes, 4u * 16 * 4);
  EXPECT_EQ(m.extraBytes, kBlockTensorAlignBytes + 4u * 16 * 4);
  EXPECT_EQ(chain->layers[1].outputShape, (Shape{4, 16}));
}

// Dropout's backward reads only its mask, one byte per element (native_dropout's bool mask, the
// chain-level dropout's rule): E is the mask alone; hardswish reads x(l-1), so in = yes.
TEST(ElementwiseBlockModel, DropoutInABranchKeepsOnlyItsOneByteMask) {
  auto chain = chainOf({2, 5, 8}, json::array({dropoutBranch("branch")}), "seq");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  const LayerNumbers& m = chain->at(1);
  EXPECT_TRUE(m.needsInput);
  EXPECT_FALSE(m.needsOutput);
  EXPECT_EQ(m.extraBytes, 2u * 5 * 8);
  auto graph = buildBlockGraph(chain->spec.layers[0], {2, 5, 8}, DType::Float32);
  ASSERT_TRUE(graph.isOk()) << graph.status().message();
  const BlockOp& drop = graph->ops[1];
  EXPECT_EQ(drop.kind, BlockOpKind::Dropout);
  EXPECT_FALSE(drop.readsInput);
  EXPECT_FALSE(drop.readsOutput);
  EXPECT_EQ(drop.statsBytes, 2u * 5 * 8);
  EXPECT_DOUBLE_EQ(drop.layer.dropoutP, 0.3);
}

TEST(ElementwiseBlockModel, RefusesOpsThatNeedNchwOnAnMlpTensor) {
  json block = {{"name", "b"},
                {"kind", "block"},
                {"ops", {op("relu", "relu", {0}), op("bn", "batchnorm", {1}), op("add", "add", {2, 0})}}};
  auto chain = chainOf({4, 12}, json::array({block}), "bad");
  ASSERT_FALSE(chain.isOk());
  const std::string& message = chain.status().message();
  EXPECT_NE(message.find("inner op 1 ('bn', batchnorm): batchnorm needs an NCHW tensor"), std::string::npos) << message;
  json pool = {
      {"name", "p"}, {"kind", "block"}, {"ops", {op("pool", "global_avgpool", {0}), op("mul", "mul", {0, 1})}}};
  auto pooled = chainOf({2, 5, 8}, json::array({pool}), "bad");
  ASSERT_FALSE(pooled.isOk());
  EXPECT_NE(pooled.status().message().find("global_avgpool needs an NCHW tensor"), std::string::npos)
      << pooled.status().message();
  // A dropout probability outside [0, 1) is the chain-level dropout's refusal.
  json drop = dropoutBranch("d");
  drop["ops"][1]["p"] = 1.0;
  EXPECT_FALSE(chainOf({4, 12}, json::array({drop}), "bad").isOk());
}

TEST(ElementwiseBlockRun, MlpBlocksMeasureAsPredictedUnderEveryPlan) {
  testing::expectEveryPlanOnCpu(
      chainOf({4, 12},
              {linear("fc1", 16), gateBlock("gate"), linear("fc2", 16), dropoutBranch("branch"),
               dropoutBranch("branch2", "sigmoid"), linear("fc3", 5)},
              "mlp"),
      5);
}

TEST(ElementwiseBlockRun, SequenceBlocksMeasureAsPredictedUnderEveryPlan) {
  // [N, S, F]: no layer before the blocks takes a rank-3 input, so the chain starts with them.
  testing::expectEveryPlanOnCpu(chainOf({2, 6, 8},
                                        {dropoutBranch("branch", "gelu"),
                                         gateBlock("gate"),
                                         dropoutBranch("branch2", "tanh"),
                                         {{"name", "flat"}, {"kind", "flatten"}},
                                         linear("fc", 4)},
                                        "sequence"),
                                9);
}

// Dropout inside NCHW blocks: after a convolution, with the branch's activation reading its input.
TEST(ElementwiseBlockRun, DropoutInsideNchwBlocksMeasuresAsPredicted) {
  testing::expectEveryPlanOnCpu(chainOf({2, 3, 6, 6},
                                        {{{"name", "stem"}, {"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 3}},
                                         dropoutBranch("branch", "silu"),
                                         dropoutBranch("branch2", "relu"),
                                         {{"name", "pool"}, {"kind", "adaptive_avgpool"}},
                                         {{"name", "flat"}, {"kind", "flatten"}},
                                         linear("fc", 3)},
                                        "conv"),
                                13);
}

// A block after a flatten of a channels-last map keeps that order: the same chain with the block's
// one relu as a chain-level relu computes bitwise the same gradients.
TEST(ElementwiseBlockRun, ABlockAfterAFlattenReadsTheMapInItsLayout) {
  auto layers = [](const json& middle) {
    return json::array({{{"name", "stem"}, {"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 3}},
                        {{"name", "flat"}, {"kind", "flatten"}},
                        middle,
                        linear("fc", 3)});
  };
  auto runOf = [](const Result<Chain>& built) -> RunResult {
    EXPECT_TRUE(built.isOk()) << built.status().message();
    cpu::CpuDevice device({.poisonMemory = false});
    auto interp = Interpreter::create(testing::fittedTo(*built, device), device, testing::seeded(3));
    EXPECT_TRUE(interp.isOk()) << interp.status().message();
    auto run = (*interp)->run(Plan{}, RunOptions{.digestGradients = true, .captureDigests = true});
    EXPECT_TRUE(run.isOk()) << run.status().message();
    return *run;
  };
  const RunResult block =
      runOf(chainOf({2, 3, 5, 5}, layers({{"name", "b"}, {"kind", "block"}, {"ops", {op("relu", "relu", {0})}}}), "a"));
  const RunResult plain = runOf(chainOf({2, 3, 5, 5}, layers(op("b", "relu")), "b"));
  EXPECT_EQ(block.parameterGradientDigests, plain.parameterGradientDigests);
  EXPECT_EQ(testing::gradientDigests(block), testing::gradientDigests(plain));
}

}  // namespace
}  // namespace remat
