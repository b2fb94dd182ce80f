// `remat tradeoff`, `plan --fit`, `run --fit` and the recompute cost's unit, end to end through
// runCli.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "remat/base/units.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::runRemat;

class TradeoffCli : public testing::CliTest {};

json runJson(const std::vector<std::string>& args) {
  const auto result = runRemat(args);
  EXPECT_EQ(result.exitCode, 0) << result.err;
  return result.exitCode == 0 ? json::parse(result.out) : json::object();
}

TEST_F(TradeoffCli, JsonFrontIsSortedAndPlacesThePlanners) {
  const json out = runJson({"tradeoff", "zoo:vgg16", "--json"});
  EXPECT_EQ(out["chain"], "vgg16");
  EXPECT_EQ(out["recompute_cost_unit"], "GFLOP");
  const json& front = out["front"];
  ASSERT_GE(front.size(), 2u);
  for (std::size_t i = 1; i < front.size(); ++i) {
    EXPECT_GT(front[i]["dynamic_peak_bytes"].get<std::uint64_t>(),
              front[i - 1]["dynamic_peak_bytes"].get<std::uint64_t>());
    EXPECT_LT(front[i]["recompute_cost"].get<double>(), front[i - 1]["recompute_cost"].get<double>());
  }
  // Its first point is optimal's E, its last store-all.
  const json optimal = runJson({"plan", "zoo:vgg16", "--planner", "optimal", "--json"});
  EXPECT_EQ(front[0]["dynamic_peak_bytes"], optimal["dynamic_peak_bytes"]);
  EXPECT_EQ(front.back()["checkpoints"], json::array());
  EXPECT_EQ(front.back()["recompute_cost"], 0.0);
  // Each point's checkpoints simulate to its numbers.
  const json& middle = front[front.size() / 2];
  const json sim =
      runJson({"simulate", "zoo:vgg16", "--checkpoints", testing::checkpointArg(middle["checkpoints"]), "--json"});
  EXPECT_EQ(sim["dynamic_peak_bytes"], middle["dynamic_peak_bytes"]);
  EXPECT_DOUBLE_EQ(sim["recompute_cost"].get<double>(), middle["recompute_cost"].get<double>());
  // The named planners, placed.
  std::vector<std::string> names;
  for (const json& p : out["planners"]) {
    names.push_back(p["planner"]);
    EXPECT_TRUE(p.contains("on_front") && p.contains("extra_peak_bytes") && p.contains("extra_recompute_cost"));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"none", "sqrt", "greedy", "uniform:7", "dp", "linear", "optimal"}));
  EXPECT_EQ(out["planners"][0]["on_front"], true);  // none: store all
  // On VGG-16 sqrt peaks at 3.06 GiB for most of a forward pass; the front does far better.
  EXPECT_EQ(out["planners"][1]["on_front"], false);
  EXPECT_GT(out["planners"][1]["extra_recompute_cost"].get<double>(), 0.0);
}

