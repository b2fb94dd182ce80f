// The unit of a chain's costs and the share of one forward pass: GFLOP for inferred real layers,
// milliseconds for profiled ones, the chain's own units for abstract layers, and "mixed" (with the
// counts of each origin) when they do not agree.
#include "remat/model/costs.hpp"

#include <gtest/gtest.h>

#include "chain_helpers.hpp"

namespace remat {
namespace {

using testing::layerSpec;

// A small real chain; the layers listed in `measured` carry measured costs as `remat profile` writes.
Chain realChain(const std::vector<std::size_t>& measured) {
  std::vector<LayerSpec> layers = {testing::convSpec(8, 3, 1, 1), layerSpec("r", LayerKind::Relu),
                                   testing::convSpec(8, 3, 1, 1)};
  for (std::size_t index : measured) {
    layers[index].hasMeasuredCost = true;
    layers[index].numbers.fwdCost = 0.25 * static_cast<double>(index + 1);
    layers[index].numbers.bwdCost = 0.5;
  }
  auto chain = testing::chainFromLayers({2, 3, 16, 16}, layers);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

TEST(CostUnits, EachOrigin) {
  const Chain estimated = realChain({});
  EXPECT_EQ(chainCostUnit(estimated), CostUnit::Gflop);
  EXPECT_EQ(costUnitName(CostUnit::Gflop), "GFLOP");
  EXPECT_EQ(costUnitDescription(estimated), "GFLOP (estimated from shapes)");

  const Chain measured = realChain({0, 1, 2});
  EXPECT_EQ(chainCostUnit(measured), CostUnit::Milliseconds);
  EXPECT_EQ(costUnitName(CostUnit::Milliseconds), "ms");
  EXPECT_EQ(costUnitDescription(measured), "ms (measured by remat profile)");

  const Chain abstract = makeAbstractChain("a", 64, {testing::numbers(64), testing::numbers(64)});
  EXPECT_EQ(chainCostUnit(abstract), CostUnit::Abstract);
  EXPECT_EQ(costUnitName(CostUnit::Abstract), "units");
  EXPECT_EQ(costUnitSymbol(CostUnit::Abstract), "cost units");

  const Chain partly = realChain({1});
  EXPECT_EQ(chainCostUnit(partly), CostUnit::Mixed);
  EXPECT_EQ(costUnitName(CostUnit::Mixed), "mixed");
  EXPECT_EQ(costUnitDescription(partly), "cost units (mixed: 1 layer measured in ms, 2 layers estimated in GFLOP)");
  const CostOrigins origins = costOrigins(partly);
  EXPECT_EQ(origins.measured, 1u);
  EXPECT_EQ(origins.estimated, 2u);
  EXPECT_EQ(origins.stated, 0u);
}

TEST(CostUnits, ShareOfOneForwardPass) {
  const Chain chain = realChain({0, 1, 2});
  EXPECT_DOUBLE_EQ(forwardCost(chain), 0.25 + 0.5 + 0.75);
  EXPECT_DOUBLE_EQ(recomputeShare(chain, 0.75), 0.5);
  std::vector<LayerNumbers> free = {testing::numbers(64)};
  free[0].fwdCost = 0.0;
  EXPECT_EQ(recomputeShare(makeAbstractChain("free", 64, free), 1.0), 0.0);
}

}  // namespace
}  // namespace remat
