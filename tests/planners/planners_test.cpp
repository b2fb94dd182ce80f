// Planners: names and errors, the fixed rules, result fields, golden minima, edge cases, the
// monotone-u property of CNN chains and the zoo, cancellation, and on chains too long for brute
// force, that each exact planner beats every other planner's plan on its own objective.
#include "remat/planners/planners.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chain_helpers.hpp"
#include "golden.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/random_chain.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/registry.hpp"
#include "remat/report/results_json.hpp"

namespace remat {
namespace {

using testing::numbers;
using Checkpoints = std::vector<std::size_t>;

Chain equalChain(std::size_t n, std::uint64_t bytes = 1000) {
  return makeAbstractChain("equal", bytes, std::vector<LayerNumbers>(n, numbers(bytes)));
}

PlanReport mustRun(const Chain& chain, std::string_view name) {
  auto result = runPlanner(chain, name);
  EXPECT_TRUE(result.isOk()) << name << ": " << result.status().message();
  return result.isOk() ? *result : PlanReport{};
}

TEST(PlannerNames, ListAndErrors) {
  EXPECT_EQ(plannerNames(), (std::vector<std::string>{"none", "sqrt", "greedy", "uniform:K", "dp", "linear", "optimal",
                                                      "budget:SIZE"}));
  const Chain chain = equalChain(5);
  for (const char* bad :
       {"", "DP", "uniform", "uniform:", "uniform:0", "uniform:x", "uniform:3x", "uniform:-2", "best"}) {
    auto result = runPlanner(chain, bad);
    ASSERT_FALSE(result.isOk()) << bad;
    EXPECT_EQ(result.status().code(), ErrorCode::InvalidInput) << bad;
    EXPECT_NE(result.status().message().find(bad), std::string::npos) << result.status().message();
  }
  EXPECT_NE(runPlanner(chain, "best").status().message().find("none, sqrt, greedy, uniform:K"), std::string::npos);
  auto empty = runPlanner(makeAbstractChain("empty", 10, {}), "dp");
  ASSERT_FALSE(empty.isOk());
  EXPECT_EQ(empty.status().code(), ErrorCode::InvalidInput);
}

// A name that runs each registered planner: parametrised ones with a valid parameter value.
std::string runnableName(const PlannerEntry& entry) {
  switch (entry.parameter.kind) {
    case PlannerParameterKind::None: return std::string(entry.name);
    case PlannerParameterKind::Count: return std::string(entry.name) + ":3";
    case PlannerParameterKind::ByteSize: return std::string(entry.name) + ":1GiB";  // what a small chain fits in
  }
  return {};
}

TEST(PlannerRegistry, EveryRegisteredPlannerRunsOnASmallChain) {
  const Chain chain = makeRandomChain(mixedRandomChainOptions(9, 5));
  std::vector<std::string> listed;
  for (const PlannerEntry& entry : plannerRegistry()) {
    SCOPED_TRACE(entry.listedName());
    listed.push_back(entry.listedName());
    EXPECT_FALSE(entry.description.empty());
    EXPECT_NE(std::string("AERC-").find(objectiveSymbol(entry.objective)), std::string::npos);
    EXPECT_NE(validPlannerNames().find(entry.listedName()), std::string::npos);
    EXPECT_EQ(entry.hasParameter(), !entry.parameter.symbol.empty());
    EXPECT_EQ(entry.compare.parameter != nullptr, entry.compare.listed && entry.hasParameter());
    const PlanReport report = mustRun(chain, runnableName(entry));
    EXPECT_EQ(report.planner, runnableName(entry));
    EXPECT_EQ(report.objective, entry.objective);
    auto parsed = parsePlannerName(runnableName(entry));
    ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
    EXPECT_EQ(parsed->entry, &entry);
  }
  EXPECT_EQ(plannerNames(), listed);
  EXPECT_EQ(validPlannerNames(),
            "none, sqrt, greedy, uniform:K (K >= 1), dp, linear, optimal, budget:SIZE (SIZE a byte size such as 4GiB)");
  EXPECT_EQ(defaultComparePlannersText(), "none,sqrt,greedy,uniform:K with K = ceil(sqrt n),dp,linear,optimal");
  EXPECT_EQ(defaultComparePlanners(10),
            (std::vector<std::string>{"none", "sqrt", "greedy", "uniform:4", "dp", "linear", "optimal"}));
}

TEST(PlannerRegistry, TheBudgetPlannersNameReadsAsADynamicBound) {
  EXPECT_EQ(readablePlannerName(budgetPlannerName(54951085)), "budget (dynamic \u2264 52.41 MiB)");
  EXPECT_EQ(readablePlannerName("budget:1GiB"), "budget (dynamic \u2264 1.00 GiB)");
  EXPECT_EQ(readablePlannerName("dp"), "dp");
  EXPECT_EQ(readablePlannerName("uniform:4"), "uniform:4");
  EXPECT_EQ(readablePlannerName("budget:x"), "budget:x");  // what does not parse stays as it is
}

TEST(PlannerRegistry, ParametersAreReadAsTheirKindSays) {
  auto parsedUniform = parsePlannerName("uniform:2");
  ASSERT_TRUE(parsedUniform.isOk());
  const PlannerEntry& uniform = *parsedUniform->entry;
  EXPECT_EQ(*parsePlannerParameter(uniform, "uniform:12", "12"), 12u);
  EXPECT_EQ(parsePlannerParameter(uniform, "uniform: 3", " 3").status().message(),
            "planner 'uniform: 3': K must be a whole number >= 1 (uniform:K splits the chain into K segments)");
  // A byte-size parameter (as a budget:SIZE planner would take) goes through parseByteSize.
  const PlannerEntry budget{.name = "budget",
                            .parameter = {PlannerParameterKind::ByteSize, "SIZE", "keeps at most SIZE bytes"},
                            .objective = Objective::None,
                            .description = "a byte-size parameter",
                            .compare = {},
                            .plan = nullptr};
  EXPECT_EQ(budget.listedName(), "budget:SIZE");
  EXPECT_EQ(*parsePlannerParameter(budget, "budget:1.5KiB", "1.5KiB"), 1536u);
  EXPECT_EQ(*parsePlannerParameter(budget, "budget:4096", "4096"), 4096u);
  auto bad = parsePlannerParameter(budget, "budget:lots", "lots");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), ErrorCode::InvalidInput);
  EXPECT_EQ(bad.status().message().rfind("planner 'budget:lots': SIZE must be a byte size (budget:SIZE keeps at most "
                                         "SIZE bytes): bad size 'lots'",
                                         0),
            0u)
      << bad.status().message();
  auto parsedNone = parsePlannerName("none");
  ASSERT_TRUE(parsedNone.isOk());
  EXPECT_FALSE(parsePlannerParameter(*parsedNone->entry, "none:1", "1").isOk());
}

