// The interpreter on abstract chains: golden.json's examples and seeded random chains. Measured
// footprints equal the simulator's op by op, and every plan computes store-all's gradients.
#include "remat/exec/interpreter.hpp"

#include <gtest/gtest.h>

#include <atomic>

#include "chain_helpers.hpp"
#include "executor_helpers.hpp"
#include "golden.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/random_chain.hpp"

namespace remat {
namespace {

TEST(InterpreterGolden, MeasuredEqualsPredictedForEveryPlan) {
  std::size_t plans = 0;
  for (const auto& example : testing::goldenExamples()) {
    const Chain chain = testing::chainFromJson(example["chain"]);
    cpu::CpuDevice device({.poisonMemory = true});
    auto interp = Interpreter::create(chain, device, testing::seeded(7));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    const RunOptions options{.captureGradients = true, .captureDigests = true};
    auto reference = (*interp)->run(Plan{}, options);
    ASSERT_TRUE(reference.isOk()) << reference.status().message();
    for (const auto& p : example["plans"]) {
      Plan plan{p["checkpoints"].get<std::vector<std::size_t>>()};
      auto run = (*interp)->run(plan, options);
      ASSERT_TRUE(run.isOk()) << run.status().message();
      ASSERT_EQ(run->timelines.size(), 1u);
      EXPECT_EQ(run->timelines[0].source, "cpu");
      testing::expectReproducesStoreAll(chain, plan, *run, *reference);
      ++plans;
    }
    EXPECT_EQ(device.allocator().bytesHeld(), chain.staticBytes()) << chain.name;
  }
  EXPECT_GT(plans, 10u);
}

// A small real chain: conv, batch norm, relu, max pool, dropout, linear.
Chain smallRealChain() {
  auto chain = parseChain(R"({"format": "remat-chain/1", "name": "small", "input": {"shape": [2, 3, 8, 8]},
    "layers": [{"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
               {"name": "bn", "kind": "batchnorm"}, {"name": "relu", "kind": "relu"},
               {"name": "pool", "kind": "maxpool", "kernel": 2, "stride": 2},
               {"name": "drop", "kind": "dropout", "p": 0.5}, {"name": "flat", "kind": "flatten"},
               {"name": "fc", "kind": "linear", "out_features": 5}]})",
                          "small");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  if (!chain) return Chain{};
  cpu::CpuDevice device;
  return testing::fittedTo(*chain, device);  // the CPU's workspaces written in
}

TEST(Interpreter, StepsRepeatTheSameMemoryAndStaticBytesAreTheModels) {
  const Chain chain = smallRealChain();
  cpu::CpuDevice device({.poisonMemory = true});
  auto interp = Interpreter::create(chain, device);
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
  RunOptions options;
  options.steps = 3;
  options.planner = "mine";
  auto run = (*interp)->run(Plan{{2, 4}}, options);
  ASSERT_TRUE(run.isOk()) << run.status().message();
  ASSERT_EQ(run->timelines.size(), 3u);
  ASSERT_EQ(run->stepSeconds.size(), 3u);
  EXPECT_EQ(run->labelBytes, 2u * 8u);  // int64, one per sample: a part of the static bytes
  EXPECT_EQ(staticBreakdown(chain).labelBytes, run->labelBytes);
  for (int step = 0; step < 3; ++step) {
    const Timeline& t = run->timelines[step];
    EXPECT_EQ(t.run, step);
    EXPECT_EQ(t.planner, "mine");
    EXPECT_EQ(t.source, "cpu");
    EXPECT_EQ(t.staticBytes, chain.staticBytes());
    EXPECT_EQ(t.layerNames[0], "conv");
    testing::expectMatchesSimulation(chain, Plan{{2, 4}}, t);
    double total = 0;
    for (const TimelineEntry& e : t.entries) total += e.timeUs;
    EXPECT_GT(total, 0.0);
  }
  EXPECT_EQ(device.allocator().bytesHeld(), chain.staticBytes());
}

TEST(Interpreter, SeedsAndLabelsChangeTheGradients) {
  const Chain chain = smallRealChain();
  auto gradientsWith = [&](std::uint64_t seed, std::vector<LabelIndex> labels) {
    cpu::CpuDevice device({.poisonMemory = true});
    auto run = runPlan(chain, Plan{}, device, {.seed = seed, .labels = std::move(labels)}, {.digestGradients = true});
    EXPECT_TRUE(run.isOk()) << run.status().message();
    return run.isOk() ? run->parameterGradientDigests : std::vector<std::uint64_t>{};
  };
  const auto a = gradientsWith(1, {0, 1});
  EXPECT_EQ(a, gradientsWith(1, {0, 1}));
  EXPECT_NE(a, gradientsWith(2, {0, 1}));
  EXPECT_NE(a, gradientsWith(1, {3, 1}));
  cpu::CpuDevice device;
  InterpreterOptions wrong;
  wrong.labels = {1, 2, 3};
  EXPECT_EQ(Interpreter::create(chain, device, wrong).status().code(), ErrorCode::InvalidInput);
  InterpreterOptions outOfRange;
  outOfRange.labels = {0, 5};
  auto interp = Interpreter::create(chain, device, outOfRange);
  ASSERT_TRUE(interp.isOk());
  auto run = (*interp)->run(Plan{});
  ASSERT_FALSE(run.isOk());
  EXPECT_NE(run.status().message().find("label 5"), std::string::npos) << run.status().message();
  EXPECT_EQ(device.allocator().bytesHeld(), chain.staticBytes()) << "a failed step leaks nothing";
}

TEST(Interpreter, RejectsBadPlansAndTooSmallWorkspaces) {
  const Chain chain = smallRealChain();
  cpu::CpuDevice device;
  auto interp = Interpreter::create(chain, device);
  ASSERT_TRUE(interp.isOk());
  EXPECT_EQ((*interp)->run(Plan{{4, 2}}).status().code(), ErrorCode::InvalidInput);
  EXPECT_EQ((*interp)->run(Plan{{6}}).status().code(), ErrorCode::InvalidInput);
  RunOptions zeroSteps;
  zeroSteps.steps = 0;
  EXPECT_EQ((*interp)->run(Plan{}, zeroSteps).status().code(), ErrorCode::InvalidInput);

  // A residual block's arena (and its inner scratch) is the CPU kernel's workspace: a chain
  // claiming less cannot run.
  auto spec = parseChainSpec(R"({"format": "remat-chain/1", "name": "block", "input": {"shape": [2, 4, 6, 6]},
    "layers": [{"name": "b", "kind": "basic_block", "out_channels": 4, "stride": 1}]})",
                             "block");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  spec->layers[0].hasMeasuredWorkspace = true;
  spec->layers[0].numbers.fwdWorkspaceBytes = 16;
  spec->layers[0].numbers.bwdWorkspaceBytes = 1 << 20;
  auto block = buildChain(*spec);
  ASSERT_TRUE(block.isOk()) << block.status().message();
  cpu::CpuDevice other;
  auto refused = Interpreter::create(*block, other);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("forward workspace"), std::string::npos) << refused.status().message();
  EXPECT_EQ(other.allocator().bytesHeld(), 0u);

  // A float16 chain has no CPU kernels.
  auto half = parseChain(R"({"format": "remat-chain/1", "name": "half", "input": {"shape": [2, 3], "dtype": "float16"},
    "layers": [{"name": "fc", "kind": "linear", "out_features": 2}]})",
                         "half");
  ASSERT_TRUE(half.isOk()) << half.status().message();
  auto f16 = Interpreter::create(*half, other);
  ASSERT_FALSE(f16.isOk());
  EXPECT_NE(f16.status().message().find("float32"), std::string::npos);
}