TEST_F(TradeoffCli, HumanOutputNamesTheUnits) {
  const auto result = runRemat({"tradeoff", "zoo:resnet18", "--planners", "none,optimal"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  for (const char* text : {"recompute cost in GFLOP (estimated from shapes)", "one forward pass costs",
                           "plans on the Pareto front", "GFLOP", "on the front (point", "(none: store all)"})
    EXPECT_NE(result.out.find(text), std::string::npos) << text << "\n" << result.out;
  EXPECT_EQ(runRemat({"tradeoff", "zoo:resnet18", "--planners", "nope"}).exitCode, 2);
  EXPECT_EQ(runRemat({"tradeoff", "zoo:lenet"}).exitCode, 2);
}

TEST_F(TradeoffCli, CostUnitsInEveryJsonAndTable) {
  const json plan = runJson({"plan", "zoo:resnet18", "--planner", "sqrt", "--json"});
  EXPECT_EQ(plan["recompute_cost_unit"], "GFLOP");
  EXPECT_GT(plan["recompute_share"].get<double>(), 0.0);
  EXPECT_LT(plan["recompute_share"].get<double>(), 1.0);
  const json sim = runJson({"simulate", writeGoldenChain(0), "--checkpoints", "2", "--json"});
  EXPECT_EQ(sim["recompute_cost_unit"], "units");
  EXPECT_TRUE(sim.contains("recompute_share"));
  const auto human = runRemat({"plan", "zoo:resnet18", "--planner", "sqrt"});
  EXPECT_NE(human.out.find("GFLOP (estimated from shapes)"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("of one forward pass"), std::string::npos) << human.out;
  const auto compare = runRemat({"compare", "zoo:resnet18", "--planners", "sqrt"});
  EXPECT_NE(compare.out.find(" GFLOP"), std::string::npos) << compare.out;
  EXPECT_NE(compare.out.find("share"), std::string::npos) << compare.out;
}

TEST_F(TradeoffCli, PlanFitIsTheBudgetPlannerAfterStaticMemory) {
  const json optimal = runJson({"plan", "zoo:resnet50", "--planner", "optimal", "--json"});
  const std::uint64_t staticBytes = optimal["static_bytes"];
  const std::uint64_t capacity = staticBytes + optimal["dynamic_peak_bytes"].get<std::uint64_t>() + (64u << 20);
  const json fit = runJson({"plan", "zoo:resnet50", "--fit", std::to_string(capacity), "--json"});
  EXPECT_EQ(fit["capacity_bytes"], capacity);
  EXPECT_EQ(fit["objective"], "C");
  EXPECT_EQ(fit["planner"], "budget:" + std::to_string(capacity - staticBytes));
  EXPECT_LE(fit["peak_bytes"].get<std::uint64_t>(), capacity);
  EXPECT_LE(fit["recompute_cost"].get<double>(), optimal["recompute_cost"].get<double>());
  const json same = runJson({"plan", "zoo:resnet50", "--planner", fit["planner"], "--json"});
  EXPECT_EQ(same["checkpoints"], fit["checkpoints"]);
  const auto human = runRemat({"plan", "zoo:resnet50", "--fit", "80GiB"});
  ASSERT_EQ(human.exitCode, 0) << human.err;
  EXPECT_NE(human.out.find("fit          80.00 GiB"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("checkpoints  (none: store all)"), std::string::npos) << human.out;
}

TEST_F(TradeoffCli, FitRefusals) {
  const json optimal = runJson({"plan", "zoo:resnet50", "--planner", "optimal", "--json"});
  const std::uint64_t staticBytes = optimal["static_bytes"];
  const std::uint64_t least = optimal["dynamic_peak_bytes"];
  auto result = runRemat({"plan", "zoo:resnet50", "--fit", std::to_string(staticBytes + least - 1)});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("no plan fits in " + formatBytes(least - 1) + ": the least dynamic peak of any plan is " +
                            formatBytes(least) + " (planner optimal)"),
            std::string::npos)
      << result.err;
  result = runRemat({"plan", "zoo:resnet50", "--fit", "100MiB"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("static memory alone is"), std::string::npos) << result.err;
  result = runRemat({"plan", "zoo:resnet50", "--fit", "lots"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("--fit"), std::string::npos) << result.err;
  result = runRemat({"plan", "zoo:resnet50", "--fit", "8GiB", "--planner", "dp"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("exactly one of --planner NAME and --fit CAPACITY"), std::string::npos) << result.err;
  result = runRemat({"run", "zoo:resnet50", "--fit", "8GiB", "--planner", "dp", "--device", "cpu"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("exactly one of"), std::string::npos) << result.err;
}

TEST_F(TradeoffCli, FitDeviceUsesWhatTheDeviceHas) {
  // The CPU's capacity is what it reports available; a plan for it fits.
  const json fit = runJson({"plan", "zoo:resnet18", "--fit", "device", "--device", "cpu", "--json"});
  EXPECT_GT(fit["capacity_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_LE(fit["peak_bytes"].get<std::uint64_t>(), fit["capacity_bytes"].get<std::uint64_t>());
  // The GPU is the default device of plan --fit device; without one the refusal says so.
  const auto gpu = runRemat({"plan", "zoo:resnet18", "--fit", "device"});
  if (gpu.exitCode != 0) {
    EXPECT_EQ(gpu.exitCode, 2);
    EXPECT_NE(gpu.err.find("--fit device (--device gpu)"), std::string::npos) << gpu.err;
  }
}

TEST_F(TradeoffCli, RunFitRunsTheCheapestPlanThatFits) {
  const std::string exported = path("resnet18.json"), chain = path("resnet18-cpu.json");
  ASSERT_EQ(runRemat({"zoo", "export", "resnet18", "--batch", "2", "--resolution", "8", "--output", exported}).exitCode,
            0);
  // The CPU's workspaces written in, so the plan below is planned on the chain the run predicts with.
  ASSERT_EQ(runRemat({"profile", exported, "--device", "cpu", "--repeats", "1", "--output", chain}).exitCode, 0);
  const json optimal = runJson({"plan", chain, "--planner", "optimal", "--json"});
  const std::uint64_t capacity = optimal["peak_bytes"].get<std::uint64_t>() + 4096;
  const json run = runJson({"run", chain, "--fit", std::to_string(capacity), "--device", "cpu", "--json"});
  EXPECT_EQ(run["matches_prediction"], true);
  EXPECT_EQ(run["planner"], "budget:" + std::to_string(capacity - optimal["static_bytes"].get<std::uint64_t>()));
  EXPECT_LE(run["predicted_dynamic_peak_bytes"].get<std::uint64_t>() + run["static_bytes"].get<std::uint64_t>(),
            capacity);
  const json device = runJson({"run", chain, "--fit", "device", "--device", "cpu", "--json"});
  EXPECT_EQ(device["matches_prediction"], true);
  EXPECT_EQ(device["checkpoints"], json::array());  // a small chain fits whole in the CPU's memory
}

}  // namespace
}  // namespace remat
