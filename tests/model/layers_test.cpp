// Shape inference and memory-model numbers of the primitive layer kinds, through buildChain.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "chain_helpers.hpp"
#include "remat/model/chain.hpp"

namespace remat {
namespace {

using testing::chainFromLayers;
using testing::convSpec;
using testing::layerSpec;
using testing::poolSpec;

// The one layer of a one-layer chain (flatten layers are folded away).
ChainLayer single(Shape input, std::vector<LayerSpec> layers, DType dtype = DType::Float32) {
  auto chain = chainFromLayers(std::move(input), std::move(layers), dtype);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  if (!chain) return {};
  EXPECT_EQ(chain->size(), 1u);
  return chain->layers.back();
}

// The error of building, which must fail and mention every fragment.
void expectError(Shape input, std::vector<LayerSpec> layers, std::vector<std::string> fragments) {
  auto chain = chainFromLayers(std::move(input), std::move(layers));
  ASSERT_FALSE(chain.isOk());
  EXPECT_EQ(chain.status().code(), ErrorCode::InvalidInput);
  for (const auto& f : fragments)
    EXPECT_NE(chain.status().message().find(f), std::string::npos)
        << "'" << f << "' not in: " << chain.status().message();
}

TEST(Conv2d, ShapeParamsAndNumbers) {
  const ChainLayer l = single({2, 3, 32, 32}, {convSpec(16, 3, 2, 1)});
  EXPECT_EQ(l.outputShape, (Shape{2, 16, 16, 16}));
  EXPECT_EQ(l.paramCount, 16u * 3 * 9 + 16);
  EXPECT_EQ(l.numbers.outBytes, 2u * 16 * 16 * 16 * 4);
  EXPECT_TRUE(l.numbers.needsInput);
  EXPECT_FALSE(l.numbers.needsOutput);
  EXPECT_EQ(l.numbers.extraBytes, 0u);
  EXPECT_EQ(l.numbers.fwdWorkspaceBytes, 0u);
  EXPECT_EQ(l.numbers.bwdWorkspaceBytes, 0u);
  EXPECT_EQ(l.numbers.paramBytes, l.paramCount * 4);
  const double outElements = 2.0 * 16 * 16 * 16;
  EXPECT_DOUBLE_EQ(l.numbers.fwdCost, (2.0 * outElements * 3 * 9 + outElements) / 1e9);
  EXPECT_DOUBLE_EQ(l.numbers.bwdCost, 2.0 * l.numbers.fwdCost);
}

TEST(Conv2d, GroupsAndNoBias) {
  // Depthwise 3x3, as in MobileNetV2: one 3x3 filter per channel.
  const ChainLayer dw = single({1, 32, 10, 10}, {convSpec(32, 3, 1, 1, 32, false)});
  EXPECT_EQ(dw.outputShape, (Shape{1, 32, 10, 10}));
  EXPECT_EQ(dw.paramCount, 32u * 9);
  const ChainLayer grouped = single({1, 8, 5, 7}, {convSpec(12, 1, 1, 0, 4, true)});
  EXPECT_EQ(grouped.outputShape, (Shape{1, 12, 5, 7}));
  EXPECT_EQ(grouped.paramCount, 12u * 2 + 12);
}

TEST(Conv2d, NonSquareInputAndStrideFloor) {
  // AlexNet's first layer: 224 -> floor((224 + 4 - 11) / 4) + 1 = 55.
  EXPECT_EQ(single({1, 3, 224, 100}, {convSpec(64, 11, 4, 2)}).outputShape, (Shape{1, 64, 55, 24}));
}

TEST(Conv2d, Errors) {
  expectError({2, 3, 8}, {convSpec(4, 3)}, {"layer 1 ('c', conv2d)", "NCHW", "[2, 3, 8]"});
  expectError({2, 3, 8, 8}, {convSpec(0, 3)}, {"layer 1 ('c', conv2d)", "out_channels"});
  expectError({2, 3, 8, 8}, {convSpec(4, 0)}, {"kernel"});
  expectError({2, 3, 8, 8}, {convSpec(4, 3, 0)}, {"stride"});
  expectError({2, 3, 8, 8}, {convSpec(4, 3, 1, -1)}, {"padding", "negative"});
  expectError({2, 3, 8, 8}, {convSpec(4, 3, 1, 0, 0)}, {"groups"});
  expectError({2, 3, 8, 8}, {convSpec(4, 3, 1, 0, 2)}, {"groups 2", "input channels 3"});
  expectError({2, 4, 8, 8}, {convSpec(6, 3, 1, 0, 4)}, {"groups 4", "out_channels 6"});
  expectError({2, 3, 4, 8}, {convSpec(4, 7, 1, 1)}, {"kernel 7", "padded input height 6"});
  expectError({2, 3, 8, 4}, {convSpec(4, 7, 1, 1)}, {"kernel 7", "padded input width 6"});
  expectError({2, 3, 8, 8}, {convSpec(4, std::int64_t{1} << 40)}, {"kernel", "at most"});
  expectError({1 << 20, 1, 1 << 20, 1 << 20}, {convSpec(1 << 30, 1)}, {"overflows"});
}

TEST(MaxPool, FloorAndCeilModes) {
  // floor: (6 - 3) / 2 + 1 = 2; ceil: ceil(3 / 2) + 1 = 3.
  EXPECT_EQ(single({1, 2, 6, 6}, {poolSpec(LayerKind::MaxPool, 3, 2)}).outputShape, (Shape{1, 2, 2, 2}));
  EXPECT_EQ(single({1, 2, 6, 6}, {poolSpec(LayerKind::MaxPool, 3, 2, 0, true)}).outputShape, (Shape{1, 2, 3, 3}));
  // ceil gives 4 windows of 2 on 5 + 2 * 1, but the 4th would start at 6 >= 5 + 1 (in the right
  // padding), so PyTorch drops it.
  EXPECT_EQ(single({1, 2, 5, 5}, {poolSpec(LayerKind::MaxPool, 2, 2, 1, true)}).outputShape, (Shape{1, 2, 3, 3}));
  EXPECT_EQ(single({1, 2, 5, 5}, {poolSpec(LayerKind::MaxPool, 2, 2, 1, false)}).outputShape, (Shape{1, 2, 3, 3}));
  // In ceil mode a window may hang past the input: 1 -> 1.
  EXPECT_EQ(single({1, 2, 1, 1}, {poolSpec(LayerKind::MaxPool, 2, 2, 0, true)}).outputShape, (Shape{1, 2, 1, 1}));
  // ResNet's stem pooling: 112 -> 56.
  EXPECT_EQ(single({1, 64, 112, 112}, {poolSpec(LayerKind::MaxPool, 3, 2, 1)}).outputShape, (Shape{1, 64, 56, 56}));
}

TEST(MaxPool, Numbers) {
  const ChainLayer l = single({2, 4, 8, 8}, {poolSpec(LayerKind::MaxPool, 2, 2)});
  EXPECT_EQ(l.outputShape, (Shape{2, 4, 4, 4}));
  EXPECT_EQ(l.numbers.outBytes, 2u * 4 * 4 * 4 * 4);
  // PyTorch's max_pool2d_with_indices keeps its input and int64 indices, not its output.
  EXPECT_TRUE(l.numbers.needsInput);
  EXPECT_FALSE(l.numbers.needsOutput);
  EXPECT_EQ(l.numbers.extraBytes, 2u * 4 * 4 * 4 * 8);
  EXPECT_EQ(l.paramCount, 0u);
  EXPECT_DOUBLE_EQ(l.numbers.fwdCost, 2.0 * 4 * 4 * 4 * 4 / 1e9);
  // The indices are int64 whatever the dtype.
  LayerSpec half = poolSpec(LayerKind::MaxPool, 2, 2);
  auto f16 = chainFromLayers({2, 4, 8, 8}, {half}, DType::Float16);
  ASSERT_TRUE(f16.isOk()) << f16.status().message();
  EXPECT_EQ(f16->at(1).outBytes, 2u * 4 * 4 * 4 * 2);
  EXPECT_EQ(f16->at(1).extraBytes, 2u * 4 * 4 * 4 * 8);
}

TEST(AvgPool, NumbersAndShape) {
  const ChainLayer l = single({2, 4, 7, 7}, {poolSpec(LayerKind::AvgPool, 3, 2, 1, true)});
  EXPECT_EQ(l.outputShape, (Shape{2, 4, 4, 4}));
  EXPECT_TRUE(l.numbers.needsInput);  // PyTorch's avg_pool2d backward keeps self
  EXPECT_FALSE(l.numbers.needsOutput);
  EXPECT_EQ(l.numbers.extraBytes, 0u);
}

TEST(Pools, Errors) {
  for (LayerKind kind : {LayerKind::MaxPool, LayerKind::AvgPool}) {
    const std::string name(kindName(kind));
    expectError({1, 2, 8}, {poolSpec(kind, 2, 2)}, {"('p', " + name + ")", "NCHW"});
    expectError({1, 2, 8, 8}, {poolSpec(kind, 0, 2)}, {"kernel"});
    expectError({1, 2, 8, 8}, {poolSpec(kind, 2, 0)}, {"stride"});
    expectError({1, 2, 8, 8}, {poolSpec(kind, 2, 2, -1)}, {"padding"});
    expectError({1, 2, 8, 8}, {poolSpec(kind, 3, 2, 2)}, {"padding 2", "half of kernel 3"});
    expectError({1, 2, 2, 8}, {poolSpec(kind, 3, 2)},
                {"output height would be 0", "kernel 3", "padded input height 2"});
    expectError({1, 2, 8, 1}, {poolSpec(kind, 3, 1, 0)}, {"output width would be -1", "padded input width 1"});
  }
}

TEST(AdaptiveAvgPool, ShapeAndPyTorchWindows) {
  LayerSpec spec = layerSpec("a", LayerKind::AdaptiveAvgPool);
  spec.outputHeight = 3;
  spec.outputWidth = 2;
  const ChainLayer l = single({2, 8, 7, 5}, {spec});
  EXPECT_EQ(l.outputShape, (Shape{2, 8, 3, 2}));
  EXPECT_TRUE(l.numbers.needsInput);  // PyTorch's _adaptive_avg_pool2d backward keeps self
  EXPECT_FALSE(l.numbers.needsOutput);
  // 1x1 is a mean in PyTorch, which keeps nothing (since 2.2).
  const ChainLayer global = single({2, 8, 7, 5}, {layerSpec("a", LayerKind::AdaptiveAvgPool)});
  EXPECT_FALSE(global.numbers.needsInput);
  EXPECT_FALSE(global.numbers.needsOutput);
  // Windows [floor(i*in/out), ceil((i+1)*in/out)): 7 -> 3 gives [0,3) [2,5) [4,7), 9 rows read;
  // 5 -> 2 gives [0,3) [2,5), 6 columns read.
  EXPECT_DOUBLE_EQ(l.numbers.fwdCost, 2.0 * 8 * 9 * 6 / 1e9);
  // Output larger than the input is allowed (windows overlap), as in PyTorch.
  spec.outputHeight = 7;
  spec.outputWidth = 7;
  EXPECT_EQ(single({1, 4, 1, 1}, {spec}).outputShape, (Shape{1, 4, 7, 7}));
}

TEST(AdaptiveAvgPool, Errors) {
  LayerSpec spec = layerSpec("a", LayerKind::AdaptiveAvgPool);
  expectError({2, 8}, {spec}, {"('a', adaptive_avgpool)", "NCHW"});
  spec.outputHeight = 0;
  expectError({2, 8, 4, 4}, {spec}, {"output_height"});
  spec.outputHeight = 1;
  spec.outputWidth = -2;
  expectError({2, 8, 4, 4}, {spec}, {"output_width"});
}

TEST(BatchNorm, TwoDimensionalAndOneDimensional) {
  const ChainLayer bn2d = single({4, 8, 3, 3}, {layerSpec("bn", LayerKind::BatchNorm)});
  EXPECT_EQ(bn2d.outputShape, (Shape{4, 8, 3, 3}));
  EXPECT_EQ(bn2d.paramCount, 16u);  // weight and bias; the running stats are buffers
  EXPECT_TRUE(bn2d.numbers.needsInput);
  EXPECT_FALSE(bn2d.numbers.needsOutput);
  EXPECT_EQ(bn2d.numbers.extraBytes, 2u * 8 * 4);
  EXPECT_EQ(bn2d.numbers.outBytes, 4u * 8 * 9 * 4);
  const ChainLayer bn1d = single({4, 8}, {layerSpec("bn", LayerKind::BatchNorm)});
  EXPECT_EQ(bn1d.outputShape, (Shape{4, 8}));
  EXPECT_EQ(bn1d.numbers.extraBytes, 2u * 8 * 4);
}

TEST(BatchNorm, Errors) {
  expectError({4, 8, 3}, {layerSpec("bn", LayerKind::BatchNorm)}, {"('bn', batchnorm)", "[N, C]", "[4, 8, 3]"});
  expectError({1, 8, 1, 1}, {layerSpec("bn", LayerKind::BatchNorm)}, {"more than one value per channel"});
  expectError({1, 8}, {layerSpec("bn", LayerKind::BatchNorm)}, {"more than one value per channel"});
}

TEST(Linear, AfterFlatten) {
  LayerSpec fc = layerSpec("fc", LayerKind::Linear);
  fc.outFeatures = 10;
  const ChainLayer l = single({4, 4, 5, 5}, {layerSpec("flatten", LayerKind::Flatten), fc});
  EXPECT_EQ(l.inputShape, (Shape{4, 100}));
  EXPECT_EQ(l.outputShape, (Shape{4, 10}));
  EXPECT_EQ(l.paramCount, 100u * 10 + 10);
  EXPECT_TRUE(l.numbers.needsInput);
  EXPECT_FALSE(l.numbers.needsOutput);
  EXPECT_DOUBLE_EQ(l.numbers.fwdCost, (2.0 * 40 * 100 + 40) / 1e9);
}

TEST(Linear, Errors) {
  LayerSpec fc = layerSpec("fc", LayerKind::Linear);
  fc.outFeatures = 10;
  expectError({4, 4, 5, 5}, {fc}, {"('fc', linear)", "[4, 4, 5, 5]", "add a flatten layer"});
  fc.outFeatures = 0;
  expectError({4, 100}, {fc}, {"out_features"});
}

TEST(Dropout, MaskIsOneBytePerElement) {
  LayerSpec spec = layerSpec("d", LayerKind::Dropout);
  spec.dropoutP = 0.2;
  const ChainLayer l = single({4, 100}, {spec});
  EXPECT_EQ(l.outputShape, (Shape{4, 100}));
  EXPECT_FALSE(l.numbers.needsInput);
  EXPECT_FALSE(l.numbers.needsOutput);
  EXPECT_EQ(l.numbers.extraBytes, 400u);
  EXPECT_EQ(l.numbers.outBytes, 1600u);
}

TEST(Dropout, BadP) {
  for (double p : {-0.1, 1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    LayerSpec spec = layerSpec("d", LayerKind::Dropout);
    spec.dropoutP = p;
    expectError({4, 100}, {spec}, {"('d', dropout)", "p is", "[0, 1)"});
  }
}

// relu keeps its result (ReluBackward0), relu6 its input (HardtanhBackward0, which clones the input
// of an in-place ReLU6).
TEST(Relu, ReluReadsItsOutputRelu6ItsInput) {
  for (LayerKind kind : {LayerKind::Relu, LayerKind::Relu6}) {
    const ChainLayer l = single({2, 3, 4, 5}, {layerSpec("r", kind)});
    EXPECT_EQ(l.outputShape, (Shape{2, 3, 4, 5}));
    EXPECT_EQ(l.numbers.needsInput, kind == LayerKind::Relu6);
    EXPECT_EQ(l.numbers.needsOutput, kind == LayerKind::Relu);
    EXPECT_EQ(l.numbers.extraBytes, 0u);
    EXPECT_EQ(l.paramCount, 0u);
    EXPECT_DOUBLE_EQ(l.numbers.fwdCost, 120.0 / 1e9);
  }
}

TEST(DType, Float16HalvesActivationAndParameterBytes) {
  LayerSpec d = layerSpec("d", LayerKind::Dropout);
  std::vector<LayerSpec> layers = {convSpec(8, 3, 1, 1), layerSpec("bn", LayerKind::BatchNorm),
                                   layerSpec("r", LayerKind::Relu), d};
  auto f32 = chainFromLayers({2, 3, 8, 8}, layers, DType::Float32);
  auto f16 = chainFromLayers({2, 3, 8, 8}, layers, DType::Float16);
  auto bf16 = chainFromLayers({2, 3, 8, 8}, layers, DType::BFloat16);
  ASSERT_TRUE(f32.isOk() && f16.isOk() && bf16.isOk());
  EXPECT_EQ(f16->inputBytes * 2, f32->inputBytes);
  for (std::size_t l = 1; l <= f32->size(); ++l) {
    EXPECT_EQ(f16->at(l).outBytes * 2, f32->at(l).outBytes) << l;
    EXPECT_EQ(f16->at(l).paramBytes * 2, f32->at(l).paramBytes) << l;
    EXPECT_EQ(f16->at(l), bf16->at(l)) << l;
    // The statistics are float32 and the mask is bytes, whatever the dtype.
    EXPECT_EQ(f16->at(l).extraBytes, f32->at(l).extraBytes) << l;
  }
  EXPECT_EQ(f32->at(2).extraBytes, 64u);
  EXPECT_EQ(f32->at(4).extraBytes, 2u * 8 * 64);
}

TEST(BuildChain, MeasuredOverridesReplaceTheDefaults) {
  LayerSpec c = convSpec(8, 3);
  c.hasMeasuredWorkspace = true;
  c.numbers.fwdWorkspaceBytes = 1000;
  c.numbers.bwdWorkspaceBytes = 2000;
  c.hasMeasuredCost = true;
  c.numbers.fwdCost = 0.5;
  c.numbers.bwdCost = 0.75;
  const ChainLayer l = single({1, 3, 8, 8}, {c});
  EXPECT_EQ(l.numbers.fwdWorkspaceBytes, 1000u);
  EXPECT_EQ(l.numbers.bwdWorkspaceBytes, 2000u);
  EXPECT_EQ(l.numbers.fwdCost, 0.5);
  EXPECT_EQ(l.numbers.bwdCost, 0.75);
  EXPECT_EQ(l.outputShape, (Shape{1, 8, 6, 6}));
}

TEST(BuildChain, ShapesFlowThroughLayers) {
  LayerSpec fc = layerSpec("fc", LayerKind::Linear);
  fc.outFeatures = 3;
  auto chain =
      chainFromLayers({2, 3, 8, 8}, {convSpec(4, 3, 1, 1), layerSpec("r", LayerKind::Relu),
                                     poolSpec(LayerKind::MaxPool, 2, 2), layerSpec("flatten", LayerKind::Flatten), fc});
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  ASSERT_EQ(chain->size(), 4u);
  EXPECT_EQ(chain->layers[2].outputShape, (Shape{2, 4, 4, 4}));
  EXPECT_EQ(chain->layers[3].inputShape, (Shape{2, 64}));
  EXPECT_EQ(chain->layers[3].specIndex, 4u);
  EXPECT_EQ(chain->paramCount(), (4u * 27 + 4) + (64u * 3 + 3));
  // A later layer's error names its own index.
  auto bad = chainFromLayers({2, 3, 8, 8}, {convSpec(4, 3, 1, 1), poolSpec(LayerKind::MaxPool, 16, 1, 0)});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("layer 2 ('p', maxpool)"), std::string::npos) << bad.status().message();
}

TEST(Vocabulary, EveryKindAndDtypeIsListedAndReadsBack) {
  EXPECT_EQ(layerKinds().size(), 31u);
  std::string known;
  for (LayerKind kind : layerKinds()) {
    auto parsed = parseKind(kindName(kind));
    ASSERT_TRUE(parsed.isOk()) << kindName(kind);
    EXPECT_EQ(*parsed, kind);
    known += (known.empty() ? "" : ", ") + std::string(kindName(kind));
  }
  EXPECT_NE(parseKind("nope").status().message().find("(known kinds: " + known + ")"), std::string::npos);
  ASSERT_EQ(dtypes().size(), 3u);
  for (DType dtype : dtypes()) {
    auto parsed = parseDType(dtypeName(dtype));
    ASSERT_TRUE(parsed.isOk()) << dtypeName(dtype);
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(parseDType("int8").status().message(), "unknown dtype 'int8' (expected float32, float16 or bfloat16)");
}

}  // namespace
}  // namespace remat
