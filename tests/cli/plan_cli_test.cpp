// `remat plan` and `remat compare`, end to end through runCli.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::checkpointArg;
using testing::runRemat;

class PlanCli : public testing::CliTest {
 protected:
  // An abstract chain written by hand in remat-chain/1.
  std::string toyChain() {
    json layers = json::array();
    const int sizes[] = {8192, 8192, 4096, 4096, 2048, 2048, 1024, 1024, 512};
    for (int i = 0; i < 9; ++i) {
      layers.push_back({{"name", "L" + std::to_string(i + 1)},
                        {"kind", "abstract"},
                        {"out_bytes", sizes[i]},
                        {"needs_input", i % 3 != 1},
                        {"needs_output", i % 3 == 1},
                        {"extra_bytes", i == 4 ? 256 : 0}});
    }
    return writeChain(
        json{{"format", "remat-chain/1"}, {"name", "toy"}, {"input", {{"bytes", 4096}}}, {"layers", layers}});
  }
};

TEST_F(PlanCli, JsonPlanObjectHasTheInterfaceFields) {
  const std::string path = toyChain();
  for (const char* planner : {"none", "sqrt", "greedy", "uniform:3", "dp", "linear", "optimal"}) {
    const auto result = runRemat({"plan", path, "--planner", planner, "--json"});
    ASSERT_EQ(result.exitCode, 0) << planner << ": " << result.err;
    const json out = json::parse(result.out);
    for (const char* field : {"planner", "objective", "objective_bytes", "checkpoints", "dynamic_peak_bytes",
                              "static_bytes", "peak_bytes", "plan_seconds", "A_bytes", "R_bytes", "recompute_cost"})
      EXPECT_TRUE(out.contains(field)) << planner << " lacks " << field;
    EXPECT_EQ(out["planner"], planner);
    EXPECT_EQ(out["peak_bytes"].get<std::uint64_t>(),
              out["static_bytes"].get<std::uint64_t>() + out["dynamic_peak_bytes"].get<std::uint64_t>());
    // The plan simulates to the same E through `remat simulate`.
    const auto sim = runRemat({"simulate", path, "--checkpoints", checkpointArg(out["checkpoints"]), "--json"});
    ASSERT_EQ(sim.exitCode, 0) << sim.err;
    const json simulated = json::parse(sim.out);
    EXPECT_EQ(simulated["dynamic_peak_bytes"], out["dynamic_peak_bytes"]) << planner;
    EXPECT_EQ(simulated["A_bytes"], out["A_bytes"]) << planner;
    EXPECT_EQ(simulated["R_bytes"], out["R_bytes"]) << planner;
  }
  const json dp = json::parse(runRemat({"plan", path, "--planner", "dp", "--json"}).out);
  EXPECT_EQ(dp["objective"], "A");
  EXPECT_EQ(dp["objective_bytes"], dp["A_bytes"]);
  const json linear = json::parse(runRemat({"plan", path, "--planner", "linear", "--json"}).out);
  EXPECT_EQ(linear["objective"], "R");
  EXPECT_EQ(linear["objective_bytes"], linear["R_bytes"]);
  const json optimal = json::parse(runRemat({"plan", path, "--planner", "optimal", "--json"}).out);
  EXPECT_EQ(optimal["objective"], "E");
  EXPECT_EQ(optimal["objective_bytes"], optimal["dynamic_peak_bytes"]);
  const json sqrt = json::parse(runRemat({"plan", path, "--planner", "sqrt", "--json"}).out);
  EXPECT_EQ(sqrt["objective"], "-");
  EXPECT_EQ(sqrt["checkpoints"], json({3, 6}));
}

TEST_F(PlanCli, GoldenMinimaThroughTheCommandLine) {
  for (const auto& example : testing::goldenExamples()) {
    const std::string path = writeChain(example["chain"]);
    const auto result = runRemat(
        {"compare", path, "--planners", "optimal, dp,linear", "--json", "--optimizer", "none", "--grads", "in-place"});
    ASSERT_EQ(result.exitCode, 0) << result.err;
    const json plans = json::parse(result.out)["plans"];
    ASSERT_EQ(plans.size(), 3u);
    EXPECT_EQ(plans[0]["planner"], "optimal");
    EXPECT_EQ(plans[0]["objective_bytes"], example["minimum"]["E"]);
    EXPECT_EQ(plans[1]["objective_bytes"], example["minimum"]["A"]);
    EXPECT_EQ(plans[2]["objective_bytes"], example["minimum"]["R"]);
  }
}

TEST_F(PlanCli, HumanOutput) {
  const std::string path = toyChain();
  auto result = runRemat({"plan", path, "--planner", "optimal"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  for (const char* text : {"toy", "optimal", "peak (E)", "KiB", "objective A", "objective R", "recompute", "plan time"})
    EXPECT_NE(result.out.find(text), std::string::npos) << text << "\n" << result.out;

  result = runRemat({"compare", path});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  // The default list, one row each, with K = ceil(sqrt 9) = 3.
  for (const char* name : {"none", "sqrt", "greedy", "uniform:3", "dp", "linear", "optimal"})
    EXPECT_NE(result.out.find(std::string("\n") + name + " "), std::string::npos) << name << "\n" << result.out;
  for (const char* header : {"peak (E)", "checkpoints", "recompute", "plan time"})
    EXPECT_NE(result.out.find(header), std::string::npos) << header;

  result = runRemat({"compare", path, "--json"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(json::parse(result.out)["plans"].size(), 7u);
}

TEST_F(PlanCli, ZooArgument) {
  const auto result = runRemat({"compare", "zoo:resnet18", "--planners", "none,optimal", "--json"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  const json plans = json::parse(result.out)["plans"];
  EXPECT_LT(plans[1]["dynamic_peak_bytes"].get<std::uint64_t>(), plans[0]["dynamic_peak_bytes"].get<std::uint64_t>());
}

TEST_F(PlanCli, BadInputExitsWithTwo) {
  const std::string path = toyChain();
  auto result = runRemat({"plan", path, "--planner", "fastest"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("fastest"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("optimal"), std::string::npos) << result.err;  // lists the valid names
  result = runRemat({"plan", path, "--planner", "uniform:0"});
  EXPECT_EQ(result.exitCode, 2);
  result = runRemat({"plan", path});  // --planner (or --fit) is required
  EXPECT_EQ(result.exitCode, 2);
  result = runRemat({"plan", (folder_ / "missing.json").string(), "--planner", "dp"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("missing.json"), std::string::npos);
  result = runRemat({"compare", path, "--planners", "dp,,linear"});
  EXPECT_EQ(result.exitCode, 2);
  result = runRemat({"compare", path, "--planners", "dp,best"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("best"), std::string::npos);
  EXPECT_TRUE(result.out.empty()) << "nothing is printed before the names are checked";
  result = runRemat({"compare", "zoo:lenet"});
  EXPECT_EQ(result.exitCode, 2);
}

}  // namespace
}  // namespace remat
