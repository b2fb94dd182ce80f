// `remat simulate` and `remat zoo`, end to end through runCli.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.hpp"
#include "remat/base/units.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/op_times.hpp"
#include "remat/report/exporters.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::runRemat;

class SimulateCli : public testing::CliTest {};

TEST_F(SimulateCli, JsonMatchesEveryGoldenPlan) {
  for (const auto& [path, checkpoints, plan] : goldenPlans()) {
    const auto result = runRemat(
        {"simulate", path, "--checkpoints", checkpoints, "--json", "--optimizer", "none", "--grads", "in-place"});
    ASSERT_EQ(result.exitCode, 0) << result.err;
    const json out = json::parse(result.out);
    EXPECT_EQ(out["checkpoints"], plan["checkpoints"]);
    EXPECT_EQ(out["dynamic_peak_bytes"], plan["dynamic_peak_bytes"]);
    EXPECT_EQ(out["A_bytes"], plan["A_bytes"]);
    EXPECT_EQ(out["R_bytes"], plan["R_bytes"]);
    EXPECT_EQ(out["ops"], plan["ops"]);
    EXPECT_EQ(out["peak_bytes"].get<std::uint64_t>(),
              out["static_bytes"].get<std::uint64_t>() + out["dynamic_peak_bytes"].get<std::uint64_t>());
  }
}

