// The step options (--optimizer, --foreach, --grads; docs/memory-model.md section 11) through
// runCli: every chain command takes them and refuses a bad value naming the option (exit 2);
// plan --json breaks the static block down; a CPU run under AdamW with gradients on backward
// measures what the simulator predicts, STEP included, and its timeline files read back.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "remat/report/exporters.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::runRemat;

class StepOptionsCli : public testing::CliTest {};

TEST_F(StepOptionsCli, EveryChainCommandRefusesBadValuesNamingTheOption) {
  const std::string chain = writeGoldenChain(0);
  const std::vector<std::vector<std::string>> commands = {{"simulate", chain, "--checkpoints", ""},
                                                          {"plan", chain, "--planner", "optimal"},
                                                          {"compare", chain},
                                                          {"tradeoff", chain},
                                                          {"run", chain, "--planner", "none", "--device", "cpu"}};
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--optimizer", "rmsprop"},
       "--optimizer: unknown optimizer 'rmsprop' (valid: none, sgd, momentum, adam, adamw)"},
      {{"--foreach", "yes"}, "--foreach: unknown foreach setting 'yes' (valid: on, off)"},
      {{"--grads", "lazy"}, "--grads: unknown gradient mode 'lazy' (valid: in-place, on-backward, static)"}};
  for (const auto& command : commands) {
    for (const auto& [option, message] : bad) {
      std::vector<std::string> args = command;
      args.insert(args.end(), option.begin(), option.end());
      const auto result = runRemat(args);
      EXPECT_EQ(result.exitCode, 2) << command[0] << " " << option[0];
      EXPECT_NE(result.err.find(message), std::string::npos) << command[0] << ": " << result.err;
    }
    std::vector<std::string> good = command;
    good.insert(good.end(), {"--optimizer", "adamw", "--foreach", "off", "--grads", "on-backward"});
    const auto result = runRemat(good);
    EXPECT_EQ(result.exitCode, 0) << command[0] << ": " << result.err;
  }
}

// Without step options a command plans PyTorch 2's step (AdamW, foreach, gradients on backward),
// the same as naming it; --optimizer none --grads in-place is the static block of the paper's model.
TEST_F(StepOptionsCli, PlanJsonBreaksTheStaticBlockDown) {
  const auto plain = runRemat({"plan", "zoo:resnet18", "--batch", "2", "--planner", "optimal", "--json", "--optimizer",
                               "none", "--grads", "in-place"});
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  const json before = json::parse(plain.out);
  const json& parts = before["static"];
  EXPECT_EQ(parts["gradient_bytes"], parts["weight_bytes"]);  // static gradients, no state
  EXPECT_EQ(parts["optimizer_state_bytes"], 0);
  EXPECT_EQ(before["step"],
            json({{"optimizer", "none"}, {"foreach", true}, {"grads", "in-place"}, {"precision", "fp32"}}));

  const auto adamw = runRemat({"plan", "zoo:resnet18", "--batch", "2", "--planner", "optimal", "--json", "--optimizer",
                               "adamw", "--grads", "on-backward"});
  ASSERT_EQ(adamw.exitCode, 0) << adamw.err;
  const json after = json::parse(adamw.out);
  const json& s = after["static"];
  const std::uint64_t weights = s["weight_bytes"];
  EXPECT_EQ(s["gradient_bytes"], 0);
  EXPECT_EQ(s["optimizer_state_bytes"], 2 * weights);
  EXPECT_EQ(s["label_bytes"], 2 * 8);  // int64, one per sample
  EXPECT_EQ(after["static_bytes"].get<std::uint64_t>(),
            s["input_bytes"].get<std::uint64_t>() + s["label_bytes"].get<std::uint64_t>() + 3 * weights);
  // Every gradient is alive at the optimizer step, so E is at least P.
  EXPECT_GE(after["dynamic_peak_bytes"].get<std::uint64_t>(), weights);
  EXPECT_GT(after["peak_bytes"].get<std::uint64_t>(), before["peak_bytes"].get<std::uint64_t>());

  const auto defaults = runRemat({"plan", "zoo:resnet18", "--batch", "2", "--planner", "optimal", "--json"});
  ASSERT_EQ(defaults.exitCode, 0) << defaults.err;
  const json byDefault = json::parse(defaults.out);
  EXPECT_EQ(byDefault["step"],
            json({{"optimizer", "adamw"}, {"foreach", true}, {"grads", "on-backward"}, {"precision", "fp32"}}));
  EXPECT_EQ(byDefault["static"], s);
  EXPECT_EQ(byDefault["peak_bytes"], after["peak_bytes"]);
  EXPECT_EQ(byDefault["checkpoints"], after["checkpoints"]);
  // The table says which step it planned.
  const auto table = runRemat({"plan", "zoo:resnet18", "--batch", "2", "--planner", "optimal"});
  ASSERT_EQ(table.exitCode, 0) << table.err;
  EXPECT_NE(table.out.find("adamw, foreach on, gradients on backward"), std::string::npos) << table.out;
}

