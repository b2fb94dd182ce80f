// Precision (docs/memory-model.md section 11.7): the names and their errors, the pure half modes as
// the chain file's dtype, and autocast's numbers on a small chain worked by hand (input casts saved
// instead of the input, half weight copies in E, half weight gradients in wb, float32 parameters
// and static memory); ResNet-50's whole step under each precision.
#include "remat/model/precision.hpp"

#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/zoo.hpp"

namespace remat {
namespace {

using testing::chainFromLayers;
using testing::convSpec;
using testing::layerSpec;

LayerSpec linearSpec(std::int64_t outFeatures) {
  LayerSpec spec = layerSpec("fc", LayerKind::Linear);
  spec.outFeatures = outFeatures;
  return spec;
}

// conv 3->4 (3x3, no bias), batch norm, ReLU, max pool 2, flatten, linear 64->10, layer norm,
// linear 10->5, on a [2, 3, 8, 8] float32 input.
Chain handChain() {
  auto chain =
      chainFromLayers({2, 3, 8, 8}, {convSpec(4, 3, 1, 1, 1, false), layerSpec("bn", LayerKind::BatchNorm),
                                     layerSpec("r", LayerKind::Relu), testing::poolSpec(LayerKind::MaxPool, 2, 2),
                                     layerSpec("f", LayerKind::Flatten), linearSpec(10),
                                     layerSpec("ln", LayerKind::LayerNorm), linearSpec(5)});
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

TEST(Precision, NamesParseAndRefuseWithTheValidOnes) {
  for (Precision p : precisions()) EXPECT_EQ(*parsePrecision(precisionName(p)), p);
  EXPECT_EQ(precisions().size(), 5u);
  auto bad = parsePrecision("bf8");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "unknown precision 'bf8' (valid: fp32, bf16, fp16, bf16-mixed, fp16-mixed)");
  EXPECT_TRUE(isMixedPrecision(Precision::Fp16Mixed));
  EXPECT_FALSE(isMixedPrecision(Precision::Bf16));
  EXPECT_EQ(describeStepOptions({OptimizerKind::AdamW, true, GradMode::OnBackward, Precision::Bf16Mixed}),
            "adamw, foreach on, gradients on backward, bf16-mixed");
}

TEST(Precision, AChainFileDtypeIsItsPrecision) {
  auto half = chainFromLayers({2, 3, 8, 8}, {convSpec(4, 3)}, DType::Float16);
  ASSERT_TRUE(half.isOk());
  EXPECT_EQ(half->step.precision, Precision::Fp16);
  EXPECT_EQ(handChain().step.precision, Precision::Fp32);
  EXPECT_EQ(defaultStepOptions(DType::BFloat16).precision, Precision::Bf16);
}

TEST(Precision, PureHalfIsTheDtypeFieldAndBack) {
  const Chain fp32 = handChain();
  auto bf16 = withPrecision(fp32, Precision::Bf16);
  ASSERT_TRUE(bf16.isOk()) << bf16.status().message();
  ChainSpec spec = fp32.spec;
  spec.input.dtype = DType::BFloat16;
  auto byDtype = buildChain(spec);
  ASSERT_TRUE(byDtype.isOk());
  ASSERT_EQ(bf16->size(), byDtype->size());
  for (std::size_t l = 1; l <= bf16->size(); ++l) EXPECT_EQ(bf16->at(l), byDtype->at(l)) << "layer " << l;
  EXPECT_EQ(bf16->inputBytes, fp32.inputBytes / 2);
  EXPECT_EQ(bf16->paramBytes(), fp32.paramBytes() / 2);
  auto back = withPrecision(*bf16, Precision::Fp32);
  ASSERT_TRUE(back.isOk());
  for (std::size_t l = 1; l <= fp32.size(); ++l) EXPECT_EQ(back->at(l), fp32.at(l)) << "layer " << l;
  EXPECT_EQ(back->dtype, DType::Float32);
}

struct Expected {
  std::uint64_t a, e, wb, p;
  bool in, out;
};

TEST(Precision, Bf16MixedWorkedByHand) {
  const Chain fp32 = handChain();
  auto mixed = withPrecision(fp32, Precision::Bf16Mixed);
  ASSERT_TRUE(mixed.isOk()) << mixed.status().message();
  ASSERT_EQ(mixed->size(), 7u);
  const Expected rows[] = {
      // conv: half output 2*4*8*8*2; the input's bf16 copy (2*3*8*8*2 = 768) saved instead of x0, and
      // the weight copy (4*3*9*2 = 216); its half weight gradient (216) in wb; float32 weights.
      {1024, 768 + 216, 216, 108 * 4, false, false},
      {1024, 32, 0, 8 * 4, true, false},                        // batch norm in half, float32 mean and inverse std
      {1024, 0, 0, 0, false, true},                             // ReLU follows its input: half
      {256, 128 * 8, 0, 0, true, false},                        // max pool: half output, int64 indices
      {40, 640 * 2, 650 * 2, 650 * 4, true, false},             // linear 64->10: half input, no cast; weight copy
      {80, 16 + 2 * 10 * 4, 0, 20 * 4, false, false},           // layer norm in float32: its input's float32 copy
      {20, 2 * 10 * 2 + 50 * 2, 55 * 2, 55 * 4, false, false},  // linear reading float32: half copy
  };
  for (std::size_t l = 1; l <= 7; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l) + " " + mixed->layers[l - 1].name);
    const LayerNumbers& m = mixed->at(l);
    const Expected& x = rows[l - 1];
    EXPECT_EQ(m.outBytes, x.a);
    EXPECT_EQ(m.extraBytes, x.e);
    EXPECT_EQ(m.bwdWorkspaceBytes, x.wb);
    EXPECT_EQ(m.paramBytes, x.p);
    EXPECT_EQ(m.needsInput, x.in);
    EXPECT_EQ(m.needsOutput, x.out);
  }
  // Static memory is float32's, part by part; the copies are per layer.
  const StaticBreakdown a = staticBreakdown(*mixed);
  const StaticBreakdown b = staticBreakdown(fp32);
  EXPECT_EQ(a.total(), b.total());
  EXPECT_EQ(a.inputBytes, b.inputBytes);
  EXPECT_EQ(a.labelBytes, b.labelBytes);
  EXPECT_EQ(a.weightBytes, b.weightBytes);
  EXPECT_EQ(autocastWeightCopyBytes(*mixed), 216u + 1280u + 100u);
  EXPECT_EQ(autocastWeightCopyBytes(fp32), 0u);
  EXPECT_EQ(mixed->step.precision, Precision::Bf16Mixed);
  EXPECT_EQ(describeChainDTypes(*mixed), "float32 weights, bf16-mixed (autocast)");
  // fp16-mixed has the same byte counts (both halves are 2 bytes).
  auto fp16 = withPrecision(fp32, Precision::Fp16Mixed);
  ASSERT_TRUE(fp16.isOk());
  for (std::size_t l = 1; l <= 7; ++l) EXPECT_EQ(fp16->at(l), mixed->at(l));
}

