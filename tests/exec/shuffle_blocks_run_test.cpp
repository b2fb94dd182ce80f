// ShuffleNetV2 blocks on the CPU backend: the channel split (two slices), the branches, the channel
// concatenation and the channel shuffle as a block's inner ops. The forward, the input gradient and
// the parameter gradients equal PyTorch's for torchvision's InvertedResidual in both forms
// (reference values made by scripts/make-shuffle-reference.py with Debian's torch,
// tests/data/shuffle/torch_reference.json); the slices are views that keep the block input, the
// shuffle keeps nothing for its backward; a ShuffleNet-like chain run under every planner's plan has the measured
// footprint of the simulator op by op and store-all's gradients; bad fields are refused at the inner op.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cpu_harness.hpp"
#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/block.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

const json& reference() { return test::torchReference("shuffle"); }

json conv(const std::string& name, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t groups,
          std::size_t input) {
  return {{"name", name},          {"kind", "conv2d"}, {"out_channels", out}, {"kernel", kernel}, {"stride", stride},
          {"padding", kernel / 2}, {"groups", groups}, {"bias", false},       {"inputs", {input}}};
}
json op(const std::string& name, const std::string& kind) { return {{"name", name}, {"kind", kind}}; }

// torchvision's InvertedResidual(in, out, stride), channel shuffle included.
json shuffleBlock(std::int64_t in, std::int64_t out, std::int64_t stride) {
  const std::int64_t half = out / 2;
  json ops = json::array();
  std::size_t right = 0;
  if (stride > 1) {
    ops.push_back(conv("branch1.0", in, 3, stride, in, 0));
    ops.push_back(op("branch1.1", "batchnorm"));
    ops.push_back(conv("branch1.2", half, 1, 1, 1, 2));
    ops.push_back(op("branch1.3", "batchnorm"));
    ops.push_back(op("branch1.4", "relu"));
  } else {
    ops.push_back({{"name", "slice"}, {"kind", "slice"}, {"begin", 0}, {"out_channels", in / 2}, {"inputs", {0}}});
    ops.push_back(
        {{"name", "slice_1"}, {"kind", "slice"}, {"begin", in / 2}, {"out_channels", in / 2}, {"inputs", {0}}});
    right = 2;
  }
  ops.push_back(conv("branch2.0", half, 1, 1, 1, right));
  ops.push_back(op("branch2.1", "batchnorm"));
  ops.push_back(op("branch2.2", "relu"));
  ops.push_back(conv("branch2.3", half, 3, stride, half, ops.size()));
  ops.push_back(op("branch2.4", "batchnorm"));
  ops.push_back(conv("branch2.5", half, 1, 1, 1, ops.size()));
  ops.push_back(op("branch2.6", "batchnorm"));
  ops.push_back(op("branch2.7", "relu"));
  ops.push_back({{"name", "concat"}, {"kind", "concat"}, {"inputs", {stride > 1 ? 5 : 1, ops.size()}}});
  ops.push_back({{"name", "channel_shuffle"}, {"kind", "channel_shuffle"}, {"groups", 2}});
  return {{"name", "block"}, {"kind", "block"}, {"ops", ops}};
}

void checkAgainstTorch(const std::string& variant) {
  const json& ref = reference();
  const json& want = ref["variants"][variant];
  const Shape shape = ref["shape"].get<Shape>();
  testing::LayerHarness h(shape, shuffleBlock(shape[1], want["out_channels"], want["stride"]));
  ASSERT_EQ(h.error(), "");
  ASSERT_EQ(h.paramCount(), want["params"].size());
  const std::vector<float> y =
      h.forward(ref["x"].get<std::vector<float>>(), want["params"].get<std::vector<float>>(), /*keep=*/true);
  test::expectCloseToTorch(y, want["y"], variant + " y");
  const auto g = h.backward(want["r"].get<std::vector<float>>());
  test::expectCloseToTorch(g.dx, want["dx"], variant + " dx");
  test::expectCloseToTorch(g.dparams, want["dparams"], variant + " dparams");
}

TEST(ShuffleBlocksVsTorch, TheSplitBlocksForwardAndGradientsMatchPyTorch) { checkAgainstTorch("split"); }

TEST(ShuffleBlocksVsTorch, TheStridedBlocksForwardAndGradientsMatchPyTorch) { checkAgainstTorch("strided"); }

Result<Chain> parseBlock(const json& block, const Shape& input) {
  return parseChain(json({{"format", "remat-chain/1"},
                          {"name", "shuffle"},
                          {"input", {{"shape", input}, {"dtype", "float32"}}},
                          {"layers", {block}}})
                        .dump(),
                    "shuffle");
}

