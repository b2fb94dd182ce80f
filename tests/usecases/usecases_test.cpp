// The use cases every front end calls: opening a chain source, planning and scoring, planning to fit
// a capacity, measuring a plan on a device (here the CPU) and comparing it with the prediction.
#include <gtest/gtest.h>

#include <atomic>
#include <limits>

#include "chain_helpers.hpp"
#include "remat/base/units.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/profiler.hpp"
#include "remat/planners/registry.hpp"
#include "remat/usecases/chain_source.hpp"
#include "remat/usecases/measuring.hpp"
#include "remat/usecases/planning.hpp"

namespace remat {
namespace {

const std::string kSmallCnn = REMAT_SOURCE_DIR "/resources/examples/small_cnn.json";

TEST(ChainSource, ZooModelsChainFilesAndTheirBatch) {
  EXPECT_EQ(chainSourceKind("zoo:vgg16"), ChainSourceKind::Zoo);
  EXPECT_EQ(chainSourceKind(kSmallCnn), ChainSourceKind::ChainFile);
  Result<Chain> zoo = openChainSource("zoo:resnet18", ChainSourceOptions{.batch = 4});
  ASSERT_TRUE(zoo.isOk()) << zoo.status().message();
  EXPECT_EQ(zoo->inputShape.at(0), 4);
  Result<Chain> file = openChainSource(kSmallCnn);
  ASSERT_TRUE(file.isOk()) << file.status().message();
  EXPECT_GT(file->size(), 5u);
  // A chain file states its batch; a zoo model or a file that is not there says what it is.
  const Status batched = openChainSource(kSmallCnn, ChainSourceOptions{.batch = 8}).status();
  EXPECT_EQ(batched.code(), ErrorCode::InvalidInput);
  EXPECT_NE(batched.message().find("a chain file states its batch"), std::string::npos) << batched.message();
  EXPECT_FALSE(openChainSource("zoo:no_such_model").isOk());
  EXPECT_EQ(openChainSource("/nonexistent/chain.json").status().code(), ErrorCode::IoError);
  ZooOptions options;
  options.batch = 2;
  options.resolution = 64;
  Result<Chain> small = openZooChain("resnet18", options);
  ASSERT_TRUE(small.isOk()) << small.status().message();
  EXPECT_EQ(small->inputShape, (Shape{2, 3, 64, 64}));
}

TEST(PlanAndScore, ThePlannersPlanWithItsSimulationAndTrace) {
  const Chain chain = testing::zooBuilt("resnet18", {.batch = 2, .resolution = 64});
  LivenessTrace trace;
  Result<ScoredPlan> scored = planAndScore(chain, "linear", {}, &trace);
  ASSERT_TRUE(scored.isOk()) << scored.status().message();
  EXPECT_EQ(scored->report.planner, "linear");
  EXPECT_EQ(scored->report.objective, Objective::R);
  EXPECT_EQ(scored->simulation.plan, scored->report.plan);
  EXPECT_EQ(scored->simulation.dynamicPeakBytes, scored->report.dynamicPeakBytes);
  EXPECT_EQ(scored->simulation.timeline.planner, "linear");
  EXPECT_EQ(trace.ops.size(), scored->simulation.timeline.entries.size());
  EXPECT_EQ(trace.footprint(scored->simulation.peakOpIndex), scored->simulation.dynamicPeakBytes);
  EXPECT_EQ(planAndScore(chain, "nonsense").status().code(), ErrorCode::InvalidInput);
  const std::atomic<bool> cancelled{true};
  PlannerOptions options;
  options.cancelFlag = &cancelled;
  EXPECT_EQ(planAndScore(chain, "sqrt", options).status().code(), ErrorCode::Cancelled);
  Result<Simulation> listed = scorePlan(chain, Plan{{3, 9}}, "checkpoints");
  ASSERT_TRUE(listed.isOk());
  EXPECT_EQ(listed->timeline.planner, "checkpoints");
}

TEST(PlanToFit, TheBudgetIsTheCapacityLessTheStaticMemory) {
  const Chain chain = testing::zooBuilt("resnet18", {.batch = 2, .resolution = 64});
  const std::uint64_t staticBytes = chain.staticBytes();
  const Status tooSmall = budgetForCapacity(chain, staticBytes - 1).status();
  EXPECT_EQ(tooSmall.message(), "no plan fits in " + formatBytes(staticBytes - 1) + ": static memory alone is " +
                                    formatBytes(staticBytes) + " (input + labels + parameters + parameter gradients)");
  EXPECT_NE(budgetForCapacity(chain, 10, "the 10 B cpu has available").status().message().find("the 10 B cpu"),
            std::string::npos);
  // The peak of linear's plan, which is below store-all's: a capacity some plan fits.
  Result<ScoredPlan> linear = planAndScore(chain, "linear");
  ASSERT_TRUE(linear.isOk());
  const std::uint64_t capacity = staticBytes + linear->report.dynamicPeakBytes;
  Result<CapacityBudget> budget = budgetForCapacity(chain, capacity);
  ASSERT_TRUE(budget.isOk()) << budget.status().message();
  EXPECT_EQ(budget->budgetBytes, capacity - staticBytes);
  EXPECT_EQ(budget->planner, budgetPlannerName(capacity - staticBytes));
  EXPECT_EQ(budget->planner, "budget:" + std::to_string(capacity - staticBytes));
  Result<PlanReport> fitted = planToFit(chain, *budget);
  ASSERT_TRUE(fitted.isOk()) << fitted.status().message();
  EXPECT_LE(fitted->peakBytes(), capacity);
  // No plan fits in the static memory plus one byte: the refusal says what the capacity was.
  Result<CapacityBudget> tiny = budgetForCapacity(chain, staticBytes + 1);
  ASSERT_TRUE(tiny.isOk());
  const Status refused = planToFit(chain, *tiny, "--fit x").status();
  EXPECT_EQ(refused.message().rfind("--fit x (minus " + formatBytes(staticBytes) + " static): ", 0), 0u)
      << refused.message();
}

Timeline timelineOf(std::vector<std::uint64_t> footprints) {
  Timeline t;
  for (std::size_t i = 0; i < footprints.size(); ++i)
    t.entries.push_back({Op{OpKind::F, i + 1}, footprints[i], 0, 0.0});
  return t;
}

TEST(PredictionCheck, SaysWhichStepsDifferAndWhere) {
  const Timeline predicted = timelineOf({10, 20, 30, 40});
  const PredictionCheck check =
      checkPrediction(predicted, {timelineOf({10, 20, 30, 40}), timelineOf({10, 20, 31, 40}), timelineOf({10})});
  EXPECT_EQ(check.firstMismatch, (std::vector<std::size_t>{std::string::npos, 2, 0}));
  EXPECT_EQ(check.mismatchedSteps(), 2u);
  EXPECT_FALSE(check.matches());
  EXPECT_EQ(check.firstMismatchOfAnyStep(), 2u);
  EXPECT_EQ(check.measuredDynamicPeakBytes, 40u);
  EXPECT_TRUE(checkPrediction(predicted, {predicted, predicted}).matches());
}

TEST(MeasurePlan, OnTheCpuEveryStepEqualsThePrediction) {
  cpu::CpuDevice device;
  Result<Chain> chain = openChainSource(kSmallCnn);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  Result<WorkspaceFit> fit = fitWorkspacesToDevice(*chain, device);
  ASSERT_TRUE(fit.isOk()) << fit.status().message();
  MeasureOptions options;
  options.steps = 2;
  options.planner = "mine";
  int beforeRun = 0;
  options.beforeRun = [&beforeRun] {
    ++beforeRun;
    return Status::ok();
  };
  Result<MeasuredPlan> measured = measurePlan(device, fit->chain, Plan{{3}}, options);
  ASSERT_TRUE(measured.isOk()) << measured.status().message();
  EXPECT_EQ(beforeRun, 1);
  EXPECT_EQ(measured->run.timelines.size(), 2u);
  EXPECT_TRUE(measured->check.matches());
  EXPECT_EQ(measured->check.measuredDynamicPeakBytes, measured->predicted.dynamicPeakBytes);
  EXPECT_EQ(measured->predicted.timeline.planner, "mine");
  EXPECT_EQ(measured->run.timelines.front().planner, "mine");
  // What stops before the steps stops the measurement, with nothing run.
  options.beforeRun = [] { return Status::invalid("not now"); };
  EXPECT_EQ(measurePlan(device, fit->chain, Plan{{3}}, options).status().message(), "not now");
  // A plan the chain cannot take is refused before anything runs.
  EXPECT_EQ(measurePlan(device, fit->chain, Plan{{fit->chain.size()}}, options).status().code(),
            ErrorCode::InvalidInput);
}

}  // namespace
}  // namespace remat
