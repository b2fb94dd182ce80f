// `remat run`, end to end through runCli: predicted and measured peaks side by side, the timeline
// files, and the errors (no plan, two plans, a bad device, no usable GPU).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_progress.hpp"
#include "cli_runner.hpp"
#include "remat/devices/devices.hpp"
#include "remat/report/exporters.hpp"

namespace remat {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::runRemat;

class RunCli : public testing::CliTest {
 protected:
  // A small real chain exported by the zoo (batch 2, the smallest resolution).
  std::string smallZooChain(const std::string& model, const std::string& resolution) {
    const std::string file = path(model + ".json");
    const auto result =
        runRemat({"zoo", "export", model, "--batch", "2", "--resolution", resolution, "--output", file});
    EXPECT_EQ(result.exitCode, 0) << result.err;
    return file;
  }
};

TEST_F(RunCli, GoldenChainsMeasureWhatTheModelPredicts) {
  for (const auto& [chain, checkpoints, plan] : goldenPlans()) {
    const auto result = runRemat({"run", chain, "--checkpoints", checkpoints, "--device", "cpu", "--json",
                                  "--optimizer", "none", "--grads", "in-place"});
    ASSERT_EQ(result.exitCode, 0) << result.err;
    const json out = json::parse(result.out);
    EXPECT_EQ(out["measured_dynamic_peak_bytes"], plan["dynamic_peak_bytes"]);
    EXPECT_EQ(out["predicted_dynamic_peak_bytes"], plan["dynamic_peak_bytes"]);
    EXPECT_EQ(out["matches_prediction"], true);
    EXPECT_EQ(out["device"], "cpu");
  }
}

TEST_F(RunCli, PlannerRunWritesEveryTimelineFormat) {
  const std::string chain = smallZooChain("resnet18", "8");
  for (const char* name : {"t.csv", "t.json", "t.trace.json"}) {
    const auto result =
        runRemat({"run", chain, "--planner", "sqrt", "--device", "cpu", "--steps", "2", "--timeline", path(name)});
    ASSERT_EQ(result.exitCode, 0) << result.err;
    EXPECT_NE(result.out.find("dynamic peak"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("byte for byte"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("step 1"), std::string::npos) << result.out;
    EXPECT_NE(result.out.find("static"), std::string::npos);
    ASSERT_TRUE(fs::exists(path(name)));
  }
  for (const char* name : {"t.csv", "t.json"}) {
    auto timelines = readTimelines(path(name));
    ASSERT_TRUE(timelines.isOk()) << timelines.status().message();
    ASSERT_EQ(timelines->size(), 3u);  // predicted + two measured steps
    EXPECT_EQ((*timelines)[0].source, "predicted");
    EXPECT_EQ((*timelines)[1].source, "cpu");
    EXPECT_EQ((*timelines)[2].run, 1);
    EXPECT_EQ((*timelines)[0].planner, "sqrt");
    for (std::size_t i = 0; i < (*timelines)[0].entries.size(); ++i)
      EXPECT_EQ((*timelines)[0].entries[i].footprintBytes, (*timelines)[2].entries[i].footprintBytes);
  }
  const json trace = json::parse(std::ifstream(path("t.trace.json")));
  EXPECT_TRUE(trace["traceEvents"].is_array());
}

// An unprofiled real chain gets the CPU's workspaces on the fly: the report says which layers,
// and the measurement equals the prediction made with them, at one thread and at two.
TEST_F(RunCli, UnprofiledChainsGetTheCpuWorkspacesOnTheFly) {
  const std::string chain = smallZooChain("resnet18", "8");
  for (const char* threads : {"1", "2"}) {
    const auto result =
        runRemat({"run", chain, "--planner", "optimal", "--device", "cpu", "--threads", threads, "--json"});
    ASSERT_EQ(result.exitCode, 0) << result.err;
    EXPECT_EQ(result.err, "") << "no progress lines when stderr is not a terminal";
    const json out = json::parse(result.out);
    EXPECT_EQ(out["matches_prediction"], true);
    EXPECT_FALSE(out["fitted_workspace_layers"].empty()) << "convolutions take oneDNN scratch";
  }
  const auto table = runRemat({"run", chain, "--planner", "none", "--device", "cpu"});
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_NE(table.out.find("kernels' scratch taken as the forward and backward workspaces of"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("oneDNN"), std::string::npos) << table.out;
  // A chain profiled on the CPU needs nothing more.
  const auto profiled = runRemat({"profile", chain, "--device", "cpu", "--repeats", "1", "--output", path("p.json")});
  ASSERT_EQ(profiled.exitCode, 0) << profiled.err;
  const auto run = runRemat({"run", path("p.json"), "--planner", "none", "--device", "cpu", "--json"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_TRUE(json::parse(run.out)["fitted_workspace_layers"].empty()) << run.out;
  const auto negative = runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--threads", "-1"});
  EXPECT_EQ(negative.exitCode, 2);
  EXPECT_NE(negative.err.find("--threads: '-1' is not a whole number"), std::string::npos) << negative.err;
}

// The progress line rewrites itself in place, says the op, the count and the estimate, and clears
// itself at the end; nothing is written while disabled or before the delay.
TEST(TerminalProgress, RewritesOneLineAndClearsIt) {
  RunProgress p;
  p.opIndex = 1;
  p.opCount = 4;
  p.op = Op{OpKind::F, 2};
  p.elapsedSeconds = 2.0;
  p.costDone = 1.0;
  p.costTotal = 4.0;
  EXPECT_EQ(cli::progressText(p), "step 1/1  op 2/4 F(2)      25%  2.0 s, about 6.0 s left");
  std::ostringstream shown, quiet, early;
  {
    cli::TerminalProgress progress(shown, true, 1.0, 0.0);
    progress.update(p);
    EXPECT_EQ(shown.str(), "\r" + cli::progressText(p) + "\x1b[K");
  }
  EXPECT_EQ(shown.str().substr(shown.str().size() - 4), "\r\x1b[K") << "cleared when done";
  cli::TerminalProgress disabled(quiet, false, 0.0, 0.0);
  disabled.update(p);
  cli::TerminalProgress delayed(early, true, 5.0, 0.0);
  delayed.update(p);
  EXPECT_EQ(quiet.str(), "");
  EXPECT_EQ(early.str(), "") << "a run shorter than the delay shows no progress";
}

TEST_F(RunCli, ErrorsAreBadInput) {
  const std::string chain = writeGoldenChain(0);  // plain6
  const auto neither = runRemat({"run", chain, "--device", "cpu"});
  EXPECT_EQ(neither.exitCode, 2);
  EXPECT_NE(neither.err.find("--planner"), std::string::npos);
  const auto both = runRemat({"run", chain, "--device", "cpu", "--planner", "dp", "--checkpoints", "2"});
  EXPECT_EQ(both.exitCode, 2);
  const auto badDevice = runRemat({"run", chain, "--device", "tpu", "--planner", "none"});
  EXPECT_EQ(badDevice.exitCode, 2);
  EXPECT_NE(badDevice.err.find("tpu"), std::string::npos);
  const auto badPlan = runRemat({"run", chain, "--device", "cpu", "--checkpoints", "9"});
  EXPECT_EQ(badPlan.exitCode, 2);
  EXPECT_NE(badPlan.err.find("out of range"), std::string::npos) << badPlan.err;
  const auto badTimeline = runRemat({"run", chain, "--device", "cpu", "--planner", "none", "--timeline", "x.txt"});
  EXPECT_EQ(badTimeline.exitCode, 2);
  const auto badSteps = runRemat({"run", chain, "--device", "cpu", "--planner", "none", "--steps", "0"});
  EXPECT_EQ(badSteps.exitCode, 2);
  if (Status available = deviceAvailable("gpu"); !available.isOk()) {
    const auto gpu = runRemat({"run", chain, "--device", "gpu", "--planner", "none"});
    EXPECT_EQ(gpu.exitCode, 2);
    EXPECT_NE(gpu.err.find("--device gpu: " + available.message()), std::string::npos) << gpu.err;
  }
}

}  // namespace
}  // namespace remat
