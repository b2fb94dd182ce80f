// Pools inside a block on the CPU backend (GoogLeNet's and Inception's pool branches): a block of
// three branches of one input (a 1x1 conv; a ceil-mode max pool then a 1x1 conv; a padded average
// pool then a 1x1 conv) concatenated. The forward, the input gradient (the three branches' added:
// the pools' backwards add into what the others wrote) and the parameter gradients equal PyTorch's
// (scripts/make-pool-block-reference.py, tests/data/poolblock/torch_reference.json); the max pool
// keeps its indices in E and the block its input; the block runs under every planner's plan with
// the measured footprint of the simulator op by op and store-all's gradients.
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

json conv(const std::string& name, std::int64_t out, std::size_t input) {
  return {{"name", name}, {"kind", "conv2d"}, {"out_channels", out},
          {"kernel", 1},  {"bias", false},    {"inputs", {input}}};
}

json pool(const std::string& name, const std::string& kind, bool ceil) {
  return {{"name", name}, {"kind", kind},      {"kernel", 3},  {"stride", 1},
          {"padding", 1}, {"ceil_mode", ceil}, {"inputs", {0}}};
}

json poolBranches() {
  json ops = json::array({conv("b1", 3, 0), pool("b2pool", "maxpool", true), conv("b2", 2, 2),
                          pool("b3pool", "avgpool", false), conv("b3", 2, 4)});
  ops.push_back({{"name", "concat"}, {"kind", "concat"}, {"inputs", {1, 3, 5}}});
  return {{"name", "inception"}, {"kind", "block"}, {"ops", ops}};
}

TEST(PoolBlocksVsTorch, TheForwardAndGradientsMatchPyTorch) {
  const json& ref = test::torchReference("poolblock");
  const Shape shape = ref["shape"].get<Shape>();
  testing::LayerHarness h(shape, poolBranches());
  ASSERT_EQ(h.error(), "");
  ASSERT_EQ(h.paramCount(), ref["params"].size());
  const std::vector<float> y =
      h.forward(ref["x"].get<std::vector<float>>(), ref["params"].get<std::vector<float>>(), /*keep=*/true);
  test::expectCloseToTorch(y, ref["y"], "y");
  const auto g = h.backward(ref["r"].get<std::vector<float>>());
  test::expectCloseToTorch(g.dx, ref["dx"], "dx");
  test::expectCloseToTorch(g.dparams, ref["dparams"], "dparams");
}

Result<Chain> chainOf(const Shape& input) {
  json stem = {{"name", "stem"}, {"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 3}, {"padding", 1}};
  json head = {{"name", "head"}, {"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 1}};
  return parseChain(json({{"format", "remat-chain/1"},
                          {"name", "pools"},
                          {"input", {{"shape", input}, {"dtype", "float32"}}},
                          {"layers", {stem, poolBranches(), head, poolBranches()}}})
                        .dump(),
                    "pools");
}

// max_pool2d_with_indices keeps its input and int64 indices; avg_pool2d its input: here both read
// the block's input (in = yes); the max pool's indices are E (8 bytes per output element).
TEST(PoolBlocksModel, TheMaxPoolKeepsItsIndicesAndBothPoolsTheirInput) {
  const Shape input = {2, 4, 7, 7};
  auto graph = buildBlockGraph(chainOf(input)->spec.layers[1], input, DType::Float32);
  ASSERT_TRUE(graph.isOk()) << graph.status().message();
  const BlockOp& maxPool = graph->ops[1];
  const BlockOp& avgPool = graph->ops[3];
  EXPECT_TRUE(maxPool.readsInput && avgPool.readsInput);
  EXPECT_EQ(maxPool.statsBytes, 2u * 4 * 7 * 7 * kMaxPoolIndexBytes);
  EXPECT_EQ(avgPool.statsBytes, 0u);
  EXPECT_TRUE(graph->needsInput);
  // E: the two pool outputs the 1x1 convs read (1,568 bytes each, the first slot rounded up to 256),
  // then the indices.
  const std::uint64_t pooled = 2u * 4 * 7 * 7 * 4;
  EXPECT_TRUE(graph->tensors[maxPool.output].saved && graph->tensors[avgPool.output].saved);
  EXPECT_EQ(graph->extraBytes, 1792 + pooled + maxPool.statsBytes);
}

TEST(PoolBlocksRun, EveryPlanMatchesStoreAllAndTheSimulator) {
  auto built = chainOf({2, 3, 7, 7});
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device({.poisonMemory = true});
  const Chain chain = testing::fittedTo(*built, device);
  auto interp = Interpreter::create(chain, device, testing::seeded(5));
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  RunOptions options{.digestGradients = true, .captureDigests = true};
  auto reference = (*interp)->run(Plan{}, options);
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  testing::expectMatchesSimulation(chain, Plan{}, reference->timelines[0]);
  const auto plans = testing::plannerPlans(chain, testing::allPlanners());
  for (std::size_t i = 1; i < plans.size(); ++i) {
    SCOPED_TRACE(plans[i].first);
    auto run = (*interp)->run(plans[i].second, options);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectReproducesStoreAll(chain, plans[i].second, *run, *reference);
  }
}

}  // namespace
}  // namespace remat
