// fp16-mixed runs on the GPU (issue 24; gpu/src/half_type.hpp, half_io.cuh, the GradScaler in
// cuda_device.cpp and kernels_optimizer.cu): bf16-mixed's kernels in IEEE float16 and
// torch.cuda.amp.GradScaler's defaults. Under AdamW (scaler active: the seed scaled by 2^16, the
// float32 master gradients unscaled with the inf/NaN check before the step) and every step mode,
// an MLP, a plain CNN and ResNet-18 measure the model's prediction op by op under every planner's
// plan, STEP included, the static bytes too (the scaler's two scalars sit outside the counted pool,
// as the model leaves them out). The gradients are the GPU's float32 run's within float16's
// precision. A forced overflow (scaler.update(2^40)) makes inf gradients: the step is skipped (the
// parameters, and so the next step's gradients, are the untouched ones) and the scale halved; a
// clean step keeps the scale. bf16-mixed and fp16-mixed chains alternate on one device through the
// half type switch. Needs a GPU: without one every test skips, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "precision_runs.hpp"
#include "executor_helpers.hpp"
#include "gpu_test_helpers.hpp"
#include "remat/gpu/cuda_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/zoo.hpp"

namespace remat::gpu {
namespace {

constexpr const char* kMlp = R"({
  "format": "remat-chain/1", "name": "mlp", "input": {"shape": [8, 192], "dtype": "float32"},
  "layers": [
    {"kind": "linear", "name": "fc1", "out_features": 96},
    {"kind": "relu", "name": "relu1"}, {"kind": "dropout", "name": "drop", "p": 0.2},
    {"kind": "linear", "name": "fc2", "out_features": 64, "bias": false}, {"kind": "gelu", "name": "gelu"},
    {"kind": "layernorm", "name": "ln"}, {"kind": "linear", "name": "fc3", "out_features": 10}]})";

constexpr const char* kPlainCnn = R"({
  "format": "remat-chain/1", "name": "plain-cnn", "input": {"shape": [4, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "conv1", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "bias": true},
    {"kind": "batchnorm", "name": "bn1"}, {"kind": "relu", "name": "relu1"},
    {"kind": "maxpool", "name": "pool", "kernel": 2, "stride": 2},
    {"kind": "conv2d", "name": "conv2", "out_channels": 16, "kernel": 3, "stride": 2, "padding": 1, "bias": false},
    {"kind": "batchnorm", "name": "bn2"}, {"kind": "relu6", "name": "relu6"},
    {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "linear", "name": "fc", "out_features": 10}]})";

Chain parsedChain(const char* text) {
  auto chain = parseChain(text, "cuda_fp16_run_test.cpp");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain ? std::move(chain).value() : Chain{};
}

Chain resnet18() {
  auto spec = zooChain("resnet18", {.batch = 2, .resolution = 32, .numClasses = 10});
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  if (!spec) return Chain{};
  auto chain = buildChain(*spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain ? std::move(chain).value() : Chain{};
}

constexpr StepOptions kAdamW{OptimizerKind::AdamW, true, GradMode::OnBackward};
constexpr StepOptions kSgd{OptimizerKind::Sgd, false, GradMode::Static};

// Store-all and every planner's plan, each from a freshly prepared interpreter (the same initial
// parameters and scaler): every op measured as predicted, STEP included, the static bytes the
// model's, and the gradients after the step (unscaled) store-all's bit for bit.
void expectEveryPlanMeasuredWithTheScaler(const Chain& chain, CudaDevice& device, std::uint64_t seed) {
  const RunOptions options{.digestGradients = true};
  std::vector<std::uint64_t> reference;
  std::vector<std::pair<std::string, Plan>> plans = {{"store-all", Plan{}}};
  for (auto& named : testing::plannerPlans(chain, testing::allPlanners())) plans.push_back(named);
  for (const auto& [name, plan] : plans) {
    SCOPED_TRACE(name);
    auto interp = Interpreter::create(chain, device, testing::seeded(seed));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
    auto run = (*interp)->run(plan, options);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectMatchesSimulation(chain, plan, run->timelines[0]);
    EXPECT_EQ(run->timelines[0].entries.back().op.kind, OpKind::Step);
    auto scale = device.lossScale();
    ASSERT_TRUE(scale.isOk()) << scale.status().message();
    EXPECT_EQ(*scale, 65536.0f) << "a clean step keeps the scale";
    if (reference.empty()) reference = run->parameterGradientDigests;
    EXPECT_EQ(run->parameterGradientDigests, reference);
  }
}

// L2 norm of (g - f) against f's, per parameter layer.
double relativeL2(const std::vector<float>& g, const std::vector<float>& f) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double d = static_cast<double>(g[i]) - static_cast<double>(f[i]);
    diff += d * d;
    norm += static_cast<double>(f[i]) * static_cast<double>(f[i]);
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : (diff > 0.0 ? 1.0 : 0.0);
}

