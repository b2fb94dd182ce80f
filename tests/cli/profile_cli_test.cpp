// `remat profile`: refuses devices it does not know, profiles on the CPU everywhere, says why when
// there is no GPU (or no GPU backend in this build), and with a GPU writes the measured workspaces
// and costs into the chain.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.hpp"
#include "remat/devices/devices.hpp"

namespace remat {
namespace {

class ProfileCli : public testing::CliTest {
 protected:
  std::string smallChain() const {
    return write("small.json", R"({"format": "remat-chain/1", "name": "small",
    "input": {"shape": [2, 3, 8, 8], "dtype": "float32"},
    "layers": [{"name": "conv", "kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
               {"name": "relu", "kind": "relu"},
               {"name": "flatten", "kind": "flatten"},
               {"name": "fc", "kind": "linear", "out_features": 5}]})");
  }

  // Every layer but flatten (which moves no data) has a measured workspace and positive costs.
  static void expectProfiled(const std::string& path) {
    std::ifstream in(path);
    const auto json = nlohmann::json::parse(in);
    for (const auto& layer : json["layers"]) {
      if (layer["kind"] == "flatten") continue;
      EXPECT_TRUE(layer.contains("fwd_workspace_bytes")) << layer.dump();
      EXPECT_TRUE(layer.contains("bwd_workspace_bytes")) << layer.dump();
      EXPECT_GT(layer.value("fwd_cost", 0.0), 0.0) << layer.dump();
      EXPECT_GT(layer.value("bwd_cost", 0.0), 0.0) << layer.dump();
    }
  }
};

TEST_F(ProfileCli, UnknownDevicesAreRefusedNamingTheKnownOnes) {
  auto r = testing::runRemat({"profile", smallChain(), "--device", "tpu"});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("unknown device 'tpu' (expected one of: cpu, gpu)"), std::string::npos) << r.err;
}

TEST_F(ProfileCli, ProfilesOnTheCpu) {
  const std::string output = path("small-cpu.json");
  auto r = testing::runRemat({"profile", smallChain(), "--device", "cpu", "--output", output, "--repeats", "2"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("device: cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fwd ms"), std::string::npos) << r.out;
  expectProfiled(output);
}

TEST_F(ProfileCli, MissingChainIsBadInput) {
  auto r = testing::runRemat({"profile", "/nonexistent/chain.json", "--device", "gpu"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
}

TEST_F(ProfileCli, ProfilesOnTheGpuOrSaysWhyNot) {
  const std::string output = path("small-profiled.json");
  auto r = testing::runRemat({"profile", smallChain(), "--device", "gpu", "--output", output, "--repeats", "2"});
  if (Status available = deviceAvailable("gpu"); !available.isOk()) {
    EXPECT_EQ(r.exitCode, 2);
    EXPECT_NE(r.err.find(available.message()), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(output));
    GTEST_SKIP() << available.message();
  }
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("fwd ms"), std::string::npos) << r.out;
  expectProfiled(output);
}

}  // namespace
}  // namespace remat