// Running out of memory while the static tensors are uploaded gives back what was allocated.
TEST(Interpreter, AFailedCreateLeavesTheDeviceEmpty) {
  const Chain chain = smallRealChain();
  // chain.inputBytes: x0 fits, its int64 labels (static, right after it) do not.
  for (std::uint64_t capacity : {std::uint64_t{1}, chain.inputBytes, chain.staticBytes() - 1}) {
    cpu::CpuDevice device({.capacityBytes = capacity});
    auto interp = Interpreter::create(chain, device);
    ASSERT_FALSE(interp.isOk()) << "capacity " << capacity << " (the static bytes, labels included, do not fit)";
    EXPECT_EQ(interp.status().code(), ErrorCode::OutOfMemory) << interp.status().message();
    EXPECT_NE(interp.status().message().find("static tensors"), std::string::npos) << interp.status().message();
    EXPECT_EQ(device.allocator().bytesHeld(), 0u) << "capacity " << capacity;
    EXPECT_EQ(device.allocator().buffersHeld(), 0u) << "capacity " << capacity;
  }
  cpu::CpuDevice exact({.capacityBytes = chain.staticBytes()});
  EXPECT_TRUE(Interpreter::create(chain, exact).isOk()) << "the model's static bytes are all it needs";
}

// With a device capacity between two plans' peaks, the store-all plan runs out of memory and a
// checkpointed plan with a lower predicted peak fits: the executor allocates what the model says.
TEST(Interpreter, CapacityBetweenTwoPeaksSeparatesThePlans) {
  const Chain chain = testing::chainFromJson(testing::goldenExamples().at(0).at("chain"));
  const Plan storeAll{}, checkpointed{{2}};
  const std::uint64_t high = dynamicPeak(chain, storeAll), low = dynamicPeak(chain, checkpointed);
  ASSERT_GT(high, low);
  cpu::CpuDevice device({.poisonMemory = true, .capacityBytes = chain.staticBytes() + low});
  auto interp = Interpreter::create(chain, device);
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  auto failed = (*interp)->run(storeAll);
  ASSERT_FALSE(failed.isOk());
  EXPECT_EQ(failed.status().code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(device.allocator().bytesHeld(), chain.staticBytes());
  auto fits = (*interp)->run(checkpointed);
  ASSERT_TRUE(fits.isOk()) << fits.status().message();
  EXPECT_EQ(fits->timelines[0].dynamicPeakBytes(), low);
}

// The modelled cost RunProgress counts for one step of the plan: fwd_cost per F, R and RE op,
// bwd_cost per B op.
double stepCost(const Chain& chain, const Plan& plan) {
  double cost = 0.0;
  for (const Op& op : buildOpSequence(chain, plan))
    if (op.kind != OpKind::Seed) cost += op.kind == OpKind::B ? chain.at(op.layer).bwdCost : chain.at(op.layer).fwdCost;
  return cost;
}

// Progress comes before every op of every step, in order, with the op about to run and the
// modelled cost done so far; the estimate is unknown before anything is done.
TEST(Interpreter, ReportsProgressBeforeEveryOp) {
  const Chain chain = smallRealChain();
  const Plan plan{{2, 4}};
  const std::size_t opCount = buildOpSequence(chain, plan).size();
  cpu::CpuDevice device;
  auto interp = Interpreter::create(chain, device);
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  std::vector<RunProgress> seen;
  RunOptions options;
  options.steps = 2;
  options.progress = [&](const RunProgress& p) { seen.push_back(p); };
  auto run = (*interp)->run(plan, options);
  ASSERT_TRUE(run.isOk()) << run.status().message();
  ASSERT_EQ(seen.size(), 2 * opCount);
  const double total = 2 * stepCost(chain, plan);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const RunProgress& p = seen[i];
    EXPECT_EQ(p.step, static_cast<int>(i / opCount));
    EXPECT_EQ(p.steps, 2);
    EXPECT_EQ(p.opIndex, i % opCount);
    EXPECT_EQ(p.opCount, opCount);
    EXPECT_EQ(p.op, run->timelines[p.step].entries[p.opIndex].op);
    EXPECT_DOUBLE_EQ(p.costTotal, total);
    if (i > 0) {
      EXPECT_GE(p.costDone, seen[i - 1].costDone);
    }
    EXPECT_LT(p.fraction(), 1.0);
  }
  EXPECT_EQ(seen.front().costDone, 0.0);
  EXPECT_LT(seen.front().secondsLeft(), 0.0) << "no estimate before the first op has run";
  EXPECT_NEAR(seen[opCount].fraction(), 0.5, 1e-12) << "the second step starts half way";
  EXPECT_GE(seen.back().secondsLeft(), 0.0);
}

