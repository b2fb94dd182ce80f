// bf16-mixed on the CPU for the zoo's CNNs beyond ResNet and MobileNetV2 (docs/memory-model.md
// section 11.7, docs/executor.md): Squeeze-and-Excitation blocks (EfficientNet-B0, MobileNetV3-Large,
// RegNetY-400MF) run every inner op in bfloat16 as PyTorch 1.13's CPU autocast does (the global
// pool, the 1x1 convolutions, SiLU / ReLU, sigmoid / hardsigmoid and the broadcasting product all
// write bfloat16: none is on autocast's fp32 list), and every op's measured footprint equals the
// prediction under every plan and in every optimizer and gradient mode; so do Inception's pool
// branches (bfloat16 max and average pools, concat, 1x7 / 7x1 convolutions) and the classic
// kinds' adaptive pool, and ShuffleNetV2's channel slices and shuffle (ConvNeXt's blocks:
// convnext_bf16_run_test.cpp). What has no kernel yet (a block whose float32 input meets a bfloat16
// operand), fp16-mixed and the pure half precisions are refused by layer.
#include <gtest/gtest.h>

#include <algorithm>
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

using testing::expectEveryStepModeMeasured;
using testing::gradientsOf;
using testing::relativeGradientDifferences;
using testing::withStep;

// A stem (conv, batch norm, SiLU), EfficientNet's Squeeze-and-Excitation (global pool, 1x1 conv,
// SiLU, 1x1 conv, sigmoid, the [N, C, 1, 1] scale times the block's input) and MobileNetV3's (ReLU,
// hardsigmoid), the global pool and the classifier.
Chain squeezeChain(Precision precision, StepOptions step = {}) {
  const Chain chain = testing::chainFromJson(nlohmann::json::parse(R"({
    "format": "remat-chain/1", "name": "squeeze", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
    "layers": [
      {"kind": "conv2d", "name": "stem", "out_channels": 8, "kernel": 3, "stride": 2, "padding": 1, "bias": false},
      {"kind": "batchnorm", "name": "bn"}, {"kind": "silu", "name": "silu"},
      {"name": "se1", "kind": "block", "ops": [
        {"name": "avgpool", "kind": "global_avgpool"}, {"name": "fc1", "kind": "conv2d", "out_channels": 2, "kernel": 1},
        {"name": "activation", "kind": "silu"}, {"name": "fc2", "kind": "conv2d", "out_channels": 8, "kernel": 1},
        {"name": "scale_activation", "kind": "sigmoid"}, {"name": "mul", "kind": "mul", "inputs": [5, 0]}]},
      {"kind": "conv2d", "name": "conv", "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
      {"name": "se2", "kind": "block", "ops": [
        {"name": "avgpool", "kind": "global_avgpool"}, {"name": "fc1", "kind": "conv2d", "out_channels": 4, "kernel": 1},
        {"name": "activation", "kind": "relu"}, {"name": "fc2", "kind": "conv2d", "out_channels": 16, "kernel": 1},
        {"name": "scale_activation", "kind": "hardsigmoid"}, {"name": "mul", "kind": "mul", "inputs": [0, 5]}]},
      {"kind": "hardswish", "name": "hswish"}, {"kind": "adaptive_avgpool", "name": "gap"},
      {"kind": "flatten", "name": "flat"}, {"kind": "linear", "name": "fc", "out_features": 10}]})"));
  return withStep(chain, precision, step);
}

// Every inner op of an SE block reads a bfloat16 tensor: all write bfloat16, so the block's e is the
// half graph's (pure bf16's) plus its two convolutions' weight copies (with bias: no bias copy).
TEST(MixedPrecisionZoo, ASqueezeBlockSavesHalfTensorsAndItsWeightCopies) {
  const Chain mixed = squeezeChain(Precision::Bf16Mixed);
  const Chain half = squeezeChain(Precision::Bf16);
  EXPECT_EQ(mixed.at(4).extraBytes, half.at(4).extraBytes + (8 * 2 + 2 * 8) * 2u);
  EXPECT_EQ(mixed.at(4).outBytes, half.at(4).outBytes);
  EXPECT_EQ(mixed.at(4).outBytes * 2, squeezeChain(Precision::Fp32).at(4).outBytes);
  EXPECT_EQ(mixed.at(6).extraBytes, half.at(6).extraBytes + (16 * 4 + 4 * 16) * 2u);
}

TEST(MixedPrecisionZoo, SqueezeBlocksUnderEveryPlanMeasureThePredictionAndReproduceStoreAll) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  testing::expectEveryPlanMeasuredOnOneThread(squeezeChain, Precision::Bf16Mixed, 23);
}

