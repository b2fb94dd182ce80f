// Exactness of the budget planner and of the Pareto front by brute force: over every one of the
// 2^(n-1) plans (E by the simulator's dynamicPeak, the cost by its recomputeCost), the front equals
// the brute-force front point for point (E exactly, the cost within recomputeCostTolerance, the
// fewest checkpoints of the plans with that E and cost), and budget:SIZE returns, for every SIZE
// at, just below and just above each front point and between them, a plan with E <= SIZE of the
// least cost, then the least E, then the fewest checkpoints; below the least E it refuses.
//
// Every other chain has parameters and one of the 20 step modes (memory-model.md section 11): E then
// has the weight gradients and the optimizer step's floor.
//
// Chains: seeded random abstract chains from mixedRandomChainOptions, n = 1..16, with three kinds
// of cost: the generator's (0.5 to 4 in steps of 0.5: exact in binary, many ties), continuous
// random doubles (ties only between plans that recompute the same layers), and continuous with a
// quarter of the layers free (cost 0: many plans of one cost, the checkpoint tie-break decides).
// Plus every zoo model (batch 64, 224x224) cut to its first 16 chain layers (GFLOP costs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "chain_helpers.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/random_chain.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/tradeoff.hpp"

namespace remat {
namespace {

struct Scored {
  std::uint64_t peak = 0;
  double cost = 0.0;
  std::size_t count = 0;
};

std::vector<Scored> everyPlan(const Chain& chain) {
  const std::size_t n = chain.size();
  std::vector<Scored> plans;
  Plan plan;
  for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << (n - 1)); ++mask) {
    plan.checkpoints.clear();
    for (std::size_t c = 1; c < n; ++c)
      if (mask >> (c - 1) & 1) plan.checkpoints.push_back(c);
    plans.push_back({dynamicPeak(chain, plan), recomputeCost(chain, plan), plan.checkpoints.size()});
  }
  return plans;
}

// The brute-force answer to budget:SIZE: the least cost, then the least E, then the fewest
// checkpoints (costs within the tolerance are one cost); nullopt when no plan fits.
std::optional<Scored> bestWithin(const std::vector<Scored>& plans, std::uint64_t budget, double tolerance) {
  double leastCost = std::numeric_limits<double>::infinity();
  for (const Scored& p : plans)
    if (p.peak <= budget) leastCost = std::min(leastCost, p.cost);
  if (std::isinf(leastCost)) return std::nullopt;
  std::optional<Scored> best;
  for (const Scored& p : plans) {
    if (p.peak > budget || p.cost > leastCost + tolerance) continue;
    if (!best || p.peak < best->peak || (p.peak == best->peak && p.count < best->count)) best = p;
  }
  best->cost = leastCost;
  return best;
}

// The brute-force front: for each E in rising order, the least cost of the plans with it (and the
// fewest checkpoints among those that cost that), kept when cheaper than every lower E.
std::vector<Scored> bruteFront(const std::vector<Scored>& plans, double tolerance) {
  std::map<std::uint64_t, Scored> byPeak;
  for (const Scored& p : plans) {
    auto [it, inserted] = byPeak.try_emplace(p.peak, Scored{p.peak, p.cost, std::numeric_limits<std::size_t>::max()});
    if (!inserted && p.cost < it->second.cost) it->second.cost = p.cost;
  }
  for (const Scored& p : plans) {
    Scored& least = byPeak[p.peak];
    if (p.cost <= least.cost + tolerance) least.count = std::min(least.count, p.count);
  }
  std::vector<Scored> front;
  for (const auto& [peak, least] : byPeak)
    if (front.empty() || least.cost < front.back().cost - tolerance) front.push_back(least);
  return front;
}

void expectBudget(const Chain& chain, const std::vector<Scored>& plans, const TradeoffFront& front,
                  std::uint64_t budget, double tolerance) {
  SCOPED_TRACE("budget " + std::to_string(budget));
  const std::optional<Scored> expected = bestWithin(plans, budget, tolerance);
  auto planned = planBudget(chain, budget);
  const FrontPoint* read = cheapestWithin(front, budget);
  if (!expected) {
    ASSERT_FALSE(planned.isOk());
    EXPECT_EQ(planned.status().code(), ErrorCode::InvalidInput);
    EXPECT_NE(planned.status().message().find("no plan fits in"), std::string::npos) << planned.status().message();
    EXPECT_EQ(read, nullptr);
    return;
  }
  ASSERT_TRUE(planned.isOk()) << planned.status().message();
  ASSERT_TRUE(validatePlan(planned->plan, chain.size()).isOk());
  EXPECT_EQ(dynamicPeak(chain, planned->plan), planned->objectiveBytes);
  EXPECT_EQ(planned->objectiveBytes, expected->peak);
  EXPECT_NEAR(recomputeCost(chain, planned->plan), expected->cost, tolerance);
  EXPECT_EQ(planned->plan.checkpoints.size(), expected->count);
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(read->dynamicPeakBytes, expected->peak);
  EXPECT_EQ(read->plan.checkpoints.size(), expected->count);
}