TEST(FixedRules, Sqrt) {
  EXPECT_EQ(planSqrt(1).checkpoints, Checkpoints{});
  EXPECT_EQ(planSqrt(2).checkpoints, Checkpoints{});  // ceil(sqrt 2) = 2
  EXPECT_EQ(planSqrt(3).checkpoints, Checkpoints{2});
  EXPECT_EQ(planSqrt(9).checkpoints, (Checkpoints{3, 6}));
  EXPECT_EQ(planSqrt(10).checkpoints, (Checkpoints{4, 8}));
  EXPECT_EQ(planSqrt(16).checkpoints, (Checkpoints{4, 8, 12}));
  EXPECT_EQ(planSqrt(17).checkpoints, (Checkpoints{5, 10, 15}));
}

TEST(FixedRules, UniformIsCheckpointSequential) {
  EXPECT_EQ(planUniform(10, 1).checkpoints, Checkpoints{});
  EXPECT_EQ(planUniform(10, 3).checkpoints, (Checkpoints{3, 6}));  // segments 3, 3, 4
  EXPECT_EQ(planUniform(7, 2).checkpoints, (Checkpoints{3}));
  EXPECT_EQ(planUniform(12, 4).checkpoints, (Checkpoints{3, 6, 9}));
  EXPECT_EQ(planUniform(5, 5).checkpoints, (Checkpoints{1, 2, 3, 4}));
  EXPECT_EQ(planUniform(5, 50).checkpoints, (Checkpoints{1, 2, 3, 4}));  // K > n clamps to n
  EXPECT_EQ(mustRun(equalChain(10), "uniform:3").plan.checkpoints, (Checkpoints{3, 6}));
  EXPECT_EQ(mustRun(equalChain(10), "uniform:3").planner, "uniform:3");
}

