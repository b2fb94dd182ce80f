// ConvNeXt (issue 22) on the CPU backend: the channel layer norm, the 1x1 convolutions that stand
// for its pointwise Linears and the parameter-scaled product (layer_scale) as a block's inner ops,
// and LayerNorm2d as a top-level layernorm over the channels. The numbers keep what PyTorch 1.13
// saves (scripts/torch-convnext-saved.py, docs/memory-model.md section 6); the zoo's convnext_tiny
// has torchvision's parameter count; a small ConvNeXt runs under every planner's plan with the
// measured footprint of the simulator op by op and store-all's gradients; zoo convnext_tiny at
// batch 2 runs optimal's plan as predicted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cpu_harness.hpp"
#include "executor_helpers.hpp"
#include "precision_runs.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/block.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/planners.hpp"
#include "small_chains.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

using testing::convnext::cnBlock;
using testing::convnext::layerNorm;
using testing::convnext::patchify;

// Stem, two blocks, downsampling, one block, head: every ConvNeXt piece at a test's size.
Result<Chain> smallConvNext() {
  const json j = {{"format", "remat-chain/1"},
                  {"name", "convnext-small"},
                  {"input", {{"shape", {2, 3, 32, 32}}, {"dtype", "float32"}}},
                  {"layers",
                   {patchify("stem", 8, 4),
                    layerNorm("stem.norm"),
                    cnBlock("stage1.0", 8),
                    cnBlock("stage1.1", 8),
                    layerNorm("down.0"),
                    patchify("down.1", 16, 2),
                    cnBlock("stage2.0", 16),
                    {{"name", "avgpool"}, {"kind", "adaptive_avgpool"}},
                    layerNorm("classifier.0"),
                    {{"name", "classifier.1"}, {"kind", "flatten"}},
                    {{"name", "classifier.2"}, {"kind", "linear"}, {"out_features", 5}}}}};
  return parseChain(j.dump(), "convnext-small");
}

// One piece driven through the CPU device against PyTorch's values (scripts/make-convnext-reference.py).
void checkAgainstTorch(const std::string& variant, const json& layer) {
  const json& ref = test::torchReference("convnext");
  const json& want = ref["variants"][variant];
  const Shape shape = ref["shape"].get<Shape>();
  testing::LayerHarness h(shape, layer);
  ASSERT_EQ(h.error(), "");
  ASSERT_EQ(h.paramCount(), want["params"].size());
  const std::vector<float> y =
      h.forward(ref["x"].get<std::vector<float>>(), want["params"].get<std::vector<float>>(), /*keep=*/true);
  test::expectCloseToTorch(y, want["y"], variant + " y");
  const auto g = h.backward(want["r"].get<std::vector<float>>());
  test::expectCloseToTorch(g.dx, want["dx"], variant + " dx");
  test::expectCloseToTorch(g.dparams, want["dparams"], variant + " dparams");
}

// The channel layer norm, the 1x1 convs for the Linears over the channels and layer_scale give
// torchvision's CNBlock's output, input gradient and parameter gradients (layer_scale's included).
TEST(ConvNextVsTorch, TheBlocksForwardAndGradientsMatchPyTorch) { checkAgainstTorch("cnblock", cnBlock("b", 8)); }

TEST(ConvNextVsTorch, LayerNorm2dsForwardAndGradientsMatchPyTorch) {
  checkAgainstTorch("layernorm2d", layerNorm("norm"));
}

TEST(ConvNextZoo, TinyHasTorchvisionsParameters) {
  auto spec = zooChain("convnext_tiny", ZooOptions{.batch = 1, .resolution = 224});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto chain = buildChain(*spec);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  EXPECT_EQ(chain->paramCount(), 28'589'128u);  // sum(p.numel() for p in convnext_tiny().parameters())
  // stem 2, 18 blocks, 3 downsamplings of 2, avgpool, LayerNorm2d, linear (the flatten folds away)
  EXPECT_EQ(chain->size(), 2u + 18u + 6u + 3u);
}

