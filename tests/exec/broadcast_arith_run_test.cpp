// Blocks with the broadcasting Add, Sub and Div inner ops (issue 22). The model keeps what
// PyTorch's autograd keeps (derivatives.yaml: add.Tensor and sub.Tensor save nothing; div.Tensor
// saves `other` for self's gradient and `self` and `other` for other's, so a block keeps both
// operands); the forward and the input gradient equal PyTorch's within 1e-4 of the reference's scale
// for a [N, C, 1, 1] mean broadcast on either side of each op (tests/data/broadcast_arith, made by
// scripts/make-broadcast-arith-reference.py with Debian's torch); chains of such blocks on NCHW and
// [N, F] tensors run on the CPU under every planner's plan with the measured footprint of every op
// equal to the prediction and store-all's gradients; shapes that do not broadcast are refused at the
// inner op. bf16-mixed and pure bf16 run them too: tests/exec/arith_half_run_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cpu_harness.hpp"
#include "executor_helpers.hpp"
#include "precision_runs.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/block.hpp"
#include "remat/model/precision.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

json op(const std::string& name, const std::string& kind, std::vector<std::size_t> inputs = {}) {
  json o = {{"name", name}, {"kind", kind}};
  if (!inputs.empty()) o["inputs"] = inputs;
  return o;
}

json block(const std::string& name, json ops) { return {{"name", name}, {"kind", "block"}, {"ops", std::move(ops)}}; }

