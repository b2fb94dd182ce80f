// The whole step on the CPU (docs/memory-model.md section 11): under every optimizer, foreach and
// gradient mode, each plan's two-step run measures the simulator's footprint and live-after op by
// op (the weight gradients made by B, the STEP op and its temporaries included), computes
// store-all's gradients bit for bit in the second step (so both steps' updates agreed), and
// reproduces its recomputes; the optimizer really changes the weights.
#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "executor_helpers.hpp"
#include "random_real_chain.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/random_chain.hpp"

namespace remat {
namespace {

const RunOptions kTwoSteps{.steps = 2, .digestGradients = true, .captureDigests = true};

// A fresh interpreter per plan: the weights move with every step, so runs must start alike.
Result<RunResult> runFresh(const Chain& chain, Device& device, const Plan& plan, std::uint64_t seed,
                           const RunOptions& options = kTwoSteps) {
  auto interp = Interpreter::create(chain, device, testing::seeded(seed));
  if (!interp) return interp.status();
  EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
  return (*interp)->run(plan, options);
}

void runEveryPlan(const Chain& built, std::uint64_t seed) {
  cpu::CpuDevice device({.poisonMemory = true, .threads = 1});
  const Chain chain = testing::fittedTo(built, device);
  ASSERT_EQ(chain.step, built.step);
  auto reference = runFresh(chain, device, Plan{}, seed);
  // The step ends in STEP exactly when there is an optimizer.
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  EXPECT_EQ(reference->timelines[0].entries.back().op.kind == OpKind::Step, hasOptimizerStep(chain.step));
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  for (const Timeline& t : reference->timelines) testing::expectMatchesSimulation(chain, Plan{}, t);
  for (const auto& [name, plan] : testing::plannerPlans(chain, {"sqrt", "linear", "optimal"})) {
    SCOPED_TRACE(chain.name + " " + name + " [" + formatCheckpointList(plan) + "]");
    auto run = runFresh(chain, device, plan, seed);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectReproducesStoreAll(chain, plan, *run, *reference);
  }
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

TEST(OptimizerRun, RandomRealChainsInEveryMode) {
  for (std::size_t mode = 0; mode < testing::kStepModeCount; ++mode) {
    const std::uint64_t seed = 1 + mode;
    auto chain = buildChain(testing::randomRealChainSpec(seed, 6 + seed % 5));
    ASSERT_TRUE(chain.isOk()) << chain.status().message();
    chain->step = testing::stepMode(mode);
    ASSERT_GT(chain->paramBytes(), 0u) << chain->name;
    SCOPED_TRACE(describeStepOptions(chain->step));
    runEveryPlan(*chain, seed);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(OptimizerRun, AbstractChainsInEveryMode) {
  for (std::size_t mode = 0; mode < testing::kStepModeCount; ++mode) {
    const Chain plain = makeRandomChain(mixedRandomChainOptions(5 + mode % 6, 300 + mode));
    const Chain chain = testing::withParameters(plain, 300 + mode, mode);
    SCOPED_TRACE(describeStepOptions(chain.step));
    runEveryPlan(chain, mode);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(OptimizerRun, ZooModelUnderAdamW) {
  auto spec = zooChain("resnet18", {.batch = 2, .resolution = 32, .numClasses = 10});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto chain = buildChain(*spec);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  chain->step = {OptimizerKind::AdamW, true, GradMode::OnBackward};
  runEveryPlan(*chain, 5);
}

// The first step's gradients come from the initial weights under every optimizer; the second's
// from the weights the first update left, so they differ from a run without an optimizer (whose
// weights stay; its steps still differ from each other by their dropout masks and labels).
TEST(OptimizerRun, WeightsChangeFromStepToStep) {
  auto built = buildChain(testing::randomRealChainSpec(3, 8));
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device({.threads = 1});
  Chain chain = testing::fittedTo(*built, device);
  auto digests = [&](OptimizerKind kind, int steps) {
    chain.step = {kind, true, GradMode::OnBackward};
    auto run = runFresh(chain, device, Plan{}, 9, {.steps = steps, .digestGradients = true});
    EXPECT_TRUE(run.isOk()) << run.status().message();
    return run.isOk() ? run->parameterGradientDigests : std::vector<std::uint64_t>{};
  };
  const auto firstWithout = digests(OptimizerKind::None, 1);
  const auto secondWithout = digests(OptimizerKind::None, 2);
  ASSERT_FALSE(firstWithout.empty());
  for (OptimizerKind kind : optimizerKinds()) {
    if (kind == OptimizerKind::None) continue;
    SCOPED_TRACE(optimizerName(kind));
    EXPECT_EQ(digests(kind, 1), firstWithout);
    const auto second = digests(kind, 2);
    for (std::size_t l = 0; l < second.size(); ++l)
      if (second[l] != 0) {
        EXPECT_NE(second[l], secondWithout[l]) << "layer " << l + 1;
      }
  }
}

// With gradients made on backward, the static block is the input and labels, the weights and the state only.
TEST(OptimizerRun, StaticBytesHoldTheStateNotTheGradients) {
  auto built = buildChain(testing::randomRealChainSpec(4, 8));
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device({.threads = 1});
  Chain chain = testing::fittedTo(*built, device);
  chain.step = {OptimizerKind::Adam, false, GradMode::OnBackward};
  auto interp = Interpreter::create(chain, device, testing::seeded(1));
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  const std::uint64_t labels = labelCount(chain) * sizeof(LabelIndex);  // int64, one per sample
  EXPECT_GT(labels, 0u);
  EXPECT_EQ((*interp)->staticBytes(), chain.inputBytes + labels + 3 * chain.paramBytes());
}

}  // namespace
}  // namespace remat