void expectExact(const Chain& chain) {
  SCOPED_TRACE(chain.name + " (" + std::to_string(chain.size()) + " layers)");
  const double tolerance = recomputeCostTolerance(chain);
  const std::vector<Scored> plans = everyPlan(chain);
  const std::vector<Scored> expected = bruteFront(plans, tolerance);
  auto front = paretoFront(chain);
  ASSERT_TRUE(front.isOk()) << front.status().message();
  ASSERT_EQ(front->points.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("front point " + std::to_string(i));
    const FrontPoint& point = front->points[i];
    EXPECT_EQ(point.dynamicPeakBytes, expected[i].peak);
    EXPECT_EQ(dynamicPeak(chain, point.plan), point.dynamicPeakBytes);
    EXPECT_EQ(recomputeCost(chain, point.plan), point.recomputeCost);
    EXPECT_NEAR(point.recomputeCost, expected[i].cost, tolerance);
    EXPECT_EQ(point.plan.checkpoints.size(), expected[i].count);
  }
  std::vector<std::uint64_t> budgets = {expected.front().peak - 1, std::numeric_limits<std::uint64_t>::max()};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    budgets.insert(budgets.end(), {expected[i].peak, expected[i].peak + 1, expected[i].peak - 1});
    if (i + 1 < expected.size()) budgets.push_back((expected[i].peak + expected[i + 1].peak) / 2);
  }
  for (std::uint64_t budget : budgets) expectBudget(chain, plans, *front, budget, tolerance);
}

enum class Costs { Generator, Continuous, ContinuousWithFree };

Chain chainWithCosts(std::size_t n, std::uint64_t seed, Costs costs) {
  Chain chain = makeRandomChain(mixedRandomChainOptions(n, seed));
  if (costs == Costs::Generator) return chain;
  SplitMix64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<LayerNumbers> layers;
  for (std::size_t l = 1; l <= n; ++l) {
    LayerNumbers m = chain.at(l);
    const bool free = costs == Costs::ContinuousWithFree && rng.chance(1, 4);
    m.fwdCost = free ? 0.0 : 0.01 + 4.0 * static_cast<double>(rng.next() >> 11) * 0x1p-53;
    layers.push_back(m);
  }
  return makeAbstractChain(chain.name, chain.inputBytes, layers);
}

std::size_t chainsFor(std::size_t n) {
  if (n <= 10) return 200;
  if (n <= 12) return 100;
  if (n <= 14) return 40;
  return 20;
}

class TradeoffBruteForce : public ::testing::TestWithParam<std::size_t> {};

TEST_P(TradeoffBruteForce, FrontAndBudgetsAreExact) {
  const std::size_t n = GetParam();
  for (std::uint64_t i = 0; i < chainsFor(n); ++i) {
    const Costs costs = static_cast<Costs>(i % 3);
    SCOPED_TRACE("chain " + std::to_string(i) + ", costs kind " + std::to_string(i % 3));
    const Chain chain = chainWithCosts(n, 7000000 * n + i, costs);
    // Every other chain with parameters and one of the 20 step modes (memory-model.md section 11).
    expectExact(i % 2 == 0 ? chain : testing::withParameters(chain, 7000000 * n + i, i / 2));
    if (::testing::Test::HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(LayerCounts, TradeoffBruteForce, ::testing::Range<std::size_t>(1, 17));

TEST(TradeoffBruteForceZoo, EveryModelCutToSixteenLayers) {
  const auto models = zooModels();
  ASSERT_FALSE(models.empty());
  for (const ZooEntry& entry : models) {
    const Chain full = testing::zooBuilt(entry.name);
    ASSERT_GT(full.size(), 1u) << entry.name;
    std::vector<LayerNumbers> layers;
    for (std::size_t l = 1; l <= std::min<std::size_t>(16, full.size()); ++l) layers.push_back(full.at(l));
    expectExact(makeAbstractChain(entry.name + "[1..16]", full.inputBytes, layers));
  }
}

// GPT-2's tied head (its weight is layer 1's table) under all 20 step modes, small and long
// sequences: under on-backward gradients the table's G(1) is made by the head's B(n) and alive from
// there (memory-model.md 11.2), which the planners' gradient terms must follow (the real chain, not
// an abstract copy: the tie is in its spec).
TEST(TradeoffBruteForceZoo, TiedGpt2UnderEveryStepMode) {
  for (std::int64_t sequence : {16, 512}) {
    const Chain base = testing::zooBuilt("gpt2", ZooOptions{.batch = 1, .sequence = sequence});
    for (std::size_t mode = 0; mode < testing::kStepModeCount; ++mode) {
      auto chain = withStepOptions(base, testing::stepMode(mode));
      ASSERT_TRUE(chain.isOk()) << chain.status().message();
      chain->name = "gpt2 S=" + std::to_string(sequence) + " " + describeStepOptions(chain->step);
      expectExact(*chain);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace remat
