// Every zoo model at batch 2 and its smallest resolution, run on the CPU under every planner's
// plan: the gradients are bitwise store-all's, every recompute reproduces the original tensors
// and the measured footprint and live-after of every op equal the simulator's.
#include <gtest/gtest.h>

#include <chrono>

#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/zoo.hpp"

namespace remat {
namespace {

class ZooExecution : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooExecution, EveryPlanMatchesStoreAllAndTheSimulator) {
  const std::string name = GetParam();
  std::int64_t resolution = 0;
  for (const ZooEntry& e : zooModels())
    if (e.name == name) resolution = e.minResolution;
  auto spec = zooChain(name, {.batch = 2, .resolution = resolution, .numClasses = 10});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto built = buildChain(*spec);
  ASSERT_TRUE(built.isOk()) << built.status().message();

  const auto start = std::chrono::steady_clock::now();
  // One thread: ctest runs test programs side by side, and the random-chain test covers two.
  cpu::CpuDevice device({.poisonMemory = true, .threads = 1});
  // Planned and predicted with the CPU's workspaces, as `remat run` and the explorer do.
  const Chain fitted = testing::fittedTo(*built, device);
  const Chain* chain = &fitted;
  auto interp = Interpreter::create(*chain, device, testing::seeded(11));
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  EXPECT_EQ((*interp)->staticBytes(), chain->staticBytes());

  RunOptions options{.digestGradients = true, .captureDigests = true};
  const auto plans = testing::plannerPlans(*chain, testing::allPlanners());
  ASSERT_FALSE(plans.empty());
  ASSERT_TRUE(plans.front().second.checkpoints.empty());  // "none" first: the reference
  auto reference = (*interp)->run(Plan{}, options);
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  testing::expectMatchesSimulation(*chain, Plan{}, reference->timelines[0]);
  ASSERT_EQ(reference->parameterGradientDigests.size(), chain->size());

  for (std::size_t i = 1; i < plans.size(); ++i) {
    const auto& [planners, plan] = plans[i];
    SCOPED_TRACE(name + " " + planners + " [" + formatCheckpointList(plan) + "]");
    options.planner = planners;
    auto run = (*interp)->run(plan, options);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectReproducesStoreAll(*chain, plan, *run, *reference);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %zu layers, %zu distinct plans, %.2f s\n", name.c_str(), chain->size(), plans.size(), seconds);
}

std::vector<std::string> zooNames() {
  std::vector<std::string> names;
  // The token models are left out: GPT-2 (124 M parameters, a 50,257-word head) and BERT-base run
  // at batch 1 in tests/exec/transformer_model_test.cpp and tests/cli/transformer_cli_test.cpp.
  for (const ZooEntry& e : zooModels())
    if (!e.tokenModel) names.push_back(e.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllModels, ZooExecution, ::testing::ValuesIn(zooNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace remat
