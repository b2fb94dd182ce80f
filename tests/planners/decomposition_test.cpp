// The decomposition of E that the optimal planner rests on (docs/memory-model.md section 3, with
// its dead-checkpoint case), checked against the simulator op by op on thousands of random chains and
// plans, before anything is built on it.
#include <gtest/gtest.h>

#include <algorithm>

#include "chain_helpers.hpp"
#include "golden.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/random_chain.hpp"
#include "remat/planners/planners.hpp"

namespace remat {
namespace {

using testing::numbers;

Plan randomPlan(SplitMix64& rng, std::size_t n) {
  Plan plan;
  const std::uint64_t density = 1 + rng.below(4);  // sparse to dense plans
  for (std::size_t c = 1; c < n; ++c)
    if (rng.chance(density, 5)) plan.checkpoints.push_back(c);
  return plan;
}

// The segment index of each op: F(l), R(l), RE(l), B(l) belong to the segment containing l,
// SEED to the last.
std::size_t segmentOf(const Plan& plan, const Op& op) {
  if (op.kind == OpKind::Seed) return plan.checkpoints.size();
  const auto& c = plan.checkpoints;
  return static_cast<std::size_t>(std::lower_bound(c.begin(), c.end(), op.layer) - c.begin());
}

// The spec's formula as written: every checkpoint left of the segment counts a(c).
std::uint64_t specFormulaPeak(const Chain& chain, const Plan& plan) {
  std::uint64_t peak = 0, left = 0;
  std::size_t start = 0;
  for (std::size_t j = 0; j <= plan.checkpoints.size(); ++j) {
    const std::size_t end = j < plan.checkpoints.size() ? plan.checkpoints[j] : chain.size();
    peak = std::max(peak, left + segmentPeaks(chain, start)[end - start - 1]);
    if (start > 0) left += chain.outBytes(start);
    start = end;
  }
  return peak;
}

// True when some checkpoint other than the last has no reader in the backward pass (nothing in
// segment (c, next] recomputes from it and neither B(c+1) nor B(c) reads it; B(c) reads RE(c)'s
// x(c) instead when c has extras, memory-model.md 2.3).
bool hasDeadCheckpoint(const Chain& chain, const Plan& plan) {
  const auto& c = plan.checkpoints;
  for (std::size_t m = 0; m + 1 < c.size(); ++m) {
    const std::size_t i = c[m], k = c[m + 1];
    const bool backwardReadsIt = chain.at(i).needsOutput && chain.at(i).extraBytes == 0;
    const bool read = chain.at(i + 1).needsInput || backwardReadsIt || k > i + 1 || chain.at(k).extraBytes > 0;
    if (!read) return true;
  }
  return false;
}

TEST(Decomposition, EveryPlanOfSmallChainsOpByOp) {
  // Exhaustive over plans for 600 chains of 1..10 layers: per segment, the largest footprint
  // minus the held checkpoints to its left equals seg(c_j, c_(j+1)).
  std::size_t plansChecked = 0;
  for (std::uint64_t seed = 0; seed < 600; ++seed) {
    const std::size_t n = 1 + seed % 10;
    Chain chain = makeRandomChain(mixedRandomChainOptions(n, seed));
    // Odd seeds: parameters and one of the 20 step modes (weight gradients, optimizer step).
    if (seed % 2 == 1) chain = testing::withParameters(chain, seed, seed / 2);
    std::vector<std::vector<std::uint64_t>> seg(n);
    for (std::size_t i = 0; i < n; ++i) seg[i] = segmentPeaks(chain, i);
    for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << (n - 1)); ++mask) {
      Plan plan;
      for (std::size_t c = 1; c < n; ++c)
        if (mask >> (c - 1) & 1) plan.checkpoints.push_back(c);
      auto sim = simulate(chain, plan);
      ASSERT_TRUE(sim.isOk());
      const std::size_t segments = plan.checkpoints.size() + 1;
      std::vector<std::uint64_t> held(segments, 0), local(segments, 0);
      std::size_t start = 0;
      for (std::size_t j = 0; j < segments; ++j) {
        const std::size_t end = j < plan.checkpoints.size() ? plan.checkpoints[j] : n;
        if (j + 1 < segments) held[j + 1] = held[j] + heldCheckpointBytes(chain, start, end);
        start = end;
      }
      for (const TimelineEntry& e : sim->timeline.entries) {
        if (e.op.kind == OpKind::Step) {
          // No segment's: its footprint is the floor, the same under every plan (section 11.4).
          ASSERT_EQ(e.footprintBytes, optimizerStepFootprint(chain));
          continue;
        }
        const std::size_t j = segmentOf(plan, e.op);
        ASSERT_GE(e.footprintBytes, held[j]) << chain.name << " plan " << formatCheckpointList(plan);
        local[j] = std::max(local[j], e.footprintBytes - held[j]);
      }
      start = 0;
      for (std::size_t j = 0; j < segments; ++j) {
        const std::size_t end = j < plan.checkpoints.size() ? plan.checkpoints[j] : n;
        ASSERT_EQ(local[j], seg[start][end - start - 1])
            << chain.name << " plan {" << formatCheckpointList(plan) << "} segment (" << start << ", " << end << "]";
        start = end;
      }
      ASSERT_EQ(decomposedPeak(chain, plan), sim->dynamicPeakBytes) << chain.name << " " << formatCheckpointList(plan);
      ++plansChecked;
    }
  }
  EXPECT_GT(plansChecked, 50000u);
}