TEST_F(SimulateCli, HumanTableHasUnitsAndMarksThePeak) {
  const std::string path = writeGoldenChain(0);  // plain6
  const auto result = runRemat({"simulate", path, "--checkpoints", "2"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_NE(result.out.find("24.00 KiB"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("<- peak"), std::string::npos);
  EXPECT_NE(result.out.find("recompute"), std::string::npos);
}

TEST_F(SimulateCli, BadInputExitsWithTwoAndSaysWhy) {
  const std::string path = writeGoldenChain(0);  // plain6
  auto result = runRemat({"simulate", path, "--checkpoints", "9"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("checkpoint 9"), std::string::npos) << result.err;
  result = runRemat({"simulate", path, "--checkpoints", "x"});
  EXPECT_EQ(result.exitCode, 2);
  result = runRemat({"simulate", (folder_ / "missing.json").string(), "--checkpoints", ""});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("missing.json"), std::string::npos);
  const std::string bad =
      write("bad.json", R"({"format": "remat-chain/1", "input": {"bytes": 1}, "layers": [{"kind": "abstract"}]})");
  result = runRemat({"simulate", bad, "--checkpoints", ""});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("layer 1"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("out_bytes"), std::string::npos) << result.err;
  result = runRemat({"simulate"});
  EXPECT_EQ(result.exitCode, 2);
  result = runRemat({"frobnicate"});
  EXPECT_EQ(result.exitCode, 2);
}

TEST_F(SimulateCli, TheTimelineFileCarriesModelledOpTimes) {
  const std::string chainPath = writeGoldenChain(0);  // plain6
  const std::string csv = (folder_ / "plain6.csv").string();
  auto result = runRemat({"simulate", chainPath, "--checkpoints", "2", "--timeline", csv});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_NE(result.out.find("op times modelled: stated costs as ms"), std::string::npos) << result.out;
  Result<std::vector<Timeline>> timelines = readTimelines(csv);
  ASSERT_TRUE(timelines.isOk()) << timelines.status().message();
  ASSERT_EQ(timelines->size(), 1u);
  const Timeline& t = timelines->front();
  EXPECT_EQ(t.source, "predicted");
  EXPECT_EQ(t.planner, "checkpoints");
  Result<Chain> chain = loadChainFile(chainPath);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  double totalUs = 0.0;
  for (const TimelineEntry& e : t.entries) {
    EXPECT_DOUBLE_EQ(e.timeUs, opMicroseconds(*chain, e.op)) << opLabel(e.op);
    totalUs += e.timeUs;
  }
  EXPECT_GT(totalUs, 0.0);
  result = runRemat({"simulate", chainPath, "--checkpoints", "2", "--timeline", (folder_ / "t.txt").string()});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("t.txt"), std::string::npos) << result.err;
}

// --measured: a PyTorch recording printed peak against peak, in the JSON, and written beside the
// prediction; a file of predictions only and a hostile pickle are exit 2 with their reason.
TEST_F(SimulateCli, MeasuredSnapshotIsComparedPeakAgainstPeak) {
  const std::string chainPath = writeGoldenChain(0);  // plain6
  const std::string recording = std::string(REMAT_TEST_DATA_DIR) + "/snapshots/cpu-recording.pickle";
  const json expected = json::parse(std::ifstream(std::string(REMAT_TEST_DATA_DIR) + "/snapshots/expected.json"));
  const std::uint64_t measuredPeak = expected["cpu-recording"]["dynamic_peak_bytes"].get<std::uint64_t>();
  auto result = runRemat({"simulate", chainPath, "--checkpoints", "2", "--measured", recording});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_NE(result.out.find("peak         measured " + formatBytes(measuredPeak) + " dynamic"), std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("measured / predicted"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("static       measured "), std::string::npos) << result.out;

  result = runRemat({"simulate", chainPath, "--checkpoints", "2", "--measured", recording, "--json"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  const json out = json::parse(result.out);
  EXPECT_EQ(out["measured"]["dynamic_peak_bytes"].get<std::uint64_t>(), measuredPeak);
  EXPECT_EQ(out["measured"]["static_bytes"], expected["cpu-recording"]["static_bytes"]);
  EXPECT_DOUBLE_EQ(out["measured"]["measured_over_predicted"].get<double>(),
                   static_cast<double>(measuredPeak) / out["dynamic_peak_bytes"].get<double>());

  const std::string both = (folder_ / "both.snapshot.json").string();
  result = runRemat({"simulate", chainPath, "--checkpoints", "2", "--measured", recording, "--timeline", both});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  Result<std::vector<Timeline>> timelines = readTimelines(both);
  ASSERT_TRUE(timelines.isOk()) << timelines.status().message();
  ASSERT_EQ(timelines->size(), 2u);
  EXPECT_EQ((*timelines)[0].source, "predicted");
  EXPECT_EQ((*timelines)[1].dynamicPeakBytes(), measuredPeak);

  const std::string predicted = (folder_ / "predicted.pickle").string();
  ASSERT_EQ(runRemat({"simulate", chainPath, "--checkpoints", "2", "--timeline", predicted}).exitCode, 0);
  result = runRemat({"simulate", chainPath, "--checkpoints", "2", "--measured", predicted});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("holds no measured timeline"), std::string::npos) << result.err;
  const std::string evil = std::string(REMAT_TEST_DATA_DIR) + "/regressions/snapshot/stack-global-os-system.pickle";
  result = runRemat({"simulate", chainPath, "--checkpoints", "2", "--measured", evil});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("byte offset 28: opcode STACK_GLOBAL"), std::string::npos) << result.err;
}

TEST_F(SimulateCli, ZooListAndExportRoundTrip) {
  auto result = runRemat({"zoo", "list"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  for (const char* name : {"alexnet", "vgg16", "vgg19_bn", "resnet50", "resnet152", "mobilenet_v2"})
    EXPECT_NE(result.out.find(name), std::string::npos) << name;
  EXPECT_NE(result.out.find("138357544"), std::string::npos) << result.out;
  // Every row's layer count ends in the header's "layers" column, whatever the name's length.
  std::istringstream rows(result.out);
  std::string header, row;
  std::getline(rows, header);
  const std::size_t layersEnd = header.find("layers") + std::string("layers").size();
  while (std::getline(rows, row)) {
    ASSERT_GT(row.size(), layersEnd) << row;
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(row[layersEnd - 1])) && row[layersEnd] == ' ') << row;
  }

  const std::string out = (folder_ / "vgg16.json").string();
  result = runRemat({"zoo", "export", "vgg16", "--batch", "8", "--resolution", "64", "--output", out});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  const json file = json::parse(std::ifstream(out));
  EXPECT_EQ(file["format"], "remat-chain/1");
  EXPECT_EQ(file["input"]["shape"], json({8, 3, 64, 64}));
  result = runRemat({"simulate", out, "--checkpoints", "", "--json"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_GT(json::parse(result.out)["dynamic_peak_bytes"].get<std::uint64_t>(), 0u);

  result = runRemat({"zoo", "export", "resnet18"});
  ASSERT_EQ(result.exitCode, 0) << result.err;
  EXPECT_EQ(json::parse(result.out)["input"]["shape"], json({64, 3, 224, 224}));
  result = runRemat({"zoo", "export", "lenet"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("lenet"), std::string::npos);
  result = runRemat({"zoo", "export", "vgg16", "--resolution", "8"});
  EXPECT_EQ(result.exitCode, 2) << result.out;
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Issue 25: a plan that `remat plan --json` wrote opens again in `remat simulate --plan` and
// `remat run --plan`; a plan that fits no layer of the chain is a placed error, exit 2.
class PlanFileCli : public testing::CliTest {};

TEST_F(PlanFileCli, SimulateReadsThePlanThatPlanJsonWrote) {
  const std::string chain = writeGoldenChain(0);  // plain6
  const auto planned = runRemat({"plan", chain, "--planner", "dp", "--json"});
  ASSERT_EQ(planned.exitCode, 0) << planned.err;
  const std::string planPath = write("dp_plan.json", planned.out);
  const auto simulated = runRemat({"simulate", chain, "--plan", planPath, "--json"});
  ASSERT_EQ(simulated.exitCode, 0) << simulated.err;
  EXPECT_EQ(json::parse(simulated.out)["checkpoints"], json::parse(planned.out)["checkpoints"]);
  EXPECT_EQ(json::parse(simulated.out)["dynamic_peak_bytes"], json::parse(planned.out)["dynamic_peak_bytes"]);
}

TEST_F(PlanFileCli, APlanThatDoesNotFitTheChainExitsWithTwo) {
  const std::string chain = writeGoldenChain(0);  // plain6: six layers
  const std::string planPath = write("far.json", "{\n  \"checkpoints\": [2, 40]\n}\n");
  auto result = runRemat({"simulate", chain, "--plan", planPath});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("--plan: " + planPath + ":2:3: checkpoints[1]: layer 40 is not a checkpoint of chain"),
            std::string::npos)
      << result.err;
  result = runRemat({"simulate", chain, "--plan", planPath, "--checkpoints", "2"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("exactly one of --checkpoints LIST and --plan FILE"), std::string::npos) << result.err;
  result = runRemat({"run", chain, "--plan", planPath, "--planner", "dp", "--device", "cpu"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("--plan FILE"), std::string::npos) << result.err;
  result = runRemat({"run", chain, "--plan", planPath, "--device", "cpu"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("--plan: " + planPath + ":2:3:"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace remat
