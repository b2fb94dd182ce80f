// Issue 15 through the command line: hostile files and arguments get a placed message and exit 2,
// long planning reports progress and stops at --timeout (exit 3), plans that cannot fit are
// refused before they run, and no command overwrites what it must not.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_runner.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/random_chain.hpp"

namespace remat {
namespace {

namespace fs = std::filesystem;
using testing::runRemat;

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class HostileCli : public testing::CliTest {
 protected:
  std::string smallChain() { return writeGoldenChain(0); }  // plain6
  // An abstract chain long enough that optimal (O(n^2)) plans for seconds.
  std::string longChain(std::size_t layers) {
    RandomChainOptions options;
    options.layers = layers;
    options.seed = 15;
    const std::string file = path("long.json");
    EXPECT_TRUE(saveChainFile(makeRandomChain(options).spec, file).isOk());
    return file;
  }
};

TEST_F(HostileCli, DeepNestingIsRefusedByEverySubcommand) {
  // Issue 15: 65,468 levels in any field killed every subcommand with an empty stderr.
  const std::string deep = write("deep.json", R"({"format": "remat-chain/1", "input": )" + std::string(65468, '[') +
                                                  std::string(65468, ']') + "}");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"simulate", deep, "--checkpoints", ""},
                                               {"plan", deep, "--planner", "dp"},
                                               {"compare", deep},
                                               {"run", deep, "--planner", "none", "--device", "cpu"}}) {
    const auto result = runRemat(args);
    EXPECT_EQ(result.exitCode, 2) << args[0];
    EXPECT_EQ(result.err.rfind("remat: error: " + deep + ":1:", 0), 0u) << result.err.substr(0, 300);
    EXPECT_NE(result.err.find("nested deeper than"), std::string::npos) << result.err.substr(0, 300);
    EXPECT_LE(result.err.size(), 200u);
  }
}

