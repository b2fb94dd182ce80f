// The pointwise activations on the CPU backend: each one's forward and input gradient equal
// PyTorch's (reference values made by scripts/make-activation-reference.py with Debian's torch,
// tests/data/activations/torch_reference.json), as a chain layer and as a block's inner op; and a
// chain of them, run under every planner's plan, whose measured footprint equals the simulator's op
// by op and whose gradients equal store-all's.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cpu_harness.hpp"
#include "executor_helpers.hpp"
#include "precision_runs.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/operators.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

const json& reference() { return test::torchReference("activations"); }

std::vector<float> floats(const json& values) { return values.get<std::vector<float>>(); }

void checkAgainstTorch(const std::string& name, const json& layer) {
  const json& ref = reference();
  testing::LayerHarness h(ref["shape"].get<std::vector<std::int64_t>>(), layer);
  ASSERT_EQ(h.error(), "");
  const std::vector<float> y = h.forward(floats(ref["x"]), {}, /*keep=*/true);
  test::expectCloseToTorch(y, ref["ops"][name]["y"], name + " y");
  const auto g = h.backward(floats(ref["r"]));
  test::expectCloseToTorch(g.dx, ref["ops"][name]["dx"], name + " dx");
}

const char* const kActivations[] = {"relu", "relu6", "sigmoid", "tanh", "silu", "hardswish", "hardsigmoid", "gelu"};

TEST(ActivationsVsTorch, AsChainLayersForwardAndGradientMatchPyTorch) {
  ASSERT_TRUE(reference()["ops"].is_object());
  for (const char* name : kActivations) {
    SCOPED_TRACE(name);
    checkAgainstTorch(name, {{"name", "act"}, {"kind", name}});
  }
}

TEST(ActivationsVsTorch, AsBlockInnerOpsForwardAndGradientMatchPyTorch) {
  for (const char* name : kActivations) {
    SCOPED_TRACE(name);
    // The block holds the activation alone: it reads tensor 0 (the block's input) and writes the
    // block's output, through the blocks' own forward and backward paths.
    checkAgainstTorch(name, {{"name", "b"}, {"kind", "block"}, {"ops", {{{"name", "act"}, {"kind", name}}}}});
  }
}

TEST(ActivationsVsTorch, ModelKeepsWhatPyTorchsBackwardReads) {
  const json& ref = reference();
  for (const char* name : kActivations) {
    SCOPED_TRACE(name);
    testing::LayerHarness h(ref["shape"].get<std::vector<std::int64_t>>(), {{"name", "act"}, {"kind", name}});
    ASSERT_EQ(h.error(), "");
    const OperatorInfo* info = findOperator(name);
    ASSERT_NE(info, nullptr);
    const bool output = std::string(name) == "relu" || std::string(name) == "sigmoid" || std::string(name) == "tanh";
    EXPECT_EQ(h.numbers().needsOutput, output);
    EXPECT_EQ(h.numbers().needsInput, !output);
    EXPECT_EQ(h.numbers().extraBytes, 0u);
  }
}

// conv -> bn -> silu -> conv -> hardswish -> block(conv, sigmoid, conv, add, gelu) -> tanh ->
// hardsigmoid -> pool -> linear: every planner's plan measured op by op against the simulator.
TEST(ActivationsRun, MeasuredFootprintEqualsPredictionUnderEveryPlan) {
  const json conv = {{"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 3}, {"padding", 1}, {"bias", false}};
  auto named = [](json layer, const std::string& name) {
    layer["name"] = name;
    return layer;
  };
  json block = {{"name", "res"},
                {"kind", "block"},
                {"ops",
                 {named(conv, "c1"),
                  {{"name", "s"}, {"kind", "sigmoid"}},
                  named(conv, "c2"),
                  {{"name", "add"}, {"kind", "add"}, {"inputs", {0, 3}}},
                  {{"name", "g"}, {"kind", "gelu"}}}}};
  const json j = {{"format", "remat-chain/1"},
                  {"name", "activations"},
                  {"input", {{"shape", {2, 3, 8, 8}}, {"dtype", "float32"}}},
                  {"layers",
                   {named(conv, "conv1"),
                    {{"name", "bn1"}, {"kind", "batchnorm"}},
                    {{"name", "silu1"}, {"kind", "silu"}},
                    named(conv, "conv2"),
                    {{"name", "hs"}, {"kind", "hardswish"}},
                    block,
                    {{"name", "t"}, {"kind", "tanh"}},
                    {{"name", "hsig"}, {"kind", "hardsigmoid"}},
                    {{"name", "pool"}, {"kind", "adaptive_avgpool"}},
                    {{"name", "flat"}, {"kind", "flatten"}},
                    {{"name", "fc"}, {"kind", "linear"}, {"out_features", 5}}}}};
  testing::expectEveryPlanOnCpu(parseChain(j.dump(), "activations"), 7);
}

}  // namespace
}  // namespace remat
