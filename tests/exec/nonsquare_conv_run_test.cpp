// Non-square convolutions (Inception-v3's 1x7 and 7x1, issue 22): conv2d's per-axis kernel, stride
// and padding (kernel_width, stride_width, padding_width beside the square fields). The shape rule,
// bytes and flops of a 1x7 conv; the kernel larger than the padded input along one axis refused with
// the field that says so; the chain file's round trip (square convs keep their square fields only);
// the CPU backend's forward and gradients against PyTorch's (scripts/make-nonsquare-conv-reference.py,
// tests/data/nonsquare/torch_reference.json): one conv with every per-axis field different, and a
// block of Inception's factorised branches; and a chain of such convs and blocks run under every
// planner's plan with the measured footprint of the simulator op by op.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cpu_harness.hpp"
#include "executor_helpers.hpp"
#include "precision_runs.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/block.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

// A conv2d of kh x kw, padded (ph, pw), stride 1, no bias, reading inner tensor `input` (or, with
// input < 0, the layer before it).
json conv(const std::string& name, std::int64_t out, std::int64_t kh, std::int64_t kw, std::int64_t ph, std::int64_t pw,
          int input = -1) {
  json j = {{"name", name},  {"kind", "conv2d"}, {"out_channels", out}, {"kernel", kh},
            {"padding", ph}, {"bias", false},    {"kernel_width", kw},  {"padding_width", pw}};
  if (input >= 0) j["inputs"] = {input};
  return j;
}

// scripts/make-nonsquare-conv-reference.py's block: tensors 1 b1, 2-4 branch7x7, 5 pool, 6 its 1x1,
// 7-9 branch3x3 and its two halves, 10 their concat, 11 the block's output.
json factorisedBlock(const std::string& name = "mixed") {
  json ops = json::array({conv("b1", 2, 1, 1, 0, 0, 0), conv("b7_1", 3, 1, 1, 0, 0, 0), conv("b7_2", 3, 1, 7, 0, 3),
                          conv("b7_3", 2, 7, 1, 3, 0)});
  ops.push_back({{"name", "pool"}, {"kind", "avgpool"}, {"kernel", 3}, {"stride", 1}, {"padding", 1}, {"inputs", {0}}});
  ops.push_back(conv("bp", 2, 1, 1, 0, 0));
  ops.push_back(conv("b3_1", 3, 1, 1, 0, 0, 0));
  ops.push_back(conv("b3_2a", 2, 1, 3, 0, 1, 7));
  ops.push_back(conv("b3_2b", 2, 3, 1, 1, 0, 7));
  ops.push_back({{"name", "b3"}, {"kind", "concat"}, {"inputs", {8, 9}}});
  ops.push_back({{"name", "concat"}, {"kind", "concat"}, {"inputs", {1, 4, 6, 10}}});
  return {{"name", name}, {"kind", "block"}, {"ops", ops}};
}

json oddConv() {
  return {{"name", "conv"}, {"kind", "conv2d"},  {"out_channels", 4}, {"kernel", 2},        {"stride", 2},
          {"padding", 1},   {"kernel_width", 3}, {"stride_width", 1}, {"padding_width", 0}, {"bias", true}};
}

Result<Chain> chainOf(const Shape& input, const json& layers) {
  return parseChain(json({{"format", "remat-chain/1"},
                          {"name", "nonsquare"},
                          {"input", {{"shape", input}, {"dtype", "float32"}}},
                          {"layers", layers}})
                        .dump(),
                    "nonsquare");
}

TEST(NonSquareConvModel, A1x7ConvHasPyTorchsShapeBytesAndFlops) {
  auto chain = chainOf({2, 8, 17, 17}, json::array({conv("c", 16, 1, 7, 0, 3)}));
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  const ChainLayer& c = chain->layers[0];
  EXPECT_EQ(c.outputShape, (Shape{2, 16, 17, 17}));
  EXPECT_EQ(c.paramCount, 16u * 8 * 1 * 7);  // nn.Conv2d(8, 16, (1, 7), bias=False)
  EXPECT_EQ(c.numbers.outBytes, 2u * 16 * 17 * 17 * 4);
  EXPECT_TRUE(c.numbers.needsInput);
  EXPECT_FALSE(c.numbers.needsOutput);
  EXPECT_DOUBLE_EQ(c.numbers.fwdCost, 2.0 * (2 * 16 * 17 * 17) * 8 * 7 / 1e9);
  // The 7x1 transpose: the same numbers; stride and padding per axis.
  auto odd = chainOf({2, 3, 7, 8}, json::array({oddConv()}));
  ASSERT_TRUE(odd.isOk()) << odd.status().message();
  EXPECT_EQ(odd->layers[0].outputShape, (Shape{2, 4, 4, 6}));  // (7 + 2 - 2) / 2 + 1, (8 - 3) / 1 + 1
  EXPECT_EQ(odd->layers[0].paramCount, 4u * 3 * 2 * 3 + 4);
}