// What one CNBlock keeps is what scripts/torch-convnext-saved.py shows PyTorch saving.
TEST(ConvNextModel, TheBlockKeepsWhatPyTorchSaves) {
  auto spec = parseChain(json({{"format", "remat-chain/1"},
                               {"name", "one-block"},
                               {"input", {{"shape", {2, 8, 5, 5}}, {"dtype", "float32"}}},
                               {"layers", {cnBlock("b", 8)}}})
                             .dump(),
                         "one-block");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto graph = buildBlockGraph(spec->spec.layers[0], Shape{2, 8, 5, 5}, DType::Float32);
  ASSERT_TRUE(graph.isOk()) << graph.status().message();
  EXPECT_TRUE(graph->needsInput);    // the depthwise conv's input
  EXPECT_FALSE(graph->needsOutput);  // the add saves nothing
  const std::uint64_t positions = 2 * 5 * 5;
  // dwconv, LayerNorm, Linear, GELU, Linear outputs are read by later backwards; the scaled product is not.
  const bool saved[] = {true, true, true, true, true, false};
  for (std::size_t t = 1; t <= 6; ++t) EXPECT_EQ(graph->tensors[t].saved, saved[t - 1]) << graph->tensors[t].name;
  const BlockOp& norm = graph->ops[1];
  EXPECT_EQ(norm.kind, BlockOpKind::LayerNorm);
  EXPECT_TRUE(norm.readsInput);
  EXPECT_FALSE(norm.readsOutput);
  EXPECT_EQ(norm.statsBytes, 2 * positions * 4);  // float32 mean and rstd per position
  EXPECT_EQ(norm.paramCount, 16u);
  const BlockOp& scale = graph->ops[5];
  EXPECT_EQ(scale.kind, BlockOpKind::LayerScale);
  EXPECT_TRUE(scale.readsInput);
  EXPECT_EQ(scale.paramCount, 8u);  // the parameter used as an operand counts in p
  EXPECT_EQ(graph->paramCount, (8u * 49 + 8) + 16 + (32u * 8 + 32) + (8u * 32 + 8) + 8);
  const std::uint64_t c8 = positions * 8 * 4, c32 = positions * 32 * 4;
  EXPECT_GE(graph->extraBytes, 3 * c8 + 2 * c32 + 2 * positions * 4);
}

TEST(ConvNextModel, LayerNorm2dNormalizesTheChannelsOfEachPosition) {
  auto chain = smallConvNext();
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  const ChainLayer& stemNorm = chain->layers[1];  // after the stem conv
  ASSERT_EQ(stemNorm.kind, LayerKind::LayerNorm);
  EXPECT_EQ(stemNorm.outputShape, (Shape{2, 8, 8, 8}));
  EXPECT_EQ(stemNorm.paramCount, 16u);
  EXPECT_TRUE(stemNorm.numbers.needsInput);
  EXPECT_FALSE(stemNorm.numbers.needsOutput);
  EXPECT_EQ(stemNorm.numbers.extraBytes, 2u * 2 * 8 * 8 * 4);
  const ChainLayer& head = chain->layers[chain->size() - 2];  // over [N, C, 1, 1]: one row per sample
  ASSERT_EQ(head.kind, LayerKind::LayerNorm);
  EXPECT_EQ(head.numbers.extraBytes, 2u * 2 * 4);
}

TEST(ConvNextRun, MeasuredFootprintEqualsPredictionUnderEveryPlan) {
  testing::expectEveryPlanOnCpu(smallConvNext(), 22);
}

// The zoo's ConvNeXt-Tiny at batch 2: optimal's plan runs as predicted, op by op, and optimal's E
// is no higher than any other planner's.
TEST(ConvNextRun, ZooTinyRunsOptimalsPlanAsPredicted) {
  auto spec = zooChain("convnext_tiny", ZooOptions{.batch = 2, .resolution = 32, .numClasses = 10});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto built = buildChain(*spec);
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device;
  const Chain chain = testing::fittedTo(*built, device);
  auto optimal = runPlanner(chain, "optimal");
  ASSERT_TRUE(optimal.isOk()) << optimal.status().message();
  auto optimalSim = simulate(chain, optimal->plan);
  ASSERT_TRUE(optimalSim.isOk());
  for (const std::string& name : testing::allPlanners()) {
    auto other = runPlanner(chain, name);
    ASSERT_TRUE(other.isOk()) << name << ": " << other.status().message();
    auto sim = simulate(chain, other->plan);
    ASSERT_TRUE(sim.isOk());
    EXPECT_LE(optimalSim->dynamicPeakBytes, sim->dynamicPeakBytes) << name;
  }
  auto interp = Interpreter::create(chain, device, testing::seeded(5));
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  auto run = (*interp)->run(optimal->plan, RunOptions{});
  ASSERT_TRUE(run.isOk()) << run.status().message();
  testing::expectMatchesSimulation(chain, optimal->plan, run->timelines[0]);
}

}  // namespace
}  // namespace remat