// Inception's pool branches: a 1x1 conv; a ceil-mode max pool then a 1x1 conv; a padded average
// pool then a 1x1 conv; concatenated (bfloat16 pools and concat; the max pool's int64 indices in E).
Chain poolBranchChain(Precision precision, StepOptions step = {}) {
  const nlohmann::json branches = nlohmann::json::parse(R"({"name": "mixed", "kind": "block", "ops": [
      {"name": "b1", "kind": "conv2d", "out_channels": 3, "kernel": 1, "bias": false, "inputs": [0]},
      {"name": "b2pool", "kind": "maxpool", "kernel": 3, "stride": 1, "padding": 1, "ceil_mode": true, "inputs": [0]},
      {"name": "b2", "kind": "conv2d", "out_channels": 2, "kernel": 1, "bias": false, "inputs": [2]},
      {"name": "b3pool", "kind": "avgpool", "kernel": 3, "stride": 1, "padding": 1, "inputs": [0]},
      {"name": "b3", "kind": "conv2d", "out_channels": 2, "kernel": 1, "bias": false, "inputs": [4]},
      {"name": "concat", "kind": "concat", "inputs": [1, 3, 5]}]})");
  nlohmann::json second = branches;
  second["name"] = "mixed2";
  const Chain chain = testing::chainFromJson(
      nlohmann::json{{"format", "remat-chain/1"},
                     {"name", "pool_branches"},
                     {"input", {{"shape", {2, 3, 9, 9}}, {"dtype", "float32"}}},
                     {"layers",
                      {{{"kind", "conv2d"}, {"name", "stem"}, {"out_channels", 4}, {"kernel", 3}, {"padding", 1}},
                       {{"kind", "relu"}, {"name", "relu"}},
                       branches,
                       {{"kind", "conv2d"}, {"name", "head"}, {"out_channels", 4}, {"kernel", 1}},
                       second,
                       {{"kind", "adaptive_avgpool"}, {"name", "gap"}},
                       {{"kind", "flatten"}, {"name", "flat"}},
                       {{"kind", "linear"}, {"name", "fc"}, {"out_features", 10}}}}});
  return withStep(chain, precision, step);
}

// ShuffleNetV2's channel split and views beyond it, in bfloat16: slices of an inner tensor (a view
// of a view starting at an odd channel too), read in place by a concat, gathered contiguous by a
// relu6 and a mul (forward and backward), a strided ShuffleNet block and the channel shuffle.
Chain viewChain(Precision precision, StepOptions step = {}) {
  const Chain chain = testing::chainFromJson(nlohmann::json::parse(R"({
    "format": "remat-chain/1", "name": "views", "input": {"shape": [2, 3, 6, 6], "dtype": "float32"},
    "layers": [
      {"kind": "conv2d", "name": "stem", "out_channels": 8, "kernel": 3, "padding": 1},
      {"name": "views", "kind": "block", "ops": [
        {"name": "expand", "kind": "conv2d", "out_channels": 9, "kernel": 1, "bias": false, "inputs": [0]},
        {"name": "act", "kind": "relu", "inputs": [1]},
        {"name": "left", "kind": "slice", "begin": 0, "out_channels": 3, "inputs": [2]},
        {"name": "right", "kind": "slice", "begin": 3, "out_channels": 6, "inputs": [2]},
        {"name": "odd", "kind": "slice", "begin": 3, "out_channels": 3, "inputs": [4]},
        {"name": "clip", "kind": "relu6", "inputs": [5]},
        {"name": "gate", "kind": "mul", "inputs": [5, 3]},
        {"name": "cat", "kind": "concat", "inputs": [3, 7, 6]}]},
      {"name": "shuffle", "kind": "block", "ops": [
        {"name": "channel_shuffle", "kind": "channel_shuffle", "groups": 3}]},
      {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
      {"kind": "linear", "name": "fc", "out_features": 5}]})"));
  return withStep(chain, precision, step);
}

TEST(MixedPrecisionZoo, ChannelViewsUnderEveryPlanMeasureThePredictionAndReproduceStoreAll) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  testing::expectEveryPlanMeasuredOnOneThread(viewChain, Precision::Bf16Mixed, 41);
}