TEST(NonSquareConvModel, AKernelLargerThanOnePaddedAxisIsRefusedWithItsField) {
  auto wide = chainOf({1, 2, 9, 5}, json::array({conv("c", 2, 1, 7, 0, 0)}));
  ASSERT_FALSE(wide.isOk());
  EXPECT_NE(wide.status().message().find("layer 1 ('c', conv2d): "), std::string::npos) << wide.status().message();
  EXPECT_NE(wide.status().message().find("kernel_width 7 is larger than the padded input width 5 (5 + 2 * "
                                         "padding_width 0)"),
            std::string::npos)
      << wide.status().message();
  auto tall = chainOf({1, 2, 5, 9}, json::array({conv("c", 2, 7, 1, 0, 0)}));
  ASSERT_FALSE(tall.isOk());
  EXPECT_NE(tall.status().message().find("kernel 7 is larger than the padded input height 5"), std::string::npos)
      << tall.status().message();
  auto zero = chainOf({1, 2, 5, 5}, json::array({conv("c", 2, 1, 0, 0, 0)}));
  ASSERT_FALSE(zero.isOk());
  EXPECT_NE(zero.status().message().find("kernel_width"), std::string::npos) << zero.status().message();
}

TEST(NonSquareConvFile, TheWidthFieldsRoundTripAndSquareConvsKeepTheirFields) {
  auto chain = chainOf({2, 4, 9, 9}, json::array({conv("sq", 4, 3, 3, 1, 1), factorisedBlock()}));
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  const json written = chainSpecToJson(chain->spec);
  const json& square = written["layers"][0];
  EXPECT_EQ(square.count("kernel_width"), 1u);  // given in the file: kept as given
  const json& b7_2 = written["layers"][1]["ops"][2];
  EXPECT_EQ(b7_2["kernel"], 1);
  EXPECT_EQ(b7_2["kernel_width"], 7);
  EXPECT_EQ(b7_2["padding"], 0);
  EXPECT_EQ(b7_2["padding_width"], 3);
  EXPECT_EQ(b7_2.count("stride_width"), 0u);  // not given: the height's
  auto again = parseChain(chainSpecToText(chain->spec), "again");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(chainSpecToText(again->spec), chainSpecToText(chain->spec));
  EXPECT_EQ(again->layers[1].numbers, chain->layers[1].numbers);
  // A chain file without the width fields (every file before them) reads as square.
  LayerSpec plain;
  plain.kernel = 3;
  plain.padding = 1;
  EXPECT_TRUE(plain.squareConv());
  EXPECT_EQ(plain.kernelW(), 3);
  EXPECT_EQ(plain.paddingW(), 1);
}

TEST(NonSquareConvVsTorch, OneConvWithEveryAxisDifferentMatchesPyTorch) {
  const json& ref = test::torchReference("nonsquare")["conv"];
  testing::LayerHarness h(ref["shape"].get<Shape>(), oddConv());
  ASSERT_EQ(h.error(), "");
  ASSERT_EQ(h.paramCount(), ref["params"].size());
  const auto y = h.forward(ref["x"].get<std::vector<float>>(), ref["params"].get<std::vector<float>>(), true);
  test::expectCloseToTorch(y, ref["y"], "y");
  const auto g = h.backward(ref["r"].get<std::vector<float>>());
  test::expectCloseToTorch(g.dx, ref["dx"], "dx");
  test::expectCloseToTorch(g.dparams, ref["dparams"], "dparams");
}

TEST(NonSquareConvVsTorch, InceptionsFactorisedBranchesMatchPyTorch) {
  const json& ref = test::torchReference("nonsquare")["block"];
  testing::LayerHarness h(ref["shape"].get<Shape>(), factorisedBlock());
  ASSERT_EQ(h.error(), "");
  ASSERT_EQ(h.paramCount(), ref["params"].size());
  const auto y = h.forward(ref["x"].get<std::vector<float>>(), ref["params"].get<std::vector<float>>(), true);
  test::expectCloseToTorch(y, ref["y"], "y");
  const auto g = h.backward(ref["r"].get<std::vector<float>>());
  test::expectCloseToTorch(g.dx, ref["dx"], "dx");
  test::expectCloseToTorch(g.dparams, ref["dparams"], "dparams");
}

// A chain of 1x7 / 7x1 convs (chain layers, with batch norms and ReLUs between) and two factorised
// blocks: every planner's plan measures the simulator's footprint op by op, with store-all's gradients.
TEST(NonSquareConvRun, EveryPlanMatchesStoreAllAndTheSimulator) {
  const json layers = json::array({conv("c17", 4, 1, 7, 0, 3),
                                   {{"name", "bn1"}, {"kind", "batchnorm"}},
                                   {{"name", "r1"}, {"kind", "relu"}},
                                   conv("c71", 4, 7, 1, 3, 0),
                                   factorisedBlock(),
                                   oddConv(),
                                   {{"name", "r2"}, {"kind", "relu"}},
                                   factorisedBlock("mixed2")});
  testing::expectEveryPlanOnCpu(chainOf({2, 3, 11, 11}, layers), 7);
}

}  // namespace
}  // namespace remat