// A cancel lands before the next op: the op in flight finishes, nothing after it runs, and the
// step gives back every byte it held.
TEST(Interpreter, CancelStopsBeforeTheNextOpAndFreesTheStep) {
  const Chain chain = smallRealChain();
  const Plan plan{{2, 4}};
  const std::size_t opCount = buildOpSequence(chain, plan).size();
  cpu::CpuDevice device({.poisonMemory = true});
  auto interp = Interpreter::create(chain, device);
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  std::atomic<bool> cancel{false};
  std::vector<std::size_t> started;
  RunOptions options;
  options.cancel = &cancel;
  options.progress = [&](const RunProgress& p) {
    started.push_back(p.opIndex);
    if (p.opIndex == 5) cancel = true;  // while F(6) is about to run: it finishes, B never starts
  };
  auto run = (*interp)->run(plan, options);
  ASSERT_FALSE(run.isOk());
  EXPECT_EQ(run.status().code(), ErrorCode::Cancelled);
  EXPECT_NE(run.status().message().find("before op 7 of " + std::to_string(opCount)), std::string::npos)
      << run.status().message();
  EXPECT_EQ(started.back(), 5u);
  EXPECT_EQ(device.allocator().bytesHeld(), chain.staticBytes()) << "only the static tensors, labels included";

  // Set before the run: no op runs at all; the interpreter stays usable.
  started.clear();
  auto before = (*interp)->run(plan, options);
  EXPECT_EQ(before.status().code(), ErrorCode::Cancelled);
  EXPECT_TRUE(started.empty());
  cancel = false;
  options.progress = {};
  auto again = (*interp)->run(plan, options);
  ASSERT_TRUE(again.isOk()) << again.status().message();
  testing::expectMatchesSimulation(chain, plan, again->timelines[0]);
}

}  // namespace
}  // namespace remat