TEST_F(StepOptionsCli, CpuRunUnderAdamWMatchesThePredictionAndReadsBack) {
  const std::string file = path("resnet18.json");
  ASSERT_EQ(runRemat({"zoo", "export", "resnet18", "--batch", "2", "--resolution", "8", "--output", file}).exitCode, 0);
  for (const char* name : {"t.csv", "t.json"}) {
    const auto result = runRemat({"run", file, "--planner", "optimal", "--device", "cpu", "--steps", "2", "--json",
                                  "--optimizer", "adamw", "--grads", "on-backward", "--timeline", path(name)});
    ASSERT_EQ(result.exitCode, 0) << result.err;
    EXPECT_EQ(json::parse(result.out)["matches_prediction"], true) << result.out;
    auto timelines = readTimelines(path(name));
    ASSERT_TRUE(timelines.isOk()) << timelines.status().message();
    ASSERT_EQ(timelines->size(), 3u);
    for (const Timeline& t : *timelines) {
      ASSERT_FALSE(t.entries.empty());
      EXPECT_EQ(t.entries.back().op, (Op{OpKind::Step, 0})) << name;
      EXPECT_EQ(t.entries.back().footprintBytes, (*timelines)[0].entries.back().footprintBytes);
    }
  }
}

TEST_F(StepOptionsCli, FitCountsTheOptimizerState) {
  // ResNet-18's weights are 44.6 MiB: with AdamW's state the static block alone is over 100 MiB.
  const auto result = runRemat(
      {"plan", "zoo:resnet18", "--batch", "2", "--fit", "100MiB", "--optimizer", "adamw", "--grads", "static"});
  EXPECT_EQ(result.exitCode, 2);
  EXPECT_NE(result.err.find("(input + labels + parameters + parameter gradients + optimizer state)"), std::string::npos)
      << result.err;
  // The default step's gradients are made on backward: the static block holds the state, not them.
  const auto byDefault = runRemat({"plan", "zoo:resnet18", "--batch", "2", "--fit", "60MiB"});
  EXPECT_EQ(byDefault.exitCode, 2);
  EXPECT_NE(byDefault.err.find("(input + labels + parameters + optimizer state)"), std::string::npos) << byDefault.err;
}

// Under --grads static each backward holds its fresh weight gradient before AccumulateGrad adds it
// in (memory-model.md 11.2): VGG-11's B(classifier.0) holds its 392 MiB gradient, which the in-place
// model does not; no other op changes by more, the forward ops not at all, and the fit counts it.
TEST_F(StepOptionsCli, StaticGradientsCountTheFreshGradient) {
  auto simulated = [](const char* grads) {
    const auto result = runRemat({"simulate", "zoo:vgg11", "--batch", "2", "--checkpoints", "", "--json", "--optimizer",
                                  "sgd", "--grads", grads});
    EXPECT_EQ(result.exitCode, 0) << result.err;
    return result.exitCode == 0 ? json::parse(result.out) : json::object();
  };
  const json inPlace = simulated("in-place");
  const json fresh = simulated("static");
  ASSERT_TRUE(inPlace.contains("ops") && fresh.contains("ops"));
  ASSERT_EQ(inPlace["ops"].size(), fresh["ops"].size());
  EXPECT_EQ(fresh["static_bytes"], inPlace["static_bytes"]);
  std::uint64_t most = 0;
  for (std::size_t i = 0; i < fresh["ops"].size(); ++i) {
    const std::uint64_t a = inPlace["ops"][i]["footprint_bytes"], b = fresh["ops"][i]["footprint_bytes"];
    ASSERT_GE(b, a) << i;
    if (fresh["ops"][i]["op"] != "B") EXPECT_EQ(b, a) << i;
    most = std::max(most, b - a);
  }
  // classifier.0: 512 x 7 x 7 x 4096 weights + 4096 biases, float32.
  const std::uint64_t classifier0 = (512ull * 7 * 7 * 4096 + 4096) * 4;
  EXPECT_EQ(most, classifier0);
  EXPECT_GT(fresh["peak_bytes"].get<std::uint64_t>(), inPlace["peak_bytes"].get<std::uint64_t>() + classifier0 / 2);
  const auto unknown = runRemat({"plan", "zoo:vgg11", "--planner", "none", "--grads", "fresh"});
  EXPECT_EQ(unknown.exitCode, 2);
  EXPECT_NE(unknown.err.find("(valid: in-place, on-backward, static)"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace remat
