// ConvNeXt in bfloat16 on the CPU (issue 24; docs/memory-model.md section 11.7, docs/executor.md).
// bf16-mixed, as PyTorch 2's CPU autocast runs a CNBlock: the float32 x(l-1) cast to bfloat16 by the
// depthwise convolution (the copy saved in E), the inner layer norm in bfloat16 with float32
// statistics, layer_scale's float32 gamma promoting the product to float32 and the residual add in
// float32, so x(l) is float32. Pure bf16 (the model cast with .to(torch.bfloat16)): the stem's and the downsampling
// LayerNorm2ds, each CNBlock's inner layer norm (oneDNN's bf16 layer normalization, float32 statistics) and its
// layer_scale (bfloat16 gamma) run, and every op's measured footprint equals the prediction under
// every planner's plan and in every optimizer, foreach and gradient mode; the zoo's ConvNeXt-Tiny
// likewise at batch 2; the gradients lie within bfloat16's precision of float32's.
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
#include "small_chains.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::withStep;

using testing::convnext::cnBlock;
using testing::convnext::layerNorm;
using testing::convnext::patchify;

// A ConvNeXt-like chain: stem and its LayerNorm2d, two blocks, downsampling, a block, the head
// (its LayerNorm2d over a 1x1 map) and a layer norm over [N, F] before the classifier.
Chain convNextChain(Precision precision, StepOptions step = {}) {
  const json j = {{"format", "remat-chain/1"},
                  {"name", "convnext-like"},
                  {"input", {{"shape", {2, 3, 16, 16}}, {"dtype", "float32"}}},
                  {"layers",
                   {patchify("stem", 8, 2),
                    layerNorm("stem.norm"),
                    cnBlock("stage1.0", 8),
                    cnBlock("stage1.1", 8),
                    layerNorm("down.0"),
                    patchify("down.1", 16, 2),
                    cnBlock("stage2.0", 16),
                    {{"name", "avgpool"}, {"kind", "adaptive_avgpool"}},
                    layerNorm("classifier.0"),
                    {{"name", "flatten"}, {"kind", "flatten"}},
                    layerNorm("flat.norm"),
                    {{"name", "fc"}, {"kind", "linear"}, {"out_features", 5}}}}};
  return withStep(testing::chainFromJson(j), precision, step);
}

TEST(ConvNextBf16, PureBf16HalvesEveryByteButTheStatistics) {
  const Chain half = convNextChain(Precision::Bf16);
  const Chain plain = convNextChain(Precision::Fp32);
  ASSERT_EQ(half.layers.size(), plain.layers.size());
  const std::uint64_t labels = staticBreakdown(plain).labelBytes;  // int64 at every precision
  EXPECT_EQ(staticBreakdown(half).labelBytes, labels);
  EXPECT_EQ((half.staticBytes() - labels) * 2, plain.staticBytes() - labels);
  EXPECT_EQ(half.at(2).extraBytes, plain.at(2).extraBytes);  // the layer norm's float32 mean and rstd
  for (std::size_t l = 1; l <= half.layers.size(); ++l) EXPECT_EQ(half.at(l).outBytes * 2, plain.at(l).outBytes);
}

TEST(ConvNextBf16, PureBf16EveryPlanMeasuresThePredictionAndReproducesStoreAll) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  testing::expectEveryPlanMeasuredOnOneThread(convNextChain, Precision::Bf16, 3);
}

// SGD, momentum, Adam and AdamW, foreach on and off, gradients static and made on backward: two
// steps of store-all and optimal's plan, every op (STEP included) as predicted.
TEST(ConvNextBf16, PureBf16EveryOptimizerAndGradientMode) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  testing::expectEveryStepModeMeasured(convNextChain, Precision::Bf16);
}

// The same weights (float32's rounded) and batch: every parameter layer's bfloat16 gradient (the
// blocks' inner layer norms and layer scales among them) lies near float32's and differs from it.
TEST(ConvNextBf16, PureBf16GradientsAreFloat32sWithinBfloat16Precision) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const auto plain = testing::gradientBytesOf(convNextChain(Precision::Fp32), 11);
  const auto half = testing::gradientBytesOf(convNextChain(Precision::Bf16), 11);
  const std::vector<double> differences = testing::relativeHalfDifferences(plain, half);
  ASSERT_EQ(differences.size(), 10u);  // two patchify convs, four layer norms, three blocks, the linear
  for (std::size_t l = 0; l < differences.size(); ++l) {
    EXPECT_LT(differences[l], 0.1) << "parameter layer " << l + 1;
    EXPECT_GT(differences[l], 0.0) << "parameter layer " << l + 1;
  }
}

