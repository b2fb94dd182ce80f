// Swin-T on the command line: `remat zoo list` lists it, every planner plans it, and `remat run`
// runs each Swin kind on the CPU as the first layer of a chain, measured = predicted.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::runRemat;

class SwinCli : public testing::CliTest {};

TEST_F(SwinCli, ZooListsAndPlansSwinT) {
  const auto list = runRemat({"zoo", "list"});
  ASSERT_EQ(list.exitCode, 0) << list.err;
  EXPECT_NE(list.out.find("swin_t"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("28288354"), std::string::npos) << list.out;
  const auto plan = runRemat({"plan", "zoo:swin_t", "--batch", "8", "--planner", "optimal", "--json"});
  ASSERT_EQ(plan.exitCode, 0) << plan.err;
  EXPECT_GT(json::parse(plan.out)["dynamic_peak_bytes"].get<std::uint64_t>(), 0u);
  const std::string file = path("small.json");
  const auto small = runRemat({"zoo", "export", "swin_t", "--resolution", "160", "--output", file});
  EXPECT_EQ(small.exitCode, 2);
  EXPECT_NE(small.err.find("resolution 160 is below its minimum 196"), std::string::npos) << small.err;
  EXPECT_FALSE(std::filesystem::exists(file));  // nothing half-written
}

// One chain per kind, the kind first (a block, merging or head takes the [N, H, W, C] stream as
// its input): each runs on the CPU with the measured peak equal to the predicted one.
TEST_F(SwinCli, RunRunsEachSwinKindOnTheCpu) {
  const json block = {{"name", "b"}, {"kind", "swin_block"}, {"heads", 2}, {"hidden", 32}, {"window", 4}, {"shift", 2}};
  const std::vector<std::pair<json, json>> cases = {
      {json::array({1, 3, 16, 16}), {{"name", "e"}, {"kind", "swin_embedding"}, {"patch", 4}, {"width", 8}}},
      {json::array({1, 8, 8, 8}), block},
      {json::array({1, 7, 7, 8}), {{"name", "m"}, {"kind", "patch_merging"}}},
      {json::array({1, 8, 8, 8}), {{"name", "h"}, {"kind", "swin_head"}, {"out_features", 10}}}};
  for (const auto& [shape, layer] : cases) {
    const std::string kind = layer["kind"].get<std::string>();
    const json chain = {
        {"format", "remat-chain/1"}, {"name", kind}, {"input", {{"shape", shape}}}, {"layers", json::array({layer})}};
    const auto run = runRemat({"run", writeChain(chain), "--planner", "none", "--device", "cpu", "--json"});
    ASSERT_EQ(run.exitCode, 0) << kind << ": " << run.err;
    const json out = json::parse(run.out);
    EXPECT_EQ(out["measured_dynamic_peak_bytes"], out["predicted_dynamic_peak_bytes"]) << kind;
    EXPECT_EQ(out["matches_prediction"], true) << kind;
  }
}

}  // namespace
}  // namespace remat