TEST(MixedPrecisionZoo, SqueezeBlocksInEveryOptimizerAndGradientMode) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  expectEveryStepModeMeasured(squeezeChain);
}

TEST(MixedPrecisionZoo, PoolBranchesInEveryOptimizerAndGradientMode) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  expectEveryStepModeMeasured(poolBranchChain);
}

TEST(MixedPrecisionZoo, ChannelViewsInEveryOptimizerAndGradientMode) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  expectEveryStepModeMeasured(viewChain);
}

TEST(MixedPrecisionZoo, PoolBranchesUnderEveryPlanMeasureThePredictionAndReproduceStoreAll) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  testing::expectEveryPlanMeasuredOnOneThread(poolBranchChain, Precision::Bf16Mixed, 31);
}

// The same weights and batch in float32 and in bf16-mixed: each parameter layer's float32 gradient
// differs from float32's by bfloat16's rounding, and does differ (the half kernels ran). A wrong
// bfloat16 kernel (a pool, product or concat reading bfloat16 as float32) gives differences of
// 100% or NaN.
void expectWithinBfloat16(Chain (*make)(Precision, StepOptions), std::uint64_t seed, std::size_t layers,
                          double inside) {
  const std::vector<double> relative = relativeGradientDifferences(make, seed);
  ASSERT_EQ(relative.size(), layers);
  std::string all;
  for (double r : relative) all += " " + std::to_string(r);
  for (std::size_t i = 0; i < relative.size(); ++i) {
    EXPECT_LT(relative[i], i + 1 == relative.size() ? 0.03 : inside) << "parameter layer " << i + 1 << ":" << all;
    EXPECT_GT(relative[i], 0.0) << "parameter layer " << i + 1 << ":" << all;
  }
}

// stem conv, batch norm, se1, conv, se2, linear
TEST(MixedPrecisionZoo, SqueezeGradientsAreFloat32sWithinBfloat16Precision) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  expectWithinBfloat16(squeezeChain, 29, 6, 0.4);
}

// stem conv, views, linear: a slice read at a wrong offset gives differences near 100%.
TEST(MixedPrecisionZoo, ChannelViewGradientsAreFloat32sWithinBfloat16Precision) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  expectWithinBfloat16(viewChain, 43, 3, 0.05);
}

// stem, mixed, head, mixed2, linear: no batch norm cancels bits, so all lie close.
TEST(MixedPrecisionZoo, PoolBranchGradientsAreFloat32sWithinBfloat16Precision) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  expectWithinBfloat16(poolBranchChain, 37, 5, 0.05);
}

Chain zooMixed(const char* name, StepOptions step) {
  const Chain zoo = testing::zooBuilt(name, {.batch = 2, .resolution = 32, .numClasses = 10});
  return withStep(zoo, Precision::Bf16Mixed, step);
}

// The zoo's SE networks at batch 2, 32x32 with PyTorch 2's step (AdamW, gradients made on
// backward): store-all and sqrt's plan (its recomputations), each op as predicted, STEP included.
// (Every plan and step mode: the small chain above; the zoo at every mode would take minutes.)
TEST(MixedPrecisionZoo, ZooSqueezeNetworksMeasureThePrediction) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  cpu::CpuDevice device({.threads = 1});
  const StepOptions adamw{.optimizer = OptimizerKind::AdamW, .grads = GradMode::OnBackward};
  for (const char* name : {"efficientnet_b0", "mobilenet_v3_large", "regnet_y_400mf"}) {
    SCOPED_TRACE(name);
    const Chain chain = testing::fittedTo(zooMixed(name, adamw), device);
    ASSERT_EQ(chain.step.precision, Precision::Bf16Mixed);
    auto sqrt = runPlanner(chain, "sqrt");
    ASSERT_TRUE(sqrt.isOk()) << sqrt.status().message();
    ASSERT_FALSE(sqrt->plan.checkpoints.empty());
    auto interp = Interpreter::create(chain, device, testing::seeded(5));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    for (const Plan& plan : {Plan{}, sqrt->plan}) {
      auto run = (*interp)->run(plan, RunOptions{});
      ASSERT_TRUE(run.isOk()) << run.status().message();
      testing::expectMatchesSimulation(chain, plan, run->timelines[0]);
      EXPECT_EQ(run->timelines[0].entries.back().op.kind, OpKind::Step);
    }
  }
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