// The slices are views of the block input (PyTorch's chunk) and the shuffle a copy; neither's
// backward reads anything. branch2.0 saves its input, the second half, which keeps the whole block
// input alive (in = yes) rather than a copy of the half in E; the concat reads the first half in
// place, and branch2.0 reads a contiguous copy of the second made during its forward and again
// during its backward (PyTorch's convolution calls .contiguous()).
TEST(ShuffleBlocksModel, TheSlicesAreViewsThatKeepTheBlockInput) {
  const Shape input = {2, 8, 6, 6};
  auto chain = parseBlock(shuffleBlock(8, 8, 1), input);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  auto graph = buildBlockGraph(chain->spec.layers[0], input, DType::Float32);
  ASSERT_TRUE(graph.isOk()) << graph.status().message();
  for (const BlockOp& o : graph->ops)
    if (o.kind == BlockOpKind::Slice || o.kind == BlockOpKind::ChannelShuffle) {
      EXPECT_FALSE(o.readsInput) << o.layer.name;
      EXPECT_FALSE(o.readsOutput) << o.layer.name;
      if (o.kind == BlockOpKind::Slice) {
        EXPECT_EQ(o.fwdCost, 0.0) << o.layer.name;  // a view copies nothing
      }
    }
  for (std::size_t t : {1u, 2u}) {
    const BlockTensor& half = graph->tensors[t];
    EXPECT_EQ(half.shape, (Shape{2, 4, 6, 6}));
    EXPECT_TRUE(half.isView());
    EXPECT_EQ(half.viewOf, 0u);
    EXPECT_EQ(half.viewChannelBegin, t == 1 ? 0 : 4);
    EXPECT_FALSE(half.saved);
    EXPECT_EQ(half.arenaOffset, kBlockNoOffset);
  }
  const BlockOp& branchConv = graph->ops[2];
  ASSERT_EQ(branchConv.layer.name, "block.branch2.0");
  EXPECT_NE(branchConv.gatherOffset[0], kBlockNoOffset);
  EXPECT_NE(branchConv.gatherGradOffset[0], kBlockNoOffset);
  const BlockOp& concat = graph->ops[graph->ops.size() - 2];
  ASSERT_EQ(concat.kind, BlockOpKind::Concat);
  EXPECT_EQ(concat.gatherOffset, (std::vector<std::uint64_t>{kBlockNoOffset, kBlockNoOffset}));
  EXPECT_TRUE(graph->needsInput);
  EXPECT_FALSE(graph->needsOutput);
  EXPECT_EQ(graph->outBytes, elementCount(input) * 4);
}

TEST(ShuffleBlocksModel, RefusesASlicePastTheChannelsAndGroupsThatDoNotDivide) {
  json block = shuffleBlock(8, 8, 1);
  block["ops"][1]["begin"] = 6;  // channels [6, 10) of 8
  auto spec = parseBlock(block, {2, 8, 6, 6});
  ASSERT_FALSE(spec.isOk());
  EXPECT_NE(spec.status().message().find("inner op 1 ('slice_1', slice)"), std::string::npos)
      << spec.status().message();
  EXPECT_NE(spec.status().message().find("past its 8 channels"), std::string::npos) << spec.status().message();
  block = shuffleBlock(8, 8, 1);
  block["ops"].back()["groups"] = 3;
  spec = parseBlock(block, {2, 8, 6, 6});
  ASSERT_FALSE(spec.isOk());
  EXPECT_NE(spec.status().message().find("groups must divide the channels"), std::string::npos)
      << spec.status().message();
  block["ops"].back().erase("groups");
  spec = parseBlock(block, {2, 8, 6, 6});
  ASSERT_FALSE(spec.isOk());
  EXPECT_NE(spec.status().message().find("groups"), std::string::npos) << spec.status().message();
}

