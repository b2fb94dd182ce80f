// Pure bf16 on the CPU (the model cast with .to(torch.bfloat16); docs/memory-model.md section
// 11.7, docs/executor.md): input, activations, parameters, gradients, optimizer state and the
// step's temporaries all bfloat16, no autocast copies. Every op's measured footprint equals the
// prediction under every planner's plan and in every optimizer, foreach and gradient mode; the
// plans' gradients are bitwise store-all's; the optimizer changes the weights; the gradients lie
// within bfloat16's precision of float32's. Float16 stays refused by layer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "chain_helpers.hpp"
#include "cpu_bfloat16.hpp"
#include "executor_helpers.hpp"
#include "precision_runs.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/precision.hpp"

namespace remat {
namespace {

using testing::withStep;

// conv-bn-relu twice (one conv with a bias), a max and an average pool, the global pool, dropout
// and the classifier.
Chain plainChain(Precision precision, StepOptions step = {}) {
  const Chain chain = testing::chainFromJson(nlohmann::json::parse(R"({
    "format": "remat-chain/1", "name": "plain", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
    "layers": [
      {"kind": "conv2d", "name": "conv1", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
      {"kind": "batchnorm", "name": "bn1"}, {"kind": "relu", "name": "relu1"},
      {"kind": "maxpool", "name": "pool", "kernel": 3, "stride": 2, "padding": 1},
      {"kind": "conv2d", "name": "conv2", "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "bias": true},
      {"kind": "batchnorm", "name": "bn2"}, {"kind": "relu", "name": "relu2"},
      {"kind": "avgpool", "name": "avg", "kernel": 2, "stride": 2},
      {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
      {"kind": "dropout", "name": "drop", "p": 0.25}, {"kind": "linear", "name": "fc", "out_features": 10}]})"));
  return withStep(chain, precision, step);
}

// Basic blocks (identity and downsampling shortcuts), a bottleneck and an inverted residual.
Chain residualChain(Precision precision, StepOptions step = {}) {
  const Chain chain = testing::chainFromJson(nlohmann::json::parse(R"({
    "format": "remat-chain/1", "name": "residual", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
    "layers": [
      {"kind": "conv2d", "name": "conv1", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
      {"kind": "batchnorm", "name": "bn1"}, {"kind": "relu", "name": "relu"},
      {"kind": "basic_block", "name": "layer1.0", "out_channels": 8, "stride": 1},
      {"kind": "basic_block", "name": "layer2.0", "out_channels": 16, "stride": 2},
      {"kind": "bottleneck", "name": "layer3.0", "out_channels": 32, "width": 8, "stride": 2},
      {"kind": "inverted_residual", "name": "ir", "out_channels": 32, "stride": 1, "expand_ratio": 2},
      {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
      {"kind": "linear", "name": "fc", "out_features": 10}]})"));
  return withStep(chain, precision, step);
}

TEST(PureBf16Run, TheModelHalvesEveryByteButTheStatistics) {
  const StepOptions adamw{.optimizer = OptimizerKind::AdamW, .grads = GradMode::Static};
  const Chain half = plainChain(Precision::Bf16, adamw);
  const Chain plain = plainChain(Precision::Fp32, adamw);
  EXPECT_EQ(half.dtype, DType::BFloat16);
  // Input, weights, gradients, both moments; the labels are int64 at every precision.
  const std::uint64_t labels = staticBreakdown(plain).labelBytes;
  EXPECT_EQ(staticBreakdown(half).labelBytes, labels);
  EXPECT_EQ(labels, 2u * 8u);
  EXPECT_EQ((half.staticBytes() - labels) * 2, plain.staticBytes() - labels);
  EXPECT_EQ(half.at(1).outBytes * 2, plain.at(1).outBytes);
  EXPECT_EQ(half.at(2).extraBytes, plain.at(2).extraBytes);  // batch norm's float32 mean and inverse std
  EXPECT_EQ(half.at(1).extraBytes, 0u);                      // no weight copy, no input cast
}

TEST(PureBf16Run, EveryPlanMeasuresThePredictionAndReproducesStoreAll) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  for (Chain (*make)(Precision, StepOptions) : {plainChain, residualChain})
    testing::expectEveryPlanMeasuredOnOneThread(make, Precision::Bf16, 3);
}

// SGD, momentum, Adam and AdamW, foreach on and off, gradients static and made on backward: two
// steps of every planner's plan, each op measured as predicted, STEP (bfloat16 state and
// temporaries) included, and each plan's gradients after the second step (so after one bfloat16
// update) bitwise store-all's.
void expectEveryStepModeMeasured(Chain (*make)(Precision, StepOptions)) {
  cpu::CpuDevice device({.poisonMemory = true, .threads = 1});
  for (std::size_t mode = 0; mode < testing::kStepModeCount; ++mode) {
    const Chain chain = testing::fittedTo(make(Precision::Bf16, testing::stepMode(mode)), device);
    SCOPED_TRACE(describeStepOptions(chain.step));
    std::vector<std::uint64_t> storeAll;
    for (const auto& [name, plan] : testing::plannerPlans(chain, testing::allPlanners())) {
      SCOPED_TRACE(name);
      auto interp = Interpreter::create(chain, device, testing::seeded(mode));
      ASSERT_TRUE(interp.isOk()) << interp.status().message();
      EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
      auto run = (*interp)->run(plan, RunOptions{.steps = 2, .digestGradients = true});
      ASSERT_TRUE(run.isOk()) << run.status().message();
      for (const Timeline& t : run->timelines) testing::expectMatchesSimulation(chain, plan, t);
      EXPECT_EQ(run->timelines[0].entries.back().op.kind == OpKind::Step, hasOptimizerStep(chain.step));
      if (storeAll.empty()) storeAll = run->parameterGradientDigests;  // none's plan comes first
      EXPECT_EQ(run->parameterGradientDigests, storeAll);
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

TEST(PureBf16Run, EveryOptimizerAndGradientMode) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  expectEveryStepModeMeasured(plainChain);
}

TEST(PureBf16Run, ResidualBlocksInEveryOptimizerAndGradientMode) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  expectEveryStepModeMeasured(residualChain);
}

std::vector<std::vector<std::byte>> gradientsAfter(const Chain& built, int steps, std::uint64_t seed) {
  cpu::CpuDevice device({.threads = 1});
  const Chain chain = testing::fittedTo(built, device);
  auto interp = Interpreter::create(chain, device, testing::seeded(seed));
  EXPECT_TRUE(interp.isOk()) << interp.status().message();
  if (!interp) return {};
  auto run = (*interp)->run(Plan{}, RunOptions{.steps = steps, .captureGradients = true});
  EXPECT_TRUE(run.isOk()) << run.status().message();
  return run ? run->parameterGradients : std::vector<std::vector<std::byte>>{};
}

// The same batch twice (the residual chain has no dropout): the second step's gradients differ
// from the first's only if the update changed the weights (every parameter layer), and without an
// optimizer they do not.
TEST(PureBf16Run, TheOptimizerChangesTheBfloat16Weights) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  for (OptimizerKind optimizer : {OptimizerKind::Sgd, OptimizerKind::Momentum, OptimizerKind::AdamW}) {
    const StepOptions step{.optimizer = optimizer, .grads = GradMode::OnBackward};
    const auto first = gradientsAfter(residualChain(Precision::Bf16, step), 1, 5);
    const auto second = gradientsAfter(residualChain(Precision::Bf16, step), 2, 5);
    ASSERT_EQ(first.size(), second.size());
    for (std::size_t l = 0; l < first.size(); ++l) {
      if (!first[l].empty()) {
        EXPECT_NE(first[l], second[l]) << "layer " << l + 1;
      }
    }
  }
  const StepOptions none{.optimizer = OptimizerKind::None, .grads = GradMode::OnBackward};
  EXPECT_EQ(gradientsAfter(residualChain(Precision::Bf16, none), 1, 5),
            gradientsAfter(residualChain(Precision::Bf16, none), 2, 5));
}

// The same weights (float32's rounded) and batch: each layer's bfloat16 gradient lies within
// bfloat16's precision of float32's (batch norm's backward at batch 2 cancels most bits, as in
// bf16-mixed's tests) and differs from it (the bfloat16 kernels ran).
TEST(PureBf16Run, GradientsAreFloat32sWithinBfloat16Precision) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const auto plain = gradientsAfter(plainChain(Precision::Fp32, {}), 1, 11);
  const auto half = gradientsAfter(plainChain(Precision::Bf16, {}), 1, 11);
  const std::vector<double> differences = testing::relativeHalfDifferences(plain, half);
  ASSERT_EQ(differences.size(), 5u);  // two convs, two batch norms, the linear (the chain's last layer)
  for (std::size_t l = 0; l < differences.size(); ++l) {
    EXPECT_LT(differences[l], l + 1 == differences.size() ? 0.05 : 0.6) << "parameter layer " << l + 1;
    EXPECT_GT(differences[l], 0.0) << "parameter layer " << l + 1;
  }
}

// torchvision's ResNet-18 at batch 2, 32x32, in three step modes: store-all and sqrt's plan, each
// op as predicted, sqrt's gradients bitwise store-all's.
TEST(PureBf16Run, ZooResNet18MeasuresThePrediction) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const Chain zoo = testing::zooBuilt("resnet18", {.batch = 2, .resolution = 32, .numClasses = 10});
  testing::expectZooSqrtReproducesStoreAll(
      zoo, Precision::Bf16,
      {StepOptions{.optimizer = OptimizerKind::AdamW, .grads = GradMode::OnBackward},
       StepOptions{.optimizer = OptimizerKind::Adam, .foreach = false},
       StepOptions{.optimizer = OptimizerKind::Momentum, .grads = GradMode::Static}});
}

// The other block kinds in pure bf16: MobileNetV2's inverted residuals, EfficientNet-B0's
// Squeeze-and-Excitation, ShuffleNetV2's channel slices and shuffles, with AdamW and gradients
// made on backward: store-all and sqrt's plan, each op as predicted.
TEST(PureBf16Run, ZooBlockKindsMeasureThePrediction) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  cpu::CpuDevice device;
  const StepOptions adamw{.optimizer = OptimizerKind::AdamW, .grads = GradMode::OnBackward};
  for (const char* name : {"mobilenet_v2", "efficientnet_b0", "shufflenet_v2_x1_0"}) {
    SCOPED_TRACE(name);
    const Chain zoo = testing::zooBuilt(name, {.batch = 2, .resolution = 32, .numClasses = 10});
    const Chain chain = testing::fittedTo(withStep(zoo, Precision::Bf16, adamw), device);
    auto sqrt = runPlanner(chain, "sqrt");
    ASSERT_TRUE(sqrt.isOk()) << sqrt.status().message();
    auto interp = Interpreter::create(chain, device, testing::seeded(7));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    for (const Plan& plan : {Plan{}, sqrt->plan}) {
      auto run = (*interp)->run(plan, RunOptions{});
      ASSERT_TRUE(run.isOk()) << run.status().message();
      testing::expectMatchesSimulation(chain, plan, run->timelines[0]);
    }
  }
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

// Float16 keeps the located refusal; a layer norm runs in bfloat16 (convnext_bf16_run_test.cpp
// measures it).
TEST(PureBf16Run, Float16IsRefusedByLayerAndLayerNormsPrepare) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  cpu::CpuDevice device;
  auto fp16 = withPrecision(plainChain(Precision::Fp32), Precision::Fp16);
  ASSERT_TRUE(fp16.isOk());
  const Status refused = device.prepare(*fp16);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(
      refused.message().find("layer 1 ('conv1', conv2d): the CPU backend runs float32 only; the chain is float16"),
      std::string::npos)
      << refused.message();
  const Chain norms = testing::chainFromJson(nlohmann::json::parse(R"({
    "format": "remat-chain/1", "name": "norms", "input": {"shape": [2, 8], "dtype": "bfloat16"},
    "layers": [{"kind": "linear", "name": "fc1", "out_features": 8}, {"kind": "layernorm", "name": "ln"}]})"));
  const Status norm = device.prepare(norms);
  EXPECT_TRUE(norm.isOk()) << norm.message();
}

}  // namespace
}  // namespace remat