// The classic kinds with the own bfloat16 adaptive pool (AlexNet's 6x6 and VGG's 7x7 from a
// smaller map), Inception-v3 (pool branches, 1x7 and 7x1 convolutions in bfloat16) and
// ShuffleNetV2 (channel slices read as bfloat16 views, concat, channel shuffle) at batch 2:
// store-all and sqrt's plan with PyTorch 2's step, each op as predicted.
TEST(MixedPrecisionZoo, ZooClassicAndInceptionMeasureThePrediction) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  cpu::CpuDevice device({.threads = 1});
  const StepOptions adamw{.optimizer = OptimizerKind::AdamW, .grads = GradMode::OnBackward};
  const struct {
    const char* name;
    int resolution;
  } models[] = {{"alexnet", 63}, {"inception_v3", 75}, {"shufflenet_v2_x1_0", 32}};
  for (const auto& m : models) {
    SCOPED_TRACE(m.name);
    const Chain zoo = testing::zooBuilt(m.name, {.batch = 2, .resolution = m.resolution, .numClasses = 10});
    const Chain chain = testing::fittedTo(withStep(zoo, Precision::Bf16Mixed, adamw), device);
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

Status prepared(cpu::CpuDevice& device, const char* name, Precision precision, int resolution = 32) {
  const Chain zoo = testing::zooBuilt(name, {.batch = 2, .resolution = resolution, .numClasses = 10});
  auto chain = withPrecision(zoo, precision);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain ? device.prepare(*chain) : chain.status();
}

// ConvNeXt-Tiny prepares (convnext_bf16_run_test.cpp runs it); a block whose float32 tensors meet a
// kernel without a float32 operand (a basic block after a float32 layer norm: its identity add of
// the bfloat16 main path and the float32 x(l-1) is float32, which its last relu reads) is refused by
// layer and inner op, before anything is allocated.
TEST(MixedPrecisionZoo, BlocksReadingAFloat32InputAreRefusedByInnerOp) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  cpu::CpuDevice device;
  EXPECT_TRUE(prepared(device, "convnext_tiny", Precision::Bf16Mixed, 32).isOk());
  const Chain chain = testing::chainFromJson(nlohmann::json::parse(R"({
    "format": "remat-chain/1", "name": "after-norm", "input": {"shape": [2, 3, 8, 8], "dtype": "float32"},
    "layers": [
      {"kind": "conv2d", "name": "conv1", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1},
      {"kind": "layernorm", "name": "norm"},
      {"kind": "basic_block", "name": "layer1.0", "out_channels": 8, "stride": 1}]})"));
  auto mixed = withPrecision(chain, Precision::Bf16Mixed);
  ASSERT_TRUE(mixed.isOk()) << mixed.status().message();
  const Status status = device.prepare(*mixed);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), ErrorCode::InvalidInput);
  EXPECT_NE(status.message().find("layer 3 ('layer1.0', basic_block): precision bf16-mixed: no kernel on the CPU for "
                                  "the block's inner op 'layer1.0.relu' (relu) reading the float32 tensor "
                                  "'layer1.0.add'"),
            std::string::npos)
      << status.message();
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

// fp16-mixed: oneDNN 2.6 has no float16 convolution on this CPU; pure float16 (the whole model in
// float16) is refused at the first layer, named (pure bf16 runs: pure_bf16_run_test.cpp).
TEST(MixedPrecisionZoo, Fp16AndPureFloat16AreRefusedByLayer) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  cpu::CpuDevice device;
  const Status fp16 = prepared(device, "efficientnet_b0", Precision::Fp16Mixed);
  ASSERT_FALSE(fp16.isOk());
  EXPECT_NE(fp16.message().find("layer 1 ('features.0.0', conv2d): precision fp16-mixed: oneDNN 2.6 has no float16"),
            std::string::npos)
      << fp16.message();
  const Status status = prepared(device, "resnet18", Precision::Fp16);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), ErrorCode::InvalidInput);
  EXPECT_NE(status.message().find("layer 1 ('conv1', conv2d): the CPU backend runs float32 only; the chain is float16"),
            std::string::npos)
      << status.message();
  EXPECT_TRUE(prepared(device, "resnet18", Precision::Bf16).isOk());
}

}  // namespace
}  // namespace remat