TEST(Precision, WithStepOptionsKeepsTheOthersAndRebuildsOnlyOnAChange) {
  const Chain fp32 = handChain();
  StepOptions options{OptimizerKind::Adam, false, GradMode::OnBackward, Precision::Fp32};
  auto same = withStepOptions(fp32, options);
  ASSERT_TRUE(same.isOk());
  EXPECT_EQ(same->step, options);
  EXPECT_EQ(same->at(1), fp32.at(1));
  options.precision = Precision::Fp16Mixed;
  auto mixed = withStepOptions(fp32, options);
  ASSERT_TRUE(mixed.isOk());
  EXPECT_EQ(mixed->step, options);
  EXPECT_EQ(mixed->at(1).outBytes, fp32.at(1).outBytes / 2);
}

TEST(Precision, AbstractChainsKeepTheirNumbers) {
  const Chain chain = makeAbstractChain("a", 10, {testing::numbers(100), testing::numbers(40)});
  auto mixed = withPrecision(chain, Precision::Bf16Mixed);
  ASSERT_TRUE(mixed.isOk());
  EXPECT_EQ(mixed->at(1), chain.at(1));
  EXPECT_EQ(mixed->step.precision, Precision::Bf16Mixed);
}

// ResNet-50 at batch 8, store-all, AdamW on backward: mixed halves most activations but keeps the
// float32 static block and adds the copies, so its E lies between pure bf16's and fp32's.
// The cast policy the backends run by (autocastComputeDType): autocast's lower-precision list in
// the mixed precision's half dtype, layer norm in float32, the rest in its input's dtype; outside
// the mixed precisions every layer keeps its input's dtype.
TEST(Precision, AutocastComputeDTypeIsTheModelsCastPolicy) {
  const auto bf16 = DType::BFloat16, f32 = DType::Float32, f16 = DType::Float16;
  for (LayerKind kind : {LayerKind::Conv2d, LayerKind::Linear, LayerKind::BasicBlock, LayerKind::Bottleneck}) {
    EXPECT_EQ(autocastComputeDType(kind, f32, Precision::Bf16Mixed), bf16) << kindName(kind);
    EXPECT_EQ(autocastComputeDType(kind, bf16, Precision::Bf16Mixed), bf16) << kindName(kind);
    EXPECT_EQ(autocastComputeDType(kind, f32, Precision::Fp16Mixed), f16) << kindName(kind);
    EXPECT_EQ(autocastComputeDType(kind, f32, Precision::Fp32), f32) << kindName(kind);
  }
  EXPECT_EQ(autocastComputeDType(LayerKind::LayerNorm, bf16, Precision::Bf16Mixed), f32);
  for (LayerKind kind : {LayerKind::Relu, LayerKind::BatchNorm, LayerKind::MaxPool, LayerKind::Dropout}) {
    EXPECT_EQ(autocastComputeDType(kind, bf16, Precision::Bf16Mixed), bf16) << kindName(kind);
    EXPECT_EQ(autocastComputeDType(kind, f32, Precision::Bf16Mixed), f32) << kindName(kind);
  }
  EXPECT_EQ(autocastComputeDType(LayerKind::Abstract, f32, Precision::Bf16Mixed), f32);
}