// The reference script's variants, op for op (tensor 1 is the pooled mean m).
json addBlock() {
  return block("add", {op("mean", "global_avgpool", {0}), op("a", "add", {0, 1}), op("y", "add", {1, 2})});
}
json subBlock() {
  return block("sub", {op("mean", "global_avgpool", {0}), op("d", "sub", {0, 1}), op("y", "sub", {1, 2})});
}
json divBlock() {
  return block("div", {op("mean", "global_avgpool", {0}), op("s", "sigmoid", {1}), op("q", "div", {0, 2}),
                       op("t", "tanh", {3}), op("g", "sigmoid", {4}), op("y", "div", {2, 5})});
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

// The inner graph of block `b` on `input` (parsed as a one-layer chain: parse errors are the chain
// file's, which name the layer and the inner op).
Result<BlockGraph> graphOf(const json& b, const Shape& input) {
  auto chain = chainOf(input, json::array({b}), "graph");
  if (!chain) return chain.status();
  return buildBlockGraph(chain->spec.layers[0], input, DType::Float32);
}

// On [4, 16]: x - Sigmoid(x) keeps only sigmoid's output (its own backward reads it; sub reads
// nothing), so in = no; x / Sigmoid(x) keeps the same tensor and x(l-1) too (div reads both).
TEST(ArithBlockModel, SubKeepsNothingAndDivKeepsBothOperands) {
  for (const char* kind : {"sub", "div"}) {
    SCOPED_TRACE(kind);
    const json b = block("b", {op("s", "sigmoid", {0}), op("y", kind, {0, 1})});
    auto chain = chainOf({4, 12}, {linear("fc1", 16), b, linear("fc2", 3)}, "arith");
    ASSERT_TRUE(chain.isOk()) << chain.status().message();
    const LayerNumbers& m = chain->at(2);
    const bool div = std::string(kind) == "div";
    EXPECT_EQ(m.needsInput, div);
    EXPECT_FALSE(m.needsOutput);
    EXPECT_EQ(m.extraBytes, 4u * 16 * 4);  // sigmoid's output, the only saved inner tensor
    EXPECT_EQ(m.outBytes, 4u * 16 * 4);
    auto graph = buildBlockGraph(chain->spec.layers[1], {4, 16}, DType::Float32);
    ASSERT_TRUE(graph.isOk()) << graph.status().message();
    EXPECT_EQ(graph->ops[1].readsInput, div);
    EXPECT_EQ(graph->ops[1].readsSecondInput, div);
  }
}

// A broadcasting add reads nothing: the mean and x + mean need no saving, only shapes; the output
// is the broadcast shape, and the mean [2, 8, 1, 1] is the only smaller tensor.
TEST(ArithBlockModel, ABroadcastingAddReadsNothingAndGivesTheBroadcastShape) {
  auto graph = graphOf(addBlock(), {2, 8, 5, 5});
  ASSERT_TRUE(graph.isOk()) << graph.status().message();
  EXPECT_EQ(graph->tensors[1].shape, (Shape{2, 8, 1, 1}));
  EXPECT_EQ(graph->tensors[2].shape, (Shape{2, 8, 5, 5}));
  EXPECT_EQ(graph->tensors.back().shape, (Shape{2, 8, 5, 5}));
  EXPECT_FALSE(graph->needsInput);
  EXPECT_FALSE(graph->needsOutput);
  EXPECT_EQ(graph->extraBytes, 0u);
  for (const BlockOp& o : graph->ops) EXPECT_FALSE(o.readsInput || o.readsSecondInput) << o.layer.name;
}

// divBlock's tensors: x, m, s = sigmoid(m), q = x / s, t = tanh(q), g = sigmoid(t), y = s / g.
// Kept: x (q's dividend: in = yes), s (both divs read it; sigmoid reads its output too), t (tanh
// reads its output) and g (y's divisor, sigmoid's output); not m (sigmoid does not read its
// input) nor q (tanh reads its output, not its input).
TEST(ArithBlockModel, DivKeepsBothOperandsOfEachQuotient) {
  auto div = graphOf(divBlock(), {2, 8, 5, 5});
  ASSERT_TRUE(div.isOk()) << div.status().message();
  EXPECT_TRUE(div->needsInput);
  EXPECT_FALSE(div->needsOutput);
  const std::vector<bool> saved = {false, true, false, true, true};  // tensors 1 to 5
  for (std::size_t t = 1; t <= 5; ++t) EXPECT_EQ(div->tensors[t].saved, saved[t - 1]) << div->tensors[t].name;
  // E: s and g are [2, 8, 1, 1] and [2, 8, 5, 5]; t [2, 8, 5, 5]: three slots, 256-byte aligned.
  EXPECT_GE(div->extraBytes, 2u * 8 * 4 + 2 * (2u * 8 * 25 * 4));
}

void expectRefused(const json& b, const Shape& input, const std::vector<std::string>& parts) {
  auto graph = graphOf(b, input);
  ASSERT_FALSE(graph.isOk());
  for (const std::string& part : parts)
    EXPECT_NE(graph.status().message().find(part), std::string::npos) << part << " in: " << graph.status().message();
}

TEST(ArithBlockModel, ShapesThatDoNotBroadcastAreRefusedAtTheInnerOp) {
  const json conv = {{"name", "fc"}, {"kind", "conv2d"}, {"out_channels", 3}, {"kernel", 1}, {"inputs", {1}}};
  expectRefused(block("b", {op("mean", "global_avgpool", {0}), conv, op("d", "sub", {0, 2})}), {2, 8, 5, 5},
                {"inner op 2 ('d', sub)", "subtracts [2, 3, 1, 1] from [2, 8, 5, 5]", "axis 1 differs"});
  expectRefused(block("b", {op("mean", "global_avgpool", {0}), conv, op("q", "div", {2, 0})}), {2, 8, 5, 5},
                {"inner op 2 ('q', div)", "divides [2, 3, 1, 1] and [2, 8, 5, 5]"});
  expectRefused(block("b", {op("mean", "global_avgpool", {0}), conv, op("a", "add", {0, 2})}), {2, 8, 5, 5},
                {"inner op 2 ('a', add)", "adds [2, 8, 5, 5] and [2, 3, 1, 1]"});
  expectRefused(block("b", {op("d", "div", {0})}), {2, 8}, {"div takes two inputs, it has 1"});
}

void checkAgainstTorch(const std::string& variant, const json& layer) {
  const json& ref = test::torchReference("broadcast_arith");
  const json& want = ref["variants"][variant];
  testing::LayerHarness h(ref["shape"].get<std::vector<std::int64_t>>(), layer);
  ASSERT_EQ(h.error(), "");
  ASSERT_EQ(h.paramCount(), 0u);
  const std::vector<float> y = h.forward(ref["x"].get<std::vector<float>>(), {}, /*keep=*/true);
  test::expectCloseToTorch(y, want["y"], variant + " y");
  const auto g = h.backward(ref["r"].get<std::vector<float>>());
  test::expectCloseToTorch(g.dx, want["dx"], variant + " dx");
}

TEST(ArithBlocksVsTorch, BroadcastingAddMatchesPyTorch) { checkAgainstTorch("add", addBlock()); }
TEST(ArithBlocksVsTorch, BroadcastingSubMatchesPyTorch) { checkAgainstTorch("sub", subBlock()); }
TEST(ArithBlocksVsTorch, BroadcastingDivMatchesPyTorch) { checkAgainstTorch("div", divBlock()); }

// The reference's blocks after a convolution (so x(l-1) and the gradients cross layers), and a
// block dividing a tensor by itself (one tensor both operands: its gradient written, then added).
TEST(ArithBlockRun, NchwBlocksMeasureAsPredictedUnderEveryPlan) {
  const json self = block("self", {op("s", "sigmoid", {0}), op("q", "div", {1, 1}), op("y", "sub", {2, 0})});
  testing::expectEveryPlanOnCpu(chainOf({2, 3, 6, 6},
                                        {{{"name", "stem"}, {"kind", "conv2d"}, {"out_channels", 8}, {"kernel", 3}},
                                         subBlock(),
                                         divBlock(),
                                         addBlock(),
                                         self,
                                         {{"name", "pool"}, {"kind", "adaptive_avgpool"}},
                                         {{"name", "flat"}, {"kind", "flatten"}},
                                         linear("fc", 3)},
                                        "nchw"),
                                17);
}

// [N, F] and [N, S, F]: every tensor of the input's shape (nothing there broadcasts), sub and div
// with dropout and the activations around them.
TEST(ArithBlockRun, MlpAndSequenceBlocksMeasureAsPredictedUnderEveryPlan) {
  json drop = op("drop", "dropout", {2});
  drop["p"] = 0.2;
  const json branch = block("branch", {op("s", "sigmoid", {0}), op("q", "div", {0, 1}), drop, op("y", "sub", {3, 1})});
  const json gate = block("gate", {op("t", "tanh", {0}), op("d", "sub", {0, 1}), op("y", "div", {2, 1})});
  testing::expectEveryPlanOnCpu(
      chainOf({4, 12}, {linear("fc1", 16), branch, linear("fc2", 16), gate, linear("fc3", 5)}, "mlp"), 19);
  testing::expectEveryPlanOnCpu(
      chainOf({2, 6, 8}, {branch, gate, {{"name", "flat"}, {"kind", "flatten"}}, linear("fc", 4)}, "sequence"), 23);
}

}  // namespace
}  // namespace remat
