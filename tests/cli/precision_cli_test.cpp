// --precision (docs/memory-model.md section 11.7) through runCli: every chain command takes it and
// refuses a bad value naming the option and the valid ones (exit 2); plan --json carries the
// precision, the float32 static block of the mixed modes and the autocast weight copies; compare
// names the dtypes; the CPU executor refuses a precision it cannot run (exit 2).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "cpu_bfloat16.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::runRemat;

class PrecisionCli : public testing::CliTest {};

TEST_F(PrecisionCli, EveryChainCommandTakesItAndRefusesABadValue) {
  const std::string chain = path("r18.json");
  ASSERT_EQ(runRemat({"zoo", "export", "resnet18", "--batch", "2", "--resolution", "32", "--output", chain}).exitCode,
            0);
  const std::vector<std::vector<std::string>> commands = {{"simulate", chain, "--checkpoints", ""},
                                                          {"plan", chain, "--planner", "optimal"},
                                                          {"compare", chain},
                                                          {"tradeoff", chain}};
  for (auto command : commands) {
    auto bad = command;
    bad.insert(bad.end(), {"--precision", "fp8"});
    const auto refused = runRemat(bad);
    EXPECT_EQ(refused.exitCode, 2) << command[0];
    EXPECT_NE(
        refused.err.find("--precision: unknown precision 'fp8' (valid: fp32, bf16, fp16, bf16-mixed, fp16-mixed)"),
        std::string::npos)
        << command[0] << ": " << refused.err;
    for (const char* precision : {"fp32", "bf16", "fp16", "bf16-mixed", "fp16-mixed"}) {
      auto good = command;
      good.insert(good.end(), {"--precision", precision, "--optimizer", "adamw", "--grads", "on-backward"});
      const auto result = runRemat(good);
      EXPECT_EQ(result.exitCode, 0) << command[0] << " " << precision << ": " << result.err;
    }
  }
}

json planJson(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"plan", "zoo:resnet18", "--batch", "4", "--planner", "none", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto result = runRemat(args);
  EXPECT_EQ(result.exitCode, 0) << result.err;
  return result.exitCode == 0 ? json::parse(result.out) : json::object();
}

TEST_F(PrecisionCli, PlanJsonCarriesThePrecisionAndTheStaticBreakdown) {
  const json fp32 = planJson({"--optimizer", "adamw", "--grads", "on-backward"});
  const json mixed = planJson({"--optimizer", "adamw", "--grads", "on-backward", "--precision", "bf16-mixed"});
  const json bf16 = planJson({"--optimizer", "adamw", "--grads", "on-backward", "--precision", "bf16"});
  ASSERT_TRUE(fp32.contains("static") && mixed.contains("static") && bf16.contains("static"));
  EXPECT_EQ(fp32["step"]["precision"], "fp32");
  EXPECT_EQ(mixed["step"]["precision"], "bf16-mixed");
  EXPECT_EQ(bf16["step"]["precision"], "bf16");
  // Mixed: float32 master weights, moments and input; pure bf16: all of it half.
  EXPECT_EQ(mixed["static"], fp32["static"]);
  EXPECT_EQ(bf16["static"]["weight_bytes"].get<std::uint64_t>() * 2,
            fp32["static"]["weight_bytes"].get<std::uint64_t>());
  // The labels are int64 at every precision: one per sample of the batch of 4, beside the input.
  const std::uint64_t labels = fp32["static"]["label_bytes"];
  EXPECT_EQ(labels, 4u * 8u);
  EXPECT_EQ(bf16["static"]["label_bytes"], labels);
  EXPECT_EQ((bf16["static_bytes"].get<std::uint64_t>() - labels) * 2,
            fp32["static_bytes"].get<std::uint64_t>() - labels);
  // The half weight copies: about 2 bytes a parameter (not the batch norms', not the fc's bias).
  const std::uint64_t weights = fp32["static"]["weight_bytes"];
  const std::uint64_t copies = mixed["autocast_weight_copy_bytes"];
  EXPECT_EQ(fp32["autocast_weight_copy_bytes"], 0);
  EXPECT_LT(copies, weights / 2);
  EXPECT_GT(copies, weights / 2 * 99 / 100);
  // Half activations make E smaller than float32's, the copies and float32 gradients larger than bf16's.
  EXPECT_LT(mixed["dynamic_peak_bytes"].get<std::uint64_t>(), fp32["dynamic_peak_bytes"].get<std::uint64_t>());
  EXPECT_GT(mixed["dynamic_peak_bytes"].get<std::uint64_t>(), bf16["dynamic_peak_bytes"].get<std::uint64_t>());
}