// One store-all step's gradients under `precision` and `step` on the GPU (after the step: the
// scaler's unscaled ones under fp16-mixed with SGD).
std::vector<std::vector<std::byte>> gpuGradients(const Chain& base, Precision precision, StepOptions step,
                                                 std::uint64_t seed) {
  auto device = createCudaDevice({});
  EXPECT_TRUE(device.isOk()) << device.status().message();
  if (!device) return {};
  const Chain chain = testing::fittedTo(testing::withStep(base, precision, step), **device);
  auto run = runPlan(chain, Plan{}, **device, testing::seeded(seed), RunOptions{.captureGradients = true});
  EXPECT_TRUE(run.isOk()) << run.status().message();
  return run ? run->parameterGradients : std::vector<std::vector<std::byte>>{};
}

// float16 keeps 11 significant bits (unit roundoff 2^-11, about 4.9e-4), bfloat16 8 (3.9e-3): a
// layer's gradient passes through a few half roundings per layer behind it (activations, weight
// copies, the half d(input)s), each at most 2^-11 relative, and cuDNN's and cuBLAS's float32 sums
// differ in order. 1% in the L2 norm is about 20 roundings' worth for the small chains (bf16-mixed's
// tests allow 3% against the CPU for 8 bits); ResNet-18's 20 layers of blocks get 2%.
void expectGradientsNearFloat32(const Chain& base, StepOptions step, double tolerance) {
  const auto fp32 = gpuGradients(base, Precision::Fp32, step, 5);
  const auto fp16 = gpuGradients(base, Precision::Fp16Mixed, step, 5);
  ASSERT_EQ(fp16.size(), fp32.size());
  for (std::size_t l = 0; l < fp32.size(); ++l) {
    const std::vector<float> f = asFloats(fp32[l]);
    const std::vector<float> g = asFloats(fp16[l]);
    ASSERT_EQ(g.size(), f.size()) << "layer " << l + 1;
    if (f.empty()) continue;
    EXPECT_LE(relativeL2(g, f), tolerance) << "layer " << l + 1 << " ('" << base.layers[l].name << "')";
    EXPECT_TRUE(std::any_of(f.begin(), f.end(), [](float v) { return v != 0.0f; }))
        << "layer " << l + 1 << ": all-zero gradients test nothing";
  }
}

class CudaFp16RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status available = cudaDeviceAvailable();
    if (!available.isOk()) GTEST_SKIP() << "fp16-mixed on the GPU: " << available.message();
  }
};

TEST_F(CudaFp16RunTest, EveryPlanMeasuresThePredictionWithTheGradScaler) {
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  for (const Chain& base : {parsedChain(kMlp), parsedChain(kPlainCnn), resnet18()}) {
    SCOPED_TRACE(base.name);
    const Chain chain = testing::fittedTo(testing::withStep(base, Precision::Fp16Mixed, kAdamW), **device);
    expectEveryPlanMeasuredWithTheScaler(chain, **device, 3);
  }
}

// Every optimizer, foreach on and off, gradients static and on backward: two steps each, measured
// as predicted (optimizer none: no scaler).
TEST_F(CudaFp16RunTest, EveryStepModeMeasuresThePrediction) {
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  for (std::size_t mode = 0; mode < testing::kStepModeCount; ++mode) {
    const Chain chain = testing::fittedTo(
        testing::withStep(parsedChain(kPlainCnn), Precision::Fp16Mixed, testing::stepMode(mode)), **device);
    SCOPED_TRACE(describeStepOptions(chain.step));
    auto interp = Interpreter::create(chain, **device, testing::seeded(mode));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
    auto run = (*interp)->run(Plan{}, RunOptions{.steps = 2});
    ASSERT_TRUE(run.isOk()) << run.status().message();
    for (const Timeline& t : run->timelines) testing::expectMatchesSimulation(chain, Plan{}, t);
    EXPECT_EQ((**device).lossScale().isOk(), hasOptimizerStep(chain.step));
  }
}

