// The modelled clock of predicted timelines: each op's duration from its layer's cost and unit,
// filled in by simulate(), refused for a timeline of another chain.
#include "remat/memory/op_times.hpp"

#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "remat/memory/simulator.hpp"

namespace remat {
namespace {

// Three abstract layers with stated costs (read as milliseconds).
Chain statedChain() {
  std::vector<LayerNumbers> layers = {testing::numbers(1000), testing::numbers(2000), testing::numbers(10)};
  layers[0].fwdCost = 1.5;
  layers[0].bwdCost = 3.0;
  layers[1].fwdCost = 0.25;
  layers[1].bwdCost = 0.5;
  layers[2].fwdCost = 0.125;
  layers[2].bwdCost = 0.25;
  return makeAbstractChain("stated", 100, layers);
}

// A real chain: a convolution and a relu, costs estimated in GFLOP.
Chain realChain() {
  ChainSpec spec;
  spec.name = "real";
  spec.input.shape = {2, 3, 16, 16};
  spec.layers = {testing::convSpec(8, 3, 1, 1), testing::layerSpec("r", LayerKind::Relu)};
  Result<Chain> chain = buildChain(spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? *chain : Chain{};
}

TEST(OpTimes, StatedCostsAreMillisecondsAndEachOpKindTakesItsCost) {
  const Chain chain = statedChain();
  EXPECT_EQ(layerCostOrigin(chain, 1), CostOrigin::Stated);
  EXPECT_DOUBLE_EQ(opMicroseconds(chain, {OpKind::F, 1}), 1500.0);
  EXPECT_DOUBLE_EQ(opMicroseconds(chain, {OpKind::R, 1}), 1500.0);
  EXPECT_DOUBLE_EQ(opMicroseconds(chain, {OpKind::RE, 2}), 250.0);
  EXPECT_DOUBLE_EQ(opMicroseconds(chain, {OpKind::B, 1}), 3000.0);
  EXPECT_DOUBLE_EQ(opMicroseconds(chain, {OpKind::Seed, 0}), 0.0);
  EXPECT_EQ(describeOpTimeModel(chain), "stated costs as ms");
}

TEST(OpTimes, EstimatedGflopRunAtTheStatedSpeed) {
  const Chain chain = realChain();
  ASSERT_EQ(chain.size(), 2u);
  ASSERT_EQ(layerCostOrigin(chain, 1), CostOrigin::Estimated);
  const double gflop = chain.at(1).fwdCost;
  ASSERT_GT(gflop, 0.0);
  EXPECT_DOUBLE_EQ(opMicroseconds(chain, {OpKind::F, 1}), gflop / kDefaultGflopPerSecond * 1e6);
  EXPECT_DOUBLE_EQ(opMicroseconds(chain, {OpKind::F, 1}, {.gflopPerSecond = 1.0}), gflop * 1e6);
  EXPECT_EQ(describeOpTimeModel(chain), "GFLOP at 10 TFLOP/s");
  EXPECT_EQ(describeOpTimeModel(chain, {.gflopPerSecond = 500.0}), "GFLOP at 500 GFLOP/s");
}

TEST(OpTimes, ProfiledLayersAreMilliseconds) {
  ChainSpec spec = realChain().spec;
  spec.layers[0].hasMeasuredCost = true;
  spec.layers[0].numbers.fwdCost = 2.0;
  spec.layers[0].numbers.bwdCost = 4.0;
  Result<Chain> chain = buildChain(spec);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  EXPECT_EQ(layerCostOrigin(*chain, 1), CostOrigin::Measured);
  EXPECT_DOUBLE_EQ(opMicroseconds(*chain, {OpKind::B, 1}), 4000.0);
  EXPECT_EQ(describeOpTimeModel(*chain), "GFLOP at 10 TFLOP/s + profiled ms");
}

TEST(OpTimes, SimulateGivesThePredictionAClock) {
  const Chain chain = statedChain();
  Result<Simulation> sim = simulate(chain, Plan{{2}});
  ASSERT_TRUE(sim.isOk()) << sim.status().message();
  std::string ops;
  double totalUs = 0.0;
  for (const TimelineEntry& e : sim->timeline.entries) {
    EXPECT_DOUBLE_EQ(e.timeUs, opMicroseconds(chain, e.op)) << opLabel(e.op);
    ops += opLabel(e.op) + " ";
    totalUs += e.timeUs;
  }
  // The forward, the seed, the last segment's backward, then layer 1 recomputed for its segment.
  EXPECT_EQ(ops, "F(1) F(2) F(3) SEED B(3) R(1) B(2) B(1) ");
  EXPECT_DOUBLE_EQ(totalUs, 1000.0 * (1.5 + 0.25 + 0.125 + 0.0 + 0.25 + 1.5 + 0.5 + 3.0));
}

TEST(OpTimes, AnotherChainsTimelineOrABadSpeedIsRefusedAndLeftAlone) {
  const Chain chain = statedChain();
  Timeline timeline;
  timeline.entries.push_back({.op = {OpKind::F, 4}, .footprintBytes = 1, .liveAfterBytes = 1, .timeUs = 7.0});
  const Status status = modelOpTimes(chain, timeline);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("F(4)"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("'stated'"), std::string::npos) << status.message();
  EXPECT_EQ(timeline.entries[0].timeUs, 7.0);
  timeline.entries[0].op.layer = 1;
  EXPECT_FALSE(modelOpTimes(chain, timeline, {.gflopPerSecond = 0.0}).isOk());
  EXPECT_EQ(timeline.entries[0].timeUs, 7.0);
}

}  // namespace
}  // namespace remat