TEST_F(HostileCli, FileErrorsCountLayersFromOneLikeOpsAndCheckpoints) {
  const std::string bad = write("bad.json",
                                "{\"format\": \"remat-chain/1\", \"input\": {\"bytes\": 8},\n"
                                " \"layers\": [{\"kind\": \"abstract\", \"out_bytes\": 1},\n"
                                "            {\"kind\": \"abstract\", \"out_bytes\": -1}]}");
  const auto result = runRemat({"plan", bad, "--planner", "dp"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find(bad + ":3:34: layer 2: field 'out_bytes' must be a non-negative integer, not number '-1'"),
            std::string::npos)
      << result.err;
}

TEST_F(HostileCli, LongPlanningStopsAtTheTimeoutAndSaysHowFarItGot) {
  const std::string chain = longChain(40000);
  const auto plan = runRemat({"plan", chain, "--planner", "optimal", "--timeout", "0.05"});
  EXPECT_EQ(plan.exitCode, 3) << plan.err;
  EXPECT_NE(plan.err.find("--timeout 0.05: planner 'optimal' stopped after"), std::string::npos) << plan.err;
  EXPECT_NE(plan.err.find("% of its work, on chain"), std::string::npos) << plan.err;
  EXPECT_NE(plan.err.find("(40000 layers)"), std::string::npos) << plan.err;
  // compare: one deadline for all its planners.
  const auto compare = runRemat({"compare", chain, "--planners", "none,optimal,dp", "--timeout", "0.05"});
  EXPECT_EQ(compare.exitCode, 3) << compare.err;
  EXPECT_NE(compare.err.find("planner 'optimal' stopped"), std::string::npos) << compare.err;
  const auto run = runRemat({"run", chain, "--planner", "optimal", "--device", "cpu", "--timeout", "0.05"});
  EXPECT_EQ(run.exitCode, 3) << run.err;
  // tradeoff: its exact front, under the same deadline.
  const auto tradeoff = runRemat({"tradeoff", chain, "--planners", "none", "--timeout", "0.05"});
  EXPECT_EQ(tradeoff.exitCode, 3) << tradeoff.err;
  EXPECT_NE(tradeoff.err.find("--timeout 0.05: the Pareto front stopped after"), std::string::npos) << tradeoff.err;
  EXPECT_NE(tradeoff.err.find("(40000 layers)"), std::string::npos) << tradeoff.err;
}

TEST_F(HostileCli, ProgressLinesOnRequest) {
  const std::string chain = longChain(2000);
  const auto quiet = runRemat({"plan", chain, "--planner", "optimal"});
  ASSERT_EQ(quiet.exitCode, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");  // short planning says nothing
  const auto loud = runRemat({"plan", chain, "--planner", "optimal", "--progress"});
  ASSERT_EQ(loud.exitCode, 0) << loud.err;
  EXPECT_EQ(loud.err.rfind("remat: planner optimal: 0% after ", 0), 0u) << loud.err;
  EXPECT_NE(loud.err.find("remat: planner optimal: 90% after "), std::string::npos) << loud.err;
  EXPECT_NE(loud.out.find("checkpoints"), std::string::npos);  // the plan still goes to stdout
}

TEST_F(HostileCli, TimeoutAndProgressAreChecked) {
  const std::string chain = smallChain();
  for (const char* bad : {"0", "-1", "x", "1e9", "inf", "nan"}) {
    const auto result = runRemat({"plan", chain, "--planner", "dp", "--timeout", bad});
    EXPECT_EQ(result.exitCode, 2) << bad;
    EXPECT_NE(result.err.find("--timeout"), std::string::npos) << result.err;
  }
  EXPECT_EQ(runRemat({"plan", chain, "--planner", "dp", "--timeout", "30"}).exitCode, 0);
}

TEST_F(HostileCli, ACpuPlanThatCannotFitIsRefusedBeforeItRuns) {
  // Issue 15: VGG-16 at batch 512 ran 6 s and failed in F(1) with a malloc error.
  const std::string huge = write("huge.json", R"({"format": "remat-chain/1", "input": {"bytes": 8},
    "layers": [{"kind": "abstract", "out_bytes": 36028797018963968}, {"kind": "abstract", "out_bytes": 8}]})");
  const auto result = runRemat({"run", huge, "--planner", "none", "--device", "cpu"});
  EXPECT_EQ(result.exitCode, 2);
  // Refused before the kernels are prepared: no plan holds less than the largest activation.
  EXPECT_NE(result.err.find("no plan of chain 'huge' fits on cpu: its static memory and its largest activation "
                            "alone take 32.00 PiB"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("available"), std::string::npos) << result.err;
  EXPECT_EQ(result.out, "");
  // Activations of 4 GiB each, 65,536 of them: each may fit, storing them all does not.
  std::string layers;
  for (int l = 0; l < 65536; ++l)
    layers += std::string(l ? "," : "") + R"({"kind": "abstract", "out_bytes": 4294967296})";
  const std::string many =
      write("many.json", R"({"format": "remat-chain/1", "input": {"bytes": 8}, "layers": [)" + layers + "]}");
  const auto stored = runRemat({"run", many, "--planner", "none", "--device", "cpu"});
  EXPECT_EQ(stored.exitCode, 2);
  // (A machine with less than 4 GiB available refuses it by the bound above.)
  EXPECT_TRUE(stored.err.find("the plan needs 256.00 TiB on cpu") != std::string::npos ||
              stored.err.find("no plan of chain 'many' fits on cpu") != std::string::npos)
      << stored.err;
}

TEST_F(HostileCli, TheTimelineNeverReplacesTheChainOrAReadOnlyFile) {
  const std::string chain = smallChain();
  const std::string before = readAll(chain);
  const auto overChain = runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--timeline", chain});
  EXPECT_EQ(overChain.exitCode, 2);
  EXPECT_NE(overChain.err.find("--timeline: cannot write"), std::string::npos) << overChain.err;
  EXPECT_EQ(readAll(chain), before);
  const std::string readOnly = write("ro.csv", "keep");
  ASSERT_EQ(::chmod(readOnly.c_str(), 0444), 0);
  EXPECT_EQ(runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--timeline", readOnly}).exitCode, 2);
  EXPECT_EQ(readAll(readOnly), "keep");
  const std::string kept = write("kept.csv", "old");
  ASSERT_EQ(::chmod(kept.c_str(), 0600), 0);
  EXPECT_EQ(runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--timeline", kept}).exitCode, 0);
  struct stat info {};
  ASSERT_EQ(::stat(kept.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_NE(readAll(kept).find("planner,run,op_index"), std::string::npos);
}

TEST_F(HostileCli, AMissingOutputFolderIsReportedBeforeTheWork) {
  const std::string chain = smallChain();
  const std::string target = path("missing/t.csv");
  const auto run = runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--timeline", target});
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_EQ(run.out, "");  // nothing ran: a run prints its report first
  EXPECT_NE(run.err.find("--timeline: cannot write '" + target + "': the folder '" + path("missing") +
                         "' does not exist (No such file or directory)"),
            std::string::npos)
      << run.err;
  const auto profile = runRemat({"profile", chain, "--device", "cpu", "--output", target});
  EXPECT_EQ(profile.exitCode, 2);
  EXPECT_EQ(profile.out, "");
  EXPECT_NE(profile.err.find("--output: cannot write"), std::string::npos) << profile.err;
  const auto overInput = runRemat({"profile", chain, "--device", "cpu", "--output", chain});
  EXPECT_EQ(overInput.exitCode, 2);
  EXPECT_NE(overInput.err.find("a file this command reads"), std::string::npos) << overInput.err;
  const auto zoo = runRemat({"zoo", "export", "alexnet", "--output", target});
  EXPECT_EQ(zoo.exitCode, 2);
  EXPECT_NE(zoo.err.find("does not exist"), std::string::npos) << zoo.err;
  EXPECT_FALSE(fs::exists(path("missing")));
}

TEST_F(HostileCli, ArgumentMessagesAreBounded) {
  const std::string chain = smallChain();
  const std::string longList(100000, '7');
  const auto simulate = runRemat({"simulate", chain, "--checkpoints", longList});
  EXPECT_EQ(simulate.exitCode, 2);
  EXPECT_LE(simulate.err.size(), 400u) << simulate.err.substr(0, 400);
  const auto planner = runRemat({"plan", chain, "--planner", std::string(100000, 'q')});
  EXPECT_EQ(planner.exitCode, 2);
  EXPECT_LE(planner.err.size(), 400u) << planner.err.substr(0, 400);
  const auto batch = runRemat({"zoo", "export", "vgg11", "--batch", "0"});
  EXPECT_EQ(batch.exitCode, 2);
  EXPECT_LE(batch.err.size(), 200u) << batch.err;  // was a 309-digit bound
}

}  // namespace
}  // namespace remat
