// Seeded random chains, of real kinds and of abstract layers, run on the CPU under every planner's
// plan and under random checkpoint sets: gradients bitwise equal to store-all's, recomputes
// reproduce the originals, measured footprints and live-after equal the simulator's op by op.
#include <gtest/gtest.h>

#include "executor_helpers.hpp"
#include "random_real_chain.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/random_chain.hpp"

namespace remat {
namespace {

// Planner plans plus `extra` random checkpoint sets.
std::vector<std::pair<std::string, Plan>> plansFor(const Chain& chain, std::uint64_t seed, int extra) {
  auto plans = testing::plannerPlans(chain, testing::allPlanners());
  SplitMix64 rng(seed + 1000);
  for (int i = 0; i < extra; ++i) {
    Plan plan;
    for (std::size_t c = 1; c < chain.size(); ++c)
      if (rng.chance(1, 3)) plan.checkpoints.push_back(c);
    plans.emplace_back("random", plan);
  }
  return plans;
}

// On `threads` threads: results may differ between thread counts, but at any one count every plan
// must compute store-all's gradients bit for bit.
void runAllPlans(const Chain& built, std::uint64_t seed, int threads = 0) {
  cpu::CpuDevice device({.poisonMemory = true, .threads = threads});
  const Chain chain = testing::fittedTo(built, device);
  auto interp = Interpreter::create(chain, device, testing::seeded(seed));
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  const RunOptions options{.digestGradients = true, .captureDigests = true};
  auto reference = (*interp)->run(Plan{}, options);
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  testing::expectMatchesSimulation(chain, Plan{}, reference->timelines[0]);
  for (const auto& [name, plan] : plansFor(chain, seed, 3)) {
    SCOPED_TRACE(chain.name + " " + name + " [" + formatCheckpointList(plan) + "]");
    auto run = (*interp)->run(plan, options);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectReproducesStoreAll(chain, plan, *run, *reference);
  }
  EXPECT_EQ(device.allocator().bytesHeld(), (*interp)->staticBytes());
}

TEST(RandomRealChains, EveryPlanMatchesStoreAllAndTheSimulator) {
  std::size_t kindsSeen = 0;
  std::vector<bool> seen(16, false);
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    const ChainSpec spec = testing::randomRealChainSpec(seed, 8 + seed % 7);
    auto chain = buildChain(spec);
    ASSERT_TRUE(chain.isOk()) << chain.status().message();
    for (const ChainLayer& l : chain->layers) seen[static_cast<std::size_t>(l.kind)] = true;
    // One thread and two (oneDNN splits reductions differently): each deterministic in itself.
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      runAllPlans(*chain, seed, threads);
    }
  }
  for (bool s : seen) kindsSeen += s;
  // Every real kind but flatten (folded away) shows up somewhere in the set.
  EXPECT_EQ(kindsSeen, 12u);
}

TEST(RandomAbstractChains, EveryPlanMatchesStoreAllAndTheSimulator) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    RandomChainOptions options = mixedRandomChainOptions(4 + seed % 9, seed);
    options.unitBytes = 256 + 4 * (seed % 5) + (seed % 3);  // sizes that are not multiples of 4 too
    Chain chain = makeRandomChain(options);
    for (std::size_t l = 1; l <= chain.size(); ++l)
      if (seed % 2 == 0) chain.layers[l - 1].numbers.paramBytes = 8 * l + seed % 4;
    runAllPlans(chain, seed);
  }
}

}  // namespace
}  // namespace remat