// torchvision's ConvNeXt-Tiny at batch 2, 32x32, in three step modes: store-all and sqrt's plan,
// each op as predicted, sqrt's gradients bitwise store-all's.
TEST(ConvNextBf16, PureBf16ZooTinyMeasuresThePrediction) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const Chain zoo = testing::zooBuilt("convnext_tiny", {.batch = 2, .resolution = 32, .numClasses = 10});
  testing::expectZooSqrtReproducesStoreAll(
      zoo, Precision::Bf16,
      {StepOptions{.optimizer = OptimizerKind::AdamW, .grads = GradMode::OnBackward},
       StepOptions{.optimizer = OptimizerKind::None, .grads = GradMode::Static}});
}

// bf16-mixed's numbers: a block reading a float32 x(l-1) (after the stem's float32 layer norm, or
// a block's float32 output) saves autocast's bfloat16 cast copy instead (in = no); one after the
// downsampling conv reads its bfloat16 output as it is; every block's output is float32
// (layer_scale's promotion): a(l) is float32's, the inner tensors bfloat16's.
TEST(ConvNextBf16, MixedBlocksCastTheirFloat32InputAndWriteFloat32) {
  const Chain mixed = convNextChain(Precision::Bf16Mixed);
  const Chain plain = convNextChain(Precision::Fp32);
  const Chain half = convNextChain(Precision::Bf16);
  const struct {
    std::size_t l;
    std::uint64_t channels;
    bool floatInput;
  } blocks[] = {{3, 8, true}, {4, 8, true}, {7, 16, false}};
  for (const auto& [l, c, floatInput] : blocks) {
    SCOPED_TRACE(l);
    const ChainLayer& block = mixed.layers[l - 1];
    EXPECT_EQ(block.numbers.outBytes, plain.at(l).outBytes);  // float32
    EXPECT_EQ(plain.at(l).outBytes, 2 * half.at(l).outBytes);
    EXPECT_EQ(block.numbers.needsInput, !floatInput);
    EXPECT_TRUE(plain.at(l).needsInput);
    // The bfloat16 inner tensors the graph saves, the input's cast copy, the three convolutions'
    // weight copies (7x7 depthwise, C -> 4C, 4C -> C; no bias copy).
    const std::uint64_t inputCast = floatInput ? elementCount(block.inputShape) * 2 : 0;
    const std::uint64_t weightCopies = (c * 49 + 8 * c * c) * 2;
    EXPECT_EQ(block.numbers.extraBytes, half.at(l).extraBytes + inputCast + weightCopies);
  }
  EXPECT_EQ(mixed.at(5).extraBytes, plain.at(5).extraBytes);  // a float32 norm of a float32 input
  EXPECT_EQ(mixed.at(2).extraBytes, plain.at(2).extraBytes + elementCount(mixed.layers[1].inputShape) * 4);
}

TEST(ConvNextBf16, MixedEveryPlanMeasuresThePredictionAndReproducesStoreAll) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  testing::expectEveryPlanMeasuredOnOneThread(convNextChain, Precision::Bf16Mixed, 3);
}

TEST(ConvNextBf16, MixedEveryOptimizerAndGradientMode) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  testing::expectEveryStepModeMeasured(convNextChain, Precision::Bf16Mixed);
}

// The float32 master gradients of every parameter layer lie near float32's and differ from them.
TEST(ConvNextBf16, MixedGradientsAreCloseToFloat32s) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  const std::vector<double> differences = testing::relativeGradientDifferences(convNextChain, 11);
  ASSERT_EQ(differences.size(), 10u);
  for (std::size_t l = 0; l < differences.size(); ++l) {
    EXPECT_LT(differences[l], 0.1) << "parameter layer " << l + 1;
    EXPECT_GT(differences[l], 0.0) << "parameter layer " << l + 1;
  }
}

// torchvision's ConvNeXt-Tiny at batch 2, 32x32 under bf16-mixed: store-all and sqrt's plan with
// AdamW (gradients on backward) and without an optimizer, each op as predicted.
TEST(ConvNextBf16, MixedZooTinyMeasuresThePrediction) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  cpu::CpuDevice device;
  const Chain zoo = testing::zooBuilt("convnext_tiny", {.batch = 2, .resolution = 32, .numClasses = 10});
  for (const StepOptions& step : {StepOptions{.optimizer = OptimizerKind::AdamW, .grads = GradMode::OnBackward},
                                  StepOptions{.optimizer = OptimizerKind::None, .grads = GradMode::Static}}) {
    const Chain chain = testing::fittedTo(withStep(zoo, Precision::Bf16Mixed, step), device);
    SCOPED_TRACE(describeStepOptions(chain.step));
    auto sqrt = runPlanner(chain, "sqrt");
    ASSERT_TRUE(sqrt.isOk()) << sqrt.status().message();
    auto interp = Interpreter::create(chain, device, testing::seeded(3));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
    for (const Plan& plan : {Plan{}, sqrt->plan}) {
      auto run = (*interp)->run(plan, RunOptions{});
      ASSERT_TRUE(run.isOk()) << run.status().message();
      testing::expectMatchesSimulation(chain, plan, run->timelines[0]);
    }
  }
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

}  // namespace
}  // namespace remat