// A small ShuffleNet: stem, a strided block, two split blocks (the shuffle on its own after one, as
// the importer cuts torch's export), head.
TEST(ShuffleBlocksRun, MeasuredFootprintEqualsPredictionUnderEveryPlan) {
  json split = shuffleBlock(16, 16, 1);
  json alone = split;
  alone["ops"].erase(alone["ops"].size() - 1);
  alone["name"] = "split_without_shuffle";
  const json j = {{"format", "remat-chain/1"},
                  {"name", "shuffle-chain"},
                  {"input", {{"shape", {2, 3, 16, 16}}, {"dtype", "float32"}}},
                  {"layers",
                   {{{"name", "stem"}, {"kind", "conv2d"}, {"out_channels", 8}, {"kernel", 3}, {"padding", 1}},
                    {{"name", "bn"}, {"kind", "batchnorm"}},
                    {{"name", "act"}, {"kind", "relu"}},
                    {{"name", "pool"}, {"kind", "maxpool"}, {"kernel", 3}, {"stride", 2}, {"padding", 1}},
                    shuffleBlock(8, 16, 2),
                    split,
                    alone,
                    {{"name", "shuffle"},
                     {"kind", "block"},
                     {"ops", {{{"name", "channel_shuffle"}, {"kind", "channel_shuffle"}, {"groups", 2}}}}},
                    {{"name", "gap"}, {"kind", "adaptive_avgpool"}},
                    {{"name", "flat"}, {"kind", "flatten"}},
                    {{"name", "fc"}, {"kind", "linear"}, {"out_features", 5}}}}};
  auto built = parseChain(j.dump(), "shuffle-chain");
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device({.poisonMemory = true});
  const Chain chain = testing::fittedTo(*built, device);
  testing::expectEveryPlanReproducesStoreAll(chain, device, 11);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Views beyond ShuffleNet's: views of an inner tensor (a relu's output, kept whole in E because a
// reader's backward reads a view of it), a view of a view, a view read by a relu6 and a mul (both
// gather contiguous copies, forward and backward) and by a concat (in place). The measured
// footprint equals the prediction op by op and the gradients equal store-all's under every plan.
TEST(ShuffleBlocksRun, ViewsOfInnerTensorsRunUnderEveryPlan) {
  auto sliceOp = [](const std::string& name, std::int64_t begin, std::int64_t count, std::size_t input) {
    return json{{"name", name}, {"kind", "slice"}, {"begin", begin}, {"out_channels", count}, {"inputs", {input}}};
  };
  json ops = json::array();
  ops.push_back(conv("expand", 8, 1, 1, 1, 0));                                 // tensor 1
  ops.push_back({{"name", "act"}, {"kind", "relu"}, {"inputs", {1}}});          // 2
  ops.push_back(sliceOp("left", 0, 4, 2));                                      // 3: view of 2
  ops.push_back(sliceOp("right", 4, 4, 2));                                     // 4: view of 2
  ops.push_back(sliceOp("quarter", 2, 2, 4));                                   // 5: view of 2, channels 6, 7
  ops.push_back({{"name", "clip"}, {"kind", "relu6"}, {"inputs", {5}}});        // 6
  ops.push_back({{"name", "gate"}, {"kind", "mul"}, {"inputs", {4, 3}}});       // 7
  ops.push_back({{"name", "cat"}, {"kind", "concat"}, {"inputs", {3, 7, 6}}});  // 8: 10 channels
  const json block = {{"name", "views"}, {"kind", "block"}, {"ops", ops}};
  const Shape input = {2, 8, 6, 6};
  auto parsed = parseBlock(block, input);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  auto graph = buildBlockGraph(parsed->spec.layers[0], input, DType::Float32);
  ASSERT_TRUE(graph.isOk()) << graph.status().message();
  EXPECT_EQ(graph->tensors[5].viewOf, 2u);
  EXPECT_EQ(graph->tensors[5].viewChannelBegin, 6);
  EXPECT_TRUE(graph->tensors[2].saved);  // relu's output, read by its own backward and through the views
  EXPECT_NE(graph->ops[5].gatherOffset[0], kBlockNoOffset);      // relu6 reads a view
  EXPECT_NE(graph->ops[5].gatherGradOffset[0], kBlockNoOffset);  // and its backward reads its input
  EXPECT_NE(graph->ops[6].gatherGradOffset[1], kBlockNoOffset);  // mul's both operands are views

  const json j = {{"format", "remat-chain/1"},
                  {"name", "views-chain"},
                  {"input", {{"shape", {2, 3, 6, 6}}, {"dtype", "float32"}}},
                  {"layers",
                   {{{"name", "stem"}, {"kind", "conv2d"}, {"out_channels", 8}, {"kernel", 3}, {"padding", 1}},
                    block,
                    {{"name", "gap"}, {"kind", "adaptive_avgpool"}},
                    {{"name", "flat"}, {"kind", "flatten"}},
                    {{"name", "fc"}, {"kind", "linear"}, {"out_features", 5}}}}};
  auto built = parseChain(j.dump(), "views-chain");
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device({.poisonMemory = true});
  const Chain chain = testing::fittedTo(*built, device);
  testing::expectEveryPlanReproducesStoreAll(chain, device, 13);
}

}  // namespace
}  // namespace remat
