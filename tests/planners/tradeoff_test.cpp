// The budget planner and the front beyond the brute-force sizes: the registry row, its refusals,
// the front's shape on chains of 40..300 layers and on the zoo (its ends are `optimal` and store
// all; budget:SIZE is the front read at SIZE; no named planner beats it), placement against the
// front, cancellation, progress, and the JSON of `remat tradeoff`.
#include "remat/planners/tradeoff.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include "chain_helpers.hpp"
#include "remat/base/units.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/random_chain.hpp"
#include "remat/planners/registry.hpp"
#include "remat/report/results_json.hpp"

namespace remat {
namespace {

Chain randomChain(std::size_t n, std::uint64_t seed) { return makeRandomChain(mixedRandomChainOptions(n, seed)); }

TEST(BudgetPlanner, IsARegistryRowWithAByteSize) {
  auto parsed = parsePlannerName("budget:3.5GiB");
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(parsed->entry->name, "budget");
  EXPECT_EQ(parsed->entry->parameter.kind, PlannerParameterKind::ByteSize);
  EXPECT_EQ(parsed->parameter, std::uint64_t{7} << 29);
  EXPECT_NE(validPlannerNames().find("budget:SIZE"), std::string::npos);
  for (const char* bad : {"budget", "budget:", "budget:-1", "budget:lots", "budget:3 XiB"}) {
    const Status status = checkPlannerName(bad);
    EXPECT_EQ(status.code(), ErrorCode::InvalidInput) << bad;
  }
  EXPECT_NE(checkPlannerName("budget:lots").message().find("planner 'budget:lots'"), std::string::npos);
  // Not in compare's defaults: it needs a size.
  for (const std::string& name : defaultComparePlanners(10)) EXPECT_EQ(name.rfind("budget", 0), std::string::npos);
}

TEST(BudgetPlanner, RunPlannerReportsTheCheapestPlanThatFits) {
  const Chain chain = testing::zooBuilt("resnet50");
  auto optimal = runPlanner(chain, "optimal");
  auto none = runPlanner(chain, "none");
  ASSERT_TRUE(optimal.isOk() && none.isOk());
  const std::uint64_t budget = (optimal->dynamicPeakBytes + none->dynamicPeakBytes) / 2;
  auto report = runPlanner(chain, "budget:" + std::to_string(budget));
  ASSERT_TRUE(report.isOk()) << report.status().message();
  EXPECT_EQ(report->objective, "C");
  EXPECT_EQ(report->objectiveBytes, report->dynamicPeakBytes);
  EXPECT_LE(report->dynamicPeakBytes, budget);
  EXPECT_EQ(report->recomputeCostUnit, CostUnit::Gflop);
  EXPECT_DOUBLE_EQ(report->recomputeShare, report->recomputeCost / forwardCost(chain));
  // Every other planner whose plan fits recomputes at least as much.
  for (const std::string& name : defaultComparePlanners(chain.size())) {
    auto other = runPlanner(chain, name);
    ASSERT_TRUE(other.isOk());
    if (other->dynamicPeakBytes <= budget) {
      EXPECT_GE(other->recomputeCost, report->recomputeCost) << name;
    }
  }
  // A budget of store-all's E or more costs nothing.
  auto generous = runPlanner(chain, "budget:" + std::to_string(none->dynamicPeakBytes));
  ASSERT_TRUE(generous.isOk());
  EXPECT_EQ(generous->recomputeCost, 0.0);
  EXPECT_TRUE(generous->plan.checkpoints.empty());
}

TEST(BudgetPlanner, NothingFitsNamesTheLeastPeak) {
  const Chain chain = testing::zooBuilt("vgg16");
  auto optimal = planOptimal(chain);
  ASSERT_TRUE(optimal.isOk());
  const std::uint64_t budget = optimal->objectiveBytes - 1;
  auto report = runPlanner(chain, "budget:" + std::to_string(budget));
  ASSERT_FALSE(report.isOk());
  EXPECT_EQ(report.status().code(), ErrorCode::InvalidInput);
  EXPECT_EQ(report.status().message(), "no plan fits in " + formatBytes(budget) +
                                           ": the least dynamic peak of any plan is " +
                                           formatBytes(optimal->objectiveBytes) + " (planner optimal)");
  auto exact = planBudget(chain, optimal->objectiveBytes);
  ASSERT_TRUE(exact.isOk());
  EXPECT_EQ(exact->objectiveBytes, optimal->objectiveBytes);
}

TEST(BudgetPlanner, RefusesCostsItCannotAdd) {
  std::vector<LayerNumbers> layers(4, testing::numbers(1024));
  layers[2].fwdCost = -1.0;
  const Chain chain = makeAbstractChain("negative", 1024, layers);
  auto planned = planBudget(chain, 1 << 20);
  ASSERT_FALSE(planned.isOk());
  EXPECT_EQ(planned.status().code(), ErrorCode::InvalidInput);
  EXPECT_NE(planned.status().message().find("layer 3 ('L3'): fwd_cost"), std::string::npos)
      << planned.status().message();
  EXPECT_FALSE(paretoFront(makeAbstractChain("empty", 1024, {})).isOk());
}

// The front's shape: E rising, cost falling, optimal's E first, store-all last, every point's
// numbers those of its plan.
void expectFrontShape(const Chain& chain, const TradeoffFront& front) {
  ASSERT_FALSE(front.points.empty());
  const double tolerance = recomputeCostTolerance(chain);
  auto optimal = planOptimal(chain);
  ASSERT_TRUE(optimal.isOk());
  EXPECT_EQ(front.points.front().dynamicPeakBytes, optimal->objectiveBytes);
  EXPECT_TRUE(front.points.back().plan.checkpoints.empty());
  EXPECT_EQ(front.points.back().dynamicPeakBytes, dynamicPeak(chain, Plan{}));
  EXPECT_EQ(front.points.back().recomputeCost, 0.0);
  for (std::size_t i = 0; i < front.points.size(); ++i) {
    const FrontPoint& p = front.points[i];
    ASSERT_TRUE(validatePlan(p.plan, chain.size()).isOk());
    EXPECT_EQ(dynamicPeak(chain, p.plan), p.dynamicPeakBytes) << "point " << i;
    EXPECT_EQ(recomputeCost(chain, p.plan), p.recomputeCost) << "point " << i;
    if (i == 0) continue;
    EXPECT_GT(p.dynamicPeakBytes, front.points[i - 1].dynamicPeakBytes) << "point " << i;
    EXPECT_LT(p.recomputeCost, front.points[i - 1].recomputeCost + tolerance) << "point " << i;
  }
  EXPECT_EQ(front.statistics.positions, chain.size());
  EXPECT_GE(front.statistics.labels, front.points.size());
  EXPECT_GE(front.statistics.largestLabelSet, front.points.size());
}

// budget:SIZE at and between the front's points is the front read at SIZE; no named planner's
// plan beats a front point.
void expectBudgetsReadTheFront(const Chain& chain, const TradeoffFront& front) {
  const double tolerance = recomputeCostTolerance(chain);
  for (std::size_t i = 0; i < front.points.size(); i += std::max<std::size_t>(1, front.points.size() / 7)) {
    for (std::uint64_t budget : {front.points[i].dynamicPeakBytes, front.points[i].dynamicPeakBytes + 4095}) {
      auto planned = planBudget(chain, budget);
      ASSERT_TRUE(planned.isOk()) << planned.status().message();
      const FrontPoint* read = cheapestWithin(front, budget);
      ASSERT_NE(read, nullptr);
      EXPECT_EQ(planned->objectiveBytes, read->dynamicPeakBytes) << "budget " << budget;
      EXPECT_NEAR(recomputeCost(chain, planned->plan), read->recomputeCost, tolerance) << "budget " << budget;
      EXPECT_EQ(planned->plan.checkpoints.size(), read->plan.checkpoints.size()) << "budget " << budget;
    }
  }
  for (const std::string& name : defaultComparePlanners(chain.size())) {
    auto report = runPlanner(chain, name);
    ASSERT_TRUE(report.isOk());
    const FrontPoint* read = cheapestWithin(front, report->dynamicPeakBytes);
    ASSERT_NE(read, nullptr) << name;
    EXPECT_LE(read->recomputeCost, report->recomputeCost + tolerance) << name;
  }
}

TEST(TradeoffFront, LongerRandomChains) {
  for (std::uint64_t seed = 0; seed < 24; ++seed) {
    const Chain chain = randomChain(40 + 11 * seed, 9100 + seed);
    SCOPED_TRACE(chain.name);
    auto front = paretoFront(chain);
    ASSERT_TRUE(front.isOk()) << front.status().message();
    expectFrontShape(chain, *front);
    expectBudgetsReadTheFront(chain, *front);
  }
}

TEST(TradeoffFront, EveryZooModel) {
  for (const ZooEntry& entry : zooModels()) {
    SCOPED_TRACE(entry.name);
    const Chain chain = testing::zooBuilt(entry.name);
    auto front = paretoFront(chain);
    ASSERT_TRUE(front.isOk()) << front.status().message();
    expectFrontShape(chain, *front);
    expectBudgetsReadTheFront(chain, *front);
  }
}

TEST(TradeoffFront, OneLayerHasOnePoint) {
  const Chain chain = makeAbstractChain("one", 1024, {testing::numbers(4096)});
  auto front = paretoFront(chain);
  ASSERT_TRUE(front.isOk());
  ASSERT_EQ(front->points.size(), 1u);
  EXPECT_EQ(front->points[0].dynamicPeakBytes, dynamicPeak(chain, Plan{}));
}

TEST(TradeoffFront, CancelsAndReportsProgress) {
  const Chain chain = randomChain(300, 77);
  std::atomic<bool> cancel{true};
  PlannerOptions cancelled;
  cancelled.cancelFlag = &cancel;
  EXPECT_EQ(paretoFront(chain, cancelled).status().code(), ErrorCode::Cancelled);
  EXPECT_EQ(planBudget(chain, 1u << 30, cancelled).status().code(), ErrorCode::Cancelled);
  std::vector<double> fractions;
  PlannerOptions watched;
  watched.progress = [&fractions](double fraction) { fractions.push_back(fraction); };
  ASSERT_TRUE(paretoFront(chain, watched).isOk());
  ASSERT_GE(fractions.size(), 10u);
  EXPECT_LE(fractions.size(), 120u);
  EXPECT_TRUE(std::is_sorted(fractions.begin(), fractions.end()));
  EXPECT_GT(fractions.front(), 0.0);
  EXPECT_DOUBLE_EQ(fractions.back(), 1.0);
}

TEST(TradeoffFront, PlacementMeasuresWhatAPlanGivesAway) {
  TradeoffFront front;
  front.points = {{Plan{{1, 2}}, 100, 10.0}, {Plan{{2}}, 200, 4.0}, {Plan{}, 300, 0.0}};
  const FrontPlacement on = placeAgainstFront(front, 200, 4.0, 1e-9);
  EXPECT_TRUE(on.onFront);
  EXPECT_EQ(on.samePeakPoint, 1u);
  // E 250 at cost 6: point 1 (E 200, cost 4) peaks no higher for 2 less, and it is also the point
  // of least E that costs no more (point 0 costs 10): 50 bytes lower.
  const FrontPlacement off = placeAgainstFront(front, 250, 6.0, 1e-9);
  EXPECT_FALSE(off.onFront);
  EXPECT_EQ(off.samePeakPoint, 1u);
  EXPECT_DOUBLE_EQ(off.extraRecomputeCost, 2.0);
  EXPECT_EQ(off.sameCostPoint, 1u);
  EXPECT_EQ(off.extraPeakBytes, 50u);
  // Within the tolerance a cost is the front's.
  EXPECT_TRUE(placeAgainstFront(front, 100, 10.0 + 1e-12, 1e-9).onFront);
  EXPECT_FALSE(placeAgainstFront(front, 100, 10.0 + 1e-6, 1e-9).onFront);
  EXPECT_EQ(cheapestWithin(front, 99), nullptr);
  EXPECT_EQ(cheapestWithin(front, 299), &front.points[1]);
}

TEST(TradeoffJson, FrontAndPlannersWithUnits) {
  const Chain chain = testing::zooBuilt("resnet18");
  auto front = paretoFront(chain);
  ASSERT_TRUE(front.isOk());
  std::vector<PlanReport> planners;
  for (const char* name : {"none", "sqrt"}) planners.push_back(*runPlanner(chain, name));
  const nlohmann::json j = tradeoffToJson(chain, *front, planners);
  EXPECT_EQ(j["chain"], "resnet18");
  EXPECT_EQ(j["recompute_cost_unit"], "GFLOP");
  ASSERT_EQ(j["front"].size(), front->points.size());
  std::uint64_t previous = 0;
  for (const nlohmann::json& p : j["front"]) {
    EXPECT_GT(p["dynamic_peak_bytes"].get<std::uint64_t>(), previous);
    previous = p["dynamic_peak_bytes"].get<std::uint64_t>();
    EXPECT_EQ(p["peak_bytes"].get<std::uint64_t>(), previous + chain.staticBytes());
    EXPECT_TRUE(p.contains("recompute_cost") && p.contains("recompute_share") && p["checkpoints"].is_array());
  }
  ASSERT_EQ(j["planners"].size(), 2u);
  EXPECT_EQ(j["planners"][0]["planner"], "none");
  EXPECT_EQ(j["planners"][0]["on_front"], true);
  EXPECT_EQ(j["planners"][0]["extra_peak_bytes"], 0);
  EXPECT_EQ(j["planners"][0]["recompute_cost_unit"], "GFLOP");
  EXPECT_TRUE(j["planners"][1].contains("extra_recompute_cost"));
}

}  // namespace
}  // namespace remat