TEST(Greedy, BudgetWalk) {
  // Kept bytes w = 10, 20, 30, 40, 50 (every layer's input is read by the next backward).
  const Chain chain =
      makeAbstractChain("g", 5, {numbers(10), numbers(20), numbers(30), numbers(40), numbers(50), numbers(60)});
  EXPECT_EQ(planGreedyForBudget(chain, 0).checkpoints, (Checkpoints{1, 2, 3, 4, 5}));
  EXPECT_EQ(planGreedyForBudget(chain, 25).checkpoints, (Checkpoints{2, 3, 4, 5}));  // 10+20 > 25, then 30 > 25...
  EXPECT_EQ(planGreedyForBudget(chain, 55).checkpoints, (Checkpoints{3, 5}));        // 60 > 55, then 40+50 > 55
  EXPECT_EQ(planGreedyForBudget(chain, 1000).checkpoints, Checkpoints{});
}

TEST(Greedy, ReturnsTheBestOfItsTrialsByE) {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const Chain chain = makeRandomChain(mixedRandomChainOptions(30 + seed, seed));
    auto greedy = planGreedy(chain);
    ASSERT_TRUE(greedy.isOk());
    EXPECT_EQ(greedy->objectiveBytes, dynamicPeak(chain, greedy->plan));
    // Budget 0 (a checkpoint wherever w > 0) is always one of its trials.
    EXPECT_LE(greedy->objectiveBytes, dynamicPeak(chain, planGreedyForBudget(chain, 0)));
  }
}

TEST(Results, FieldsMatchTheSimulator) {
  const Chain chain = makeRandomChain(mixedRandomChainOptions(25, 3));
  for (const std::string& name : defaultComparePlanners(chain.size())) {
    const PlanReport r = mustRun(chain, name);
    auto sim = simulate(chain, r.plan);
    ASSERT_TRUE(sim.isOk());
    EXPECT_EQ(r.planner, name);
    EXPECT_EQ(r.dynamicPeakBytes, sim->dynamicPeakBytes) << name;
    EXPECT_EQ(r.aBytes, sim->aBytes) << name;
    EXPECT_EQ(r.rBytes, sim->rBytes) << name;
    EXPECT_EQ(r.staticBytes, chain.staticBytes()) << name;
    EXPECT_EQ(r.peakBytes(), r.staticBytes + r.dynamicPeakBytes) << name;
    EXPECT_DOUBLE_EQ(r.recomputeCost, sim->recomputeCost) << name;
    EXPECT_GE(r.planSeconds, 0.0);
    const std::string expected = name == "dp" ? "A" : name == "linear" ? "R" : name == "optimal" ? "E" : "-";
    EXPECT_EQ(objectiveSymbol(r.objective), expected) << name;
    const std::uint64_t value = expected == "A" ? r.aBytes : expected == "R" ? r.rBytes : r.dynamicPeakBytes;
    EXPECT_EQ(r.objectiveBytes, value) << name;
  }
}

TEST(Results, Json) {
  const Chain chain = makeRandomChain(mixedRandomChainOptions(12, 4));
  const PlanReport r = mustRun(chain, "linear");
  const nlohmann::json j = planReportToJson(r);
  EXPECT_EQ(j["planner"], "linear");
  EXPECT_EQ(j["objective"], "R");
  EXPECT_EQ(j["objective_bytes"].get<std::uint64_t>(), r.rBytes);
  EXPECT_EQ(j["checkpoints"].get<Checkpoints>(), r.plan.checkpoints);
  EXPECT_EQ(j["dynamic_peak_bytes"].get<std::uint64_t>(), r.dynamicPeakBytes);
  EXPECT_EQ(j["static_bytes"].get<std::uint64_t>(), r.staticBytes);
  EXPECT_EQ(j["peak_bytes"].get<std::uint64_t>(), r.peakBytes());
  EXPECT_EQ(j["A_bytes"].get<std::uint64_t>(), r.aBytes);
  EXPECT_EQ(j["R_bytes"].get<std::uint64_t>(), r.rBytes);
  EXPECT_TRUE(j["plan_seconds"].is_number());
  EXPECT_TRUE(j["recompute_cost"].is_number());
}