TEST_F(PrecisionCli, CompareAndPlanNameTheDtypes) {
  const auto compare = runRemat({"compare", "zoo:resnet18", "--batch", "2", "--precision", "fp16-mixed"});
  ASSERT_EQ(compare.exitCode, 0) << compare.err;
  EXPECT_NE(compare.out.find("float32 weights, fp16-mixed (autocast)"), std::string::npos) << compare.out;
  const auto plan =
      runRemat({"plan", "zoo:resnet18", "--batch", "2", "--planner", "none", "--precision", "bf16-mixed"});
  ASSERT_EQ(plan.exitCode, 0) << plan.err;
  EXPECT_NE(plan.out.find("step         adamw, foreach on, gradients on backward, bf16-mixed"), std::string::npos)
      << plan.out;
}

TEST_F(PrecisionCli, TheCpuExecutorRefusesWhatItCannotRun) {
  const std::string chain = path("r18.json");
  ASSERT_EQ(runRemat({"zoo", "export", "resnet18", "--batch", "2", "--resolution", "8", "--output", chain}).exitCode,
            0);
  // bf16-mixed runs ResNet's residual blocks and EfficientNet's Squeeze-and-Excitation blocks.
  const std::string efficient = path("effb0.json");
  ASSERT_EQ(runRemat({"zoo", "export", "efficientnet_b0", "--batch", "2", "--resolution", "32", "--output", efficient})
                .exitCode,
            0);
  // A CPU without oneDNN's bfloat16 kernels (no AVX-512) refuses bf16 and bf16-mixed by name instead.
  const bool runsBfloat16 = cpu::cpuBfloat16Support().isOk();
  auto expectBfloat16Run = [&](const auto& result, const char* precision) {
    if (runsBfloat16) {
      EXPECT_EQ(result.exitCode, 0) << result.err;
      return;
    }
    EXPECT_EQ(result.exitCode, 2) << result.err;
    EXPECT_NE(result.err.find(std::string("precision ") + precision + " on the cpu: oneDNN"), std::string::npos)
        << result.err;
    EXPECT_NE(result.err.find("has no bfloat16 convolution or matmul on this CPU"), std::string::npos) << result.err;
  };
  const auto blocks = runRemat({"run", efficient, "--planner", "none", "--device", "cpu", "--precision", "bf16-mixed"});
  expectBfloat16Run(blocks, "bf16-mixed");
  const auto resnet = runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--precision", "bf16-mixed"});
  expectBfloat16Run(resnet, "bf16-mixed");
  const auto fp16 = runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--precision", "fp16-mixed"});
  EXPECT_EQ(fp16.exitCode, 2);
  EXPECT_NE(fp16.err.find("cpu: layer 1 ('conv1', conv2d): precision fp16-mixed: oneDNN 2.6 has no float16 "
                          "convolution on the CPU; run bf16-mixed"),
            std::string::npos)
      << fp16.err;
  // Pure bf16 runs (the model cast to bfloat16); pure fp16 keeps the located refusal.
  const auto pure = runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--precision", "bf16"});
  expectBfloat16Run(pure, "bf16");
  const auto pureFp16 = runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--precision", "fp16"});
  EXPECT_EQ(pureFp16.exitCode, 2);
  EXPECT_NE(
      pureFp16.err.find("cpu: layer 1 ('conv1', conv2d): the CPU backend runs float32 only; the chain is float16"),
      std::string::npos)
      << pureFp16.err;
  const auto fp32 = runRemat({"run", chain, "--planner", "none", "--device", "cpu", "--precision", "fp32"});
  EXPECT_EQ(fp32.exitCode, 0) << fp32.err;
}

// issue 24: `remat run zoo:resnet18 --precision bf16 --device cpu`, measured as predicted.
TEST_F(PrecisionCli, TheCpuExecutorMeasuresPureBf16ResNet18AsPredicted) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const auto run =
      runRemat({"run", "zoo:resnet18", "--batch", "2", "--precision", "bf16", "--device", "cpu", "--planner", "sqrt"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("every op's measured footprint and live-after equal the prediction"), std::string::npos)
      << run.out;
}

// issue 24: GPT-2 small cast to bfloat16 (its embedding, twelve blocks, the tied head) at batch 1,
// sequence 16, sqrt's plan, measured as predicted.
TEST_F(PrecisionCli, TheCpuExecutorMeasuresPureBf16Gpt2AsPredicted) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const auto run = runRemat({"run", "zoo:gpt2", "--batch", "1", "--sequence", "16", "--precision", "bf16", "--device",
                             "cpu", "--planner", "sqrt"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("every op's measured footprint and live-after equal the prediction"), std::string::npos)
      << run.out;
}

TEST_F(PrecisionCli, TheCpuExecutorMeasuresBf16MixedAsPredicted) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const std::string chain = std::string(REMAT_TEST_DATA_DIR) + "/autocast_cnn.json";
  const auto run = runRemat({"run", chain, "--planner", "optimal", "--device", "cpu", "--precision", "bf16-mixed"});
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("every op's measured footprint and live-after equal the prediction"), std::string::npos)
      << run.out;
}

}  // namespace
}  // namespace remat