TEST_F(CudaFp16RunTest, GradientsAreFloat32sWithinFloat16Precision) {
  expectGradientsNearFloat32(parsedChain(kMlp), kSgd, 1e-2);
  expectGradientsNearFloat32(parsedChain(kPlainCnn), kSgd, 1e-2);
  expectGradientsNearFloat32(parsedChain(kPlainCnn), StepOptions{}, 1e-2);  // no optimizer: no scaler
  expectGradientsNearFloat32(resnet18(), kSgd, 2e-2);
}

// scaler.update(2^40): the seed times 2^40 overflows float16, the gradients are inf/NaN, the step
// is skipped and the scale halved. Skipped means the parameters are untouched: the next step's
// gradients are those of a fresh interpreter's first step, where after a clean step they are not.
TEST_F(CudaFp16RunTest, AnOverflowSkipsTheStepAndHalvesTheScale) {
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  const Chain chain =
      testing::fittedTo(testing::withStep(parsedChain(kPlainCnn), Precision::Fp16Mixed, kSgd), **device);
  const RunOptions capture{.captureGradients = true, .digestGradients = true};
  auto fresh = runPlan(chain, Plan{}, **device, testing::seeded(11), capture);
  ASSERT_TRUE(fresh.isOk()) << fresh.status().message();

  auto interp = Interpreter::create(chain, **device, testing::seeded(11));
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  ASSERT_TRUE((**device).setLossScale(std::ldexp(1.0f, 40)).isOk());
  auto overflow = (*interp)->run(Plan{}, capture);
  ASSERT_TRUE(overflow.isOk()) << overflow.status().message();
  bool nonFinite = false;
  for (const auto& bytes : overflow->parameterGradients)
    for (float v : asFloats(bytes)) nonFinite = nonFinite || !std::isfinite(v);
  EXPECT_TRUE(nonFinite) << "2^40 times the seed must overflow float16";
  testing::expectMatchesSimulation(chain, Plan{}, overflow->timelines[0]);  // STEP allocates nothing either way (SGD)
  auto scale = (**device).lossScale();
  ASSERT_TRUE(scale.isOk()) << scale.status().message();
  EXPECT_EQ(*scale, std::ldexp(1.0f, 39));

  ASSERT_TRUE((**device).setLossScale(65536.0f).isOk());
  auto after = (*interp)->run(Plan{}, capture);
  ASSERT_TRUE(after.isOk()) << after.status().message();
  EXPECT_EQ(after->parameterGradientDigests, fresh->parameterGradientDigests) << "the skipped step changed parameters";
  // The control: after a clean step the parameters moved, and so did the gradients.
  auto next = (*interp)->run(Plan{}, capture);
  ASSERT_TRUE(next.isOk()) << next.status().message();
  EXPECT_NE(next->parameterGradientDigests, fresh->parameterGradientDigests);
  scale = (**device).lossScale();
  ASSERT_TRUE(scale.isOk()) << scale.status().message();
  EXPECT_EQ(*scale, 65536.0f);
}

// bf16-mixed and fp16-mixed chains on one device, one after the other: each prepare and call
// selects its half type, so each run measures its prediction and repeats its own gradients.
TEST_F(CudaFp16RunTest, Bf16AndFp16ChainsAlternateOnOneDevice) {
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  const Chain base = parsedChain(kPlainCnn);
  const Chain fp16 = testing::fittedTo(testing::withStep(base, Precision::Fp16Mixed, kSgd), **device);
  const Chain bf16 = testing::fittedTo(testing::withStep(base, Precision::Bf16Mixed, kSgd), **device);
  const RunOptions digest{.digestGradients = true};
  std::vector<std::uint64_t> first[2];
  for (int round = 0; round < 2; ++round)
    for (int which = 0; which < 2; ++which) {
      const Chain& chain = which == 0 ? fp16 : bf16;
      auto run = runPlan(chain, Plan{}, **device, testing::seeded(4), digest);
      ASSERT_TRUE(run.isOk()) << run.status().message();
      testing::expectMatchesSimulation(chain, Plan{}, run->timelines[0]);
      if (round == 0)
        first[which] = run->parameterGradientDigests;
      else
        EXPECT_EQ(run->parameterGradientDigests, first[which]) << precisionName(chain.step.precision);
    }
  EXPECT_NE(first[0], first[1]) << "float16 and bfloat16 round differently";
}

}  // namespace
}  // namespace remat::gpu