TEST(Precision, ResNet50StepUnderEachPrecision) {
  ZooOptions zoo;
  zoo.batch = 8;
  Chain fp32 = testing::zooBuilt("resnet50", zoo);
  fp32.step = {OptimizerKind::AdamW, true, GradMode::OnBackward, Precision::Fp32};
  auto mixed = withPrecision(fp32, Precision::Bf16Mixed);
  auto pure = withPrecision(fp32, Precision::Bf16);
  ASSERT_TRUE(mixed.isOk() && pure.isOk());
  const auto e32 = dynamicPeak(fp32, Plan{});
  const auto eMixed = dynamicPeak(*mixed, Plan{});
  const auto eBf16 = dynamicPeak(*pure, Plan{});
  EXPECT_LT(eMixed, e32);
  EXPECT_GT(eMixed, eBf16);
  EXPECT_EQ(mixed->staticBytes(), fp32.staticBytes());
  const std::uint64_t labels = staticBreakdown(fp32).labelBytes;  // int64 at every precision
  EXPECT_EQ(staticBreakdown(*pure).labelBytes, labels);
  EXPECT_EQ((pure->staticBytes() - labels) * 2, fp32.staticBytes() - labels);
  // Every conv of ResNet-50 is bias-free: the copies are 2 bytes a parameter but for the batch
  // norms' (0.2% of them) and the fc's bias.
  const std::uint64_t copies = autocastWeightCopyBytes(*mixed);
  EXPECT_LT(copies, fp32.paramCount() * 2);
  EXPECT_GT(copies, fp32.paramCount() * 2 * 99 / 100);
}

}  // namespace
}  // namespace remat