TEST(Golden, ExactPlannersReachTheMinima) {
  for (const auto& example : testing::goldenExamples()) {
    const Chain chain = testing::chainFromJson(example["chain"]);
    const auto& minimum = example["minimum"];
    SCOPED_TRACE(chain.name);
    EXPECT_EQ(mustRun(chain, "optimal").objectiveBytes, minimum["E"].get<std::uint64_t>());
    EXPECT_EQ(mustRun(chain, "dp").objectiveBytes, minimum["A"].get<std::uint64_t>());
    EXPECT_EQ(mustRun(chain, "linear").objectiveBytes, minimum["R"].get<std::uint64_t>());
  }
}

TEST(EdgeCases, OneLayer) {
  const Chain chain = makeAbstractChain("one", 64, {numbers(100, true, true, 7, 3, 5)});
  for (const std::string& name : defaultComparePlanners(1)) {
    const PlanReport r = mustRun(chain, name);
    EXPECT_TRUE(r.plan.checkpoints.empty()) << name;
    EXPECT_EQ(r.dynamicPeakBytes, dynamicPeak(chain, Plan{})) << name;
  }
  // uniform:K with K > n is refused by name (issue 15), though planUniform itself clamps.
  const auto tooMany = runPlanner(chain, "uniform:9");
  ASSERT_FALSE(tooMany.isOk());
  EXPECT_NE(tooMany.status().message().find("K = 9 segments, but the chain has 1 layers"), std::string::npos)
      << tooMany.status().message();
  EXPECT_EQ(planUniform(1, 9).checkpoints, Checkpoints{});
}

TEST(EdgeCases, TwoLayers) {
  // Checkpointing x(1) cannot lower E here (nothing to discard), so optimal stores all.
  const Chain chain = makeAbstractChain("two", 64, {numbers(100), numbers(100)});
  EXPECT_EQ(mustRun(chain, "optimal").dynamicPeakBytes,
            std::min(dynamicPeak(chain, Plan{}), dynamicPeak(chain, Plan{{1}})));
  EXPECT_EQ(mustRun(chain, "dp").aBytes, std::min(objectiveA(chain, Plan{}), objectiveA(chain, Plan{{1}})));
  EXPECT_EQ(mustRun(chain, "linear").rBytes, std::min(objectiveR(chain, Plan{}), objectiveR(chain, Plan{{1}})));
}

TEST(EdgeCases, EqualActivationsGiveTheKnownSqrtShape) {
  // n equal layers that all keep their input: A of k evenly spaced checkpoints ~ k + n/(k+1) units,
  // so the optimum is near 2 sqrt(n) units.
  const std::uint64_t unit = 1000;
  for (std::size_t n : {4, 9, 16, 25, 100}) {
    const Chain chain = equalChain(n, unit);
    const PlanReport dp = mustRun(chain, "dp");
    std::uint64_t bestByHand = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t k = 1; k <= n; ++k) bestByHand = std::min(bestByHand, objectiveA(chain, planUniform(n, k)));
    EXPECT_LE(dp.aBytes, bestByHand) << n;
    EXPECT_LE(mustRun(chain, "optimal").dynamicPeakBytes, mustRun(chain, "sqrt").dynamicPeakBytes) << n;
  }
}

TEST(Determinism, SameChainSamePlan) {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const Chain a = makeRandomChain(mixedRandomChainOptions(60, seed));
    const Chain b = makeRandomChain(mixedRandomChainOptions(60, seed));
    for (const std::string& name : defaultComparePlanners(60))
      EXPECT_EQ(mustRun(a, name).plan, mustRun(b, name).plan) << name << " seed " << seed;
  }
}

TEST(Cancellation, LongPlannersStop) {
  const Chain chain = makeRandomChain(mixedRandomChainOptions(200, 1));
  std::atomic<bool> stop{true};
  PlannerOptions options;
  options.cancelFlag = &stop;
  for (const char* name : {"dp", "linear", "optimal", "greedy"}) {
    auto result = runPlanner(chain, name, options);
    ASSERT_FALSE(result.isOk()) << name;
    EXPECT_EQ(result.status().code(), ErrorCode::Cancelled) << name;
  }
  stop = false;
  EXPECT_TRUE(runPlanner(chain, "dp", options).isOk());
}

