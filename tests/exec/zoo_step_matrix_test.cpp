// Issue 24's matrix: every zoo model x optimizer x gradient mode x precision at batch 2 and the
// model's smallest resolution (token models: sequence 8), two training steps on the CPU, each op's
// measured footprint and live-after equal to the simulator's, the optimizer's STEP included.
// One test per model and precision, so ctest spreads them over the cores. foreach alternates with
// the optimizer and gradient mode, so each optimizer runs both implementations; the 20-mode
// product (foreach x everything) runs on small chains in optimizer_run_test.cpp and
// precision_runs.hpp. The models over 50 M parameters (AlexNet, the VGGs, ResNet-152, ViT-B/16,
// GPT-2, BERT: a step of AdamW alone takes seconds on one thread) run one (optimizer, gradient
// mode) pair per precision, a different one per model and precision, so that together they run
// every pair under every precision; the smaller models run all ten. fp16 and fp16-mixed are
// refused at the first layer, by name (oneDNN 2.6 has no float16 convolution or matmul on this
// CPU), before anything is allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "chain_helpers.hpp"
#include "cpu_bfloat16.hpp"
#include "executor_helpers.hpp"
#include "precision_runs.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/planners.hpp"

namespace remat {
namespace {

using Case = std::tuple<std::string, Precision>;

Chain zooAtItsSmallest(const std::string& name) {
  ZooOptions options{.batch = 2, .numClasses = 10};
  for (const ZooEntry& e : zooModels()) {
    if (e.name != name) continue;
    options.resolution = e.minResolution;
    if (e.tokenModel) options.sequence = 8;
  }
  return testing::zooBuilt(name, options);
}

// The (optimizer, gradient mode) pairs, each with foreach on for one gradient mode and off for
// the other (so both implementations run for every optimizer).
std::vector<StepOptions> stepModes() {
  std::vector<StepOptions> modes;
  for (const OptimizerKind optimizer : optimizerKinds())
    for (const GradMode grads : {GradMode::OnBackward, GradMode::Static})
      modes.push_back({.optimizer = optimizer,
                       .foreach = (modes.size() / 2 + (grads == GradMode::Static ? 1 : 0)) % 2 == 0,
                       .grads = grads});
  return modes;
}

constexpr std::uint64_t kLargeModelParamBytes = 200'000'000;  // 50 M float32 parameters

std::uint64_t paramBytesOf(const Chain& chain) {
  std::uint64_t bytes = 0;
  for (std::size_t l = 1; l <= chain.size(); ++l) bytes += chain.at(l).paramBytes;
  return bytes;
}

// The zoo's models over 50 M parameters, in the zoo's order.
const std::vector<std::string>& largeModels() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ZooEntry& e : zooModels())
      if (paramBytesOf(zooAtItsSmallest(e.name)) > kLargeModelParamBytes) out.push_back(e.name);
    return out;
  }();
  return names;
}

// All ten pairs for the smaller models; one for the large ones, the k-th large model's k-th pair
// shifted by the precision (more large models than pairs: every pair runs under every precision).
std::vector<StepOptions> stepModesOf(const std::string& name, Precision precision) {
  std::vector<StepOptions> modes = stepModes();
  const auto& large = largeModels();
  const auto k = std::size_t(std::find(large.begin(), large.end(), name) - large.begin());
  if (k == large.size()) return modes;
  const std::size_t precisionIndex = precision == Precision::Fp32 ? 0 : precision == Precision::Bf16Mixed ? 1 : 2;
  return {modes[(k + precisionIndex) % modes.size()]};
}

void expectTwoStepsMeasured(cpu::CpuDevice& device, const Chain& chain, const Plan& plan, std::uint64_t seed) {
  auto interp = Interpreter::create(chain, device, testing::seeded(seed));
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
  auto run = (*interp)->run(plan, RunOptions{.steps = 2});
  ASSERT_TRUE(run.isOk()) << run.status().message();
  ASSERT_EQ(run->timelines.size(), 2u);
  for (const Timeline& t : run->timelines) testing::expectMatchesSimulation(chain, plan, t);
  EXPECT_EQ(run->timelines[0].entries.back().op.kind == OpKind::Step, hasOptimizerStep(chain.step));
}

class ZooStepMatrix : public ::testing::TestWithParam<Case> {};

TEST_P(ZooStepMatrix, EveryOptimizerAndGradientModeRunsAsPredicted) {
  const auto& [name, precision] = GetParam();
  if (precision != Precision::Fp32) REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const Chain zoo = zooAtItsSmallest(name);
  ASSERT_FALSE(zoo.layers.empty());
  cpu::CpuDevice device({.poisonMemory = true, .threads = 1});
  std::uint64_t seed = 0;
  for (const StepOptions& mode : stepModesOf(name, precision)) {
    const Chain chain = testing::fittedTo(testing::withStep(zoo, precision, mode), device);
    SCOPED_TRACE(name + ": " + describeStepOptions(chain.step));
    ASSERT_EQ(chain.step.precision, precision);
    expectTwoStepsMeasured(device, chain, Plan{}, ++seed);
    // PyTorch 2's default step also under optimal's plan: recomputation in the same precision.
    if (mode.optimizer == OptimizerKind::AdamW && mode.grads == GradMode::OnBackward) {
      auto optimal = runPlanner(chain, "optimal");
      ASSERT_TRUE(optimal.isOk()) << optimal.status().message();
      expectTwoStepsMeasured(device, chain, optimal->plan, seed);
    }
    if (HasFailure()) return;
  }
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

std::vector<std::string> zooNames() {
  std::vector<std::string> names;
  for (const ZooEntry& e : zooModels()) names.push_back(e.name);
  return names;
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  std::string precision(precisionName(std::get<1>(info.param)));
  for (char& c : precision)
    if (c == '-') c = '_';
  return std::get<0>(info.param) + "_" + precision;
}

INSTANTIATE_TEST_SUITE_P(AllModels, ZooStepMatrix,
                         ::testing::Combine(::testing::ValuesIn(zooNames()),
                                            ::testing::Values(Precision::Fp32, Precision::Bf16Mixed, Precision::Bf16)),
                         caseName);

// The rotation's premise: the large models together run every pair under every precision.
TEST(ZooStepMatrixCoverage, TheLargeModelsRunEveryPairUnderEveryPrecision) {
  EXPECT_GE(largeModels().size(), stepModes().size());
  EXPECT_EQ(stepModes().size(), 2 * optimizerKinds().size());
}

// What this CPU cannot run is refused at the first layer, named, before anything is allocated.
class ZooFloat16Refusal : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooFloat16Refusal, Fp16AndFp16MixedAreRefusedAtTheFirstLayer) {
  const Chain zoo = zooAtItsSmallest(GetParam());
  ASSERT_FALSE(zoo.layers.empty());
  cpu::CpuDevice device({.threads = 1});
  for (const Precision precision : {Precision::Fp16, Precision::Fp16Mixed}) {
    SCOPED_TRACE(std::string(precisionName(precision)));
    auto chain = withPrecision(zoo, precision);
    ASSERT_TRUE(chain.isOk()) << chain.status().message();  // planning it is fine
    const Status status = device.prepare(*chain);
    ASSERT_FALSE(status.isOk());
    EXPECT_EQ(status.code(), ErrorCode::InvalidInput);
    EXPECT_NE(status.message().find("layer 1 ('" + zoo.layers[0].name + "'"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("float16"), std::string::npos) << status.message();
  }
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

INSTANTIATE_TEST_SUITE_P(AllModels, ZooFloat16Refusal, ::testing::ValuesIn(zooNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace remat