TEST(Decomposition, RandomPlansOfLongerChains) {
  SplitMix64 rng(7);
  for (std::uint64_t seed = 0; seed < 3000; ++seed) {
    const std::size_t n = 10 + seed % 71;
    Chain chain = makeRandomChain(mixedRandomChainOptions(n, 1000 + seed));
    if (seed % 2 == 1) chain = testing::withParameters(chain, seed, seed / 2);
    const Plan plan = randomPlan(rng, n);
    ASSERT_EQ(decomposedPeak(chain, plan), dynamicPeak(chain, plan)) << chain.name << " " << formatCheckpointList(plan);
  }
}

TEST(Decomposition, GoldenPlans) {
  for (const auto& example : testing::goldenExamples()) {
    const Chain chain = testing::chainFromJson(example["chain"]);
    for (const auto& p : example["plans"]) {
      const Plan plan{p["checkpoints"].get<std::vector<std::size_t>>()};
      EXPECT_EQ(decomposedPeak(chain, plan), p["dynamic_peak_bytes"].get<std::uint64_t>()) << chain.name;
    }
  }
}

// The spec's sum of a(c) over every checkpoint left of a segment is exact unless a checkpoint has
// no reader in the backward pass: such a checkpoint is freed right after F(c+1).
TEST(Decomposition, SpecFormulaHoldsWithoutDeadCheckpoints) {
  SplitMix64 rng(11);
  std::size_t differences = 0;
  for (std::uint64_t seed = 0; seed < 2000; ++seed) {
    const Chain chain = makeRandomChain(mixedRandomChainOptions(2 + seed % 30, 5000 + seed));
    const Plan plan = randomPlan(rng, chain.size());
    const std::uint64_t truth = dynamicPeak(chain, plan);
    const std::uint64_t spec = specFormulaPeak(chain, plan);
    if (!hasDeadCheckpoint(chain, plan)) {
      ASSERT_EQ(spec, truth) << chain.name << " " << formatCheckpointList(plan);
    } else {
      ASSERT_GE(spec, truth);
      differences += spec != truth;
    }
  }
  EXPECT_GT(differences, 0u) << "the random chains no longer exercise dead checkpoints";
}

TEST(Decomposition, DeadCheckpointExample) {
  // x(1) is a conv output read by nobody's backward: layer 2 (relu-like) does not need its input,
  // layer 1 not its output, and checkpoint 2 follows at once, so nothing recomputes from x(1).
  const Chain chain = makeAbstractChain(
      "dead", 100, {numbers(1000, true, false), numbers(10, false, false), numbers(10, true, false), numbers(10)});
  const Plan plan{{1, 2, 3}};
  EXPECT_EQ(heldCheckpointBytes(chain, 1, 2), 0u);
  EXPECT_EQ(heldCheckpointBytes(chain, 2, 3), 10u);
  EXPECT_EQ(decomposedPeak(chain, plan), dynamicPeak(chain, plan));
  EXPECT_GT(specFormulaPeak(chain, plan), dynamicPeak(chain, plan));
}

}  // namespace
}  // namespace remat