TEST(SegmentEndCosts, NondecreasingOnCnnChainsAndTheZooButMobileNetV2) {
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    const Chain chain = makeRandomChain({.layers = 5 + seed % 120,
                                         .seed = seed,
                                         .extras = seed % 2 == 0,
                                         .workspaces = seed % 3 == 0,
                                         .cnnLike = true});
    EXPECT_TRUE(segmentEndCostsNondecreasing(chain)) << seed;
  }
  for (const ZooEntry& entry : zooModels()) {
    auto spec = zooChain(entry.name, ZooOptions{});
    ASSERT_TRUE(spec.isOk()) << entry.name;
    auto chain = buildChain(*spec);
    ASSERT_TRUE(chain.isOk()) << entry.name;
    // MobileNetV2's last ReLU6 output is read by no backward (memory-model.md section 4), nor are
    // EfficientNet-B0's last SiLU output and MobileNetV3's last hardswish output.
    const bool lastActivationUnread =
        entry.name == "mobilenet_v2" || entry.name == "efficientnet_b0" || entry.name == "mobilenet_v3_large";
    EXPECT_EQ(segmentEndCostsNondecreasing(*chain), !lastActivationUnread) << entry.name;
  }
  // A chain that breaks it: an unread big activation followed by a small one.
  const Chain broken = makeAbstractChain("b", 10, {numbers(100, true, false), numbers(10, false, false), numbers(10)});
  EXPECT_FALSE(segmentEndCostsNondecreasing(broken));
  auto deque = planLinear(broken, {}, LinearMethod::MonotoneDeque);
  ASSERT_FALSE(deque.isOk());
  EXPECT_EQ(deque.status().code(), ErrorCode::InvalidInput);
}

// Beyond brute force: on longer chains each exact planner's value is at most what every other
// planner's plan scores on that objective, and the two linear methods agree.
TEST(LongChains, EachExactPlannerBeatsEveryOtherPlan) {
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    const std::size_t n = 40 + 9 * seed;
    const Chain chain = makeRandomChain(mixedRandomChainOptions(n, 77 + seed));
    const PlanReport optimal = mustRun(chain, "optimal");
    const PlanReport dp = mustRun(chain, "dp");
    const PlanReport linear = mustRun(chain, "linear");
    for (const std::string& name : defaultComparePlanners(n)) {
      const PlanReport other = mustRun(chain, name);
      EXPECT_LE(optimal.dynamicPeakBytes, other.dynamicPeakBytes) << name << " n=" << n;
      EXPECT_LE(dp.aBytes, other.aBytes) << name << " n=" << n;
      EXPECT_LE(linear.rBytes, other.rBytes) << name << " n=" << n;
    }
    auto heap = planLinear(chain, {}, LinearMethod::Heap);
    ASSERT_TRUE(heap.isOk());
    EXPECT_EQ(heap->objectiveBytes, linear.rBytes);
    if (segmentEndCostsNondecreasing(chain)) {
      auto deque = planLinear(chain, {}, LinearMethod::MonotoneDeque);
      ASSERT_TRUE(deque.isOk());
      EXPECT_EQ(deque->objectiveBytes, linear.rBytes);
    }
  }
}

TEST(LongChains, OptimalOnTheZoo) {
  for (const char* name : {"vgg16", "resnet50", "mobilenet_v2"}) {
    auto spec = zooChain(name, ZooOptions{});
    ASSERT_TRUE(spec.isOk());
    auto chain = buildChain(*spec);
    ASSERT_TRUE(chain.isOk());
    const PlanReport optimal = mustRun(*chain, "optimal");
    for (const std::string& other : defaultComparePlanners(chain->size()))
      EXPECT_LE(optimal.dynamicPeakBytes, mustRun(*chain, other).dynamicPeakBytes) << name << " vs " << other;
    EXPECT_LT(optimal.dynamicPeakBytes, dynamicPeak(*chain, Plan{})) << name;
  }
}

}  // namespace
}  // namespace remat
