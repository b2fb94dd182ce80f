// bf16-mixed runs on the GPU (issue 24; gpu/src/cuda_half_run.cpp, cuda_half_conv.cpp,
// cuda_half_blocks.cpp): chains of linears, the activations and dropout, a plain CNN (conv2d with
// and without a bias on cuDNN in bfloat16, batch norm, the pools, the adaptive pool) and the zoo's
// CNNs at their smallest size (AlexNet, VGG-11, ResNet-18, MobileNetV2 / V3, EfficientNet-B0,
// RegNetY-400MF, Inception-v3, ShuffleNetV2) with their blocks in bfloat16, as torch.autocast runs
// them (float32 accumulation from the weights' bfloat16 copies, float32 masters). Every planner's
// plan measures the prediction op by op and reproduces store-all's gradients; the gradients are
// the CPU's bf16-mixed run's within bfloat16's precision; a layer norm between bfloat16 layers runs
// from its float32 copy. ConvNeXt-Tiny's blocks (a float32 x(l-1) cast by the first conv, layer
// norm, layer scale, the float32 residual add) and blocks with inner dropout, sub, div and a
// broadcasting add run too. Needs a GPU: without one every test skips, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "elementwise_block_chains.hpp"
#include "executor_helpers.hpp"
#include "gpu_test_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/layer_checks.hpp"
#include "remat/gpu/cuda_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/zoo.hpp"

namespace remat::gpu {
namespace {

Chain mixed(const char* text) {
  auto chain = parseChain(text, "cuda_half_run_test.cpp");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  if (!chain) return Chain{};
  auto stepped = withPrecision(*chain, Precision::Bf16Mixed);
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped ? std::move(stepped).value() : Chain{};
}

constexpr const char* kMlp = R"({
  "format": "remat-chain/1", "name": "mlp", "input": {"shape": [8, 192], "dtype": "float32"},
  "layers": [
    {"kind": "linear", "name": "fc1", "out_features": 96},
    {"kind": "relu", "name": "relu1"}, {"kind": "dropout", "name": "drop", "p": 0.2},
    {"kind": "linear", "name": "fc2", "out_features": 64, "bias": false}, {"kind": "gelu", "name": "gelu"},
    {"kind": "linear", "name": "fc3", "out_features": 48}, {"kind": "relu6", "name": "relu6"},
    {"kind": "linear", "name": "fc4", "out_features": 10}]})";

constexpr const char* kNormFirst = R"({
  "format": "remat-chain/1", "name": "norm-first", "input": {"shape": [6, 40], "dtype": "float32"},
  "layers": [
    {"kind": "linear", "name": "fc0", "out_features": 32}, {"kind": "layernorm", "name": "ln"},
    {"kind": "linear", "name": "fc1", "out_features": 24}, {"kind": "silu", "name": "silu"},
    {"kind": "linear", "name": "fc2", "out_features": 10}]})";

constexpr const char* kPlainCnn = R"({
  "format": "remat-chain/1", "name": "plain-cnn", "input": {"shape": [4, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "conv1", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "bias": true},
    {"kind": "batchnorm", "name": "bn1"}, {"kind": "relu", "name": "relu1"},
    {"kind": "maxpool", "name": "pool", "kernel": 2, "stride": 2},
    {"kind": "conv2d", "name": "conv2", "out_channels": 16, "kernel": 3, "stride": 2, "padding": 1, "bias": false},
    {"kind": "batchnorm", "name": "bn2"}, {"kind": "relu6", "name": "relu6"},
    {"kind": "avgpool", "name": "avg", "kernel": 3, "stride": 1, "padding": 1},
    {"kind": "conv2d", "name": "conv3", "out_channels": 16, "kernel": 1, "stride": 1, "padding": 0, "bias": true},
    {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "dropout", "name": "drop", "p": 0.1}, {"kind": "linear", "name": "fc", "out_features": 10}]})";

// The zoo's CNNs that run in bfloat16 on the GPU, each at its smallest size (batch 2).
constexpr const char* kZooCnns[] = {"alexnet",        "vgg11_bn",           "resnet18",
                                    "mobilenet_v2",   "mobilenet_v3_large", "efficientnet_b0",
                                    "regnet_y_400mf", "inception_v3",       "shufflenet_v2_x1_0"};

Chain zooMixed(const char* name) {
  const std::string n(name);
  const std::int64_t resolution = n == "inception_v3" ? 75 : n == "alexnet" ? 63 : 32;  // the smallest
  auto spec = zooChain(name, {.batch = 2, .resolution = resolution, .numClasses = 10});
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  if (!spec) return Chain{};
  auto chain = buildChain(*spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  if (!chain) return Chain{};
  auto stepped = withPrecision(*chain, Precision::Bf16Mixed);
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped ? std::move(stepped).value() : Chain{};
}

// How far a layer's gradients lie from the CPU's: the largest difference against the largest
// gradient (small chains), or the L2 norm of the difference against the CPU's (deep networks, whose
// roundings add up: what scripts/torch-autocast-gradients.py measures against PyTorch).
enum class GradientNorm { MaxAbs, L2 };

double relativeDifference(const std::vector<float>& g, const std::vector<float>& c, GradientNorm norm) {
  double scale = 0.0, diff = 0.0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const double ci = static_cast<double>(c[i]), di = static_cast<double>(g[i]) - ci;
    if (norm == GradientNorm::MaxAbs) {
      scale = std::max(scale, std::fabs(ci));
      diff = std::max(diff, std::fabs(di));
    } else {
      scale += ci * ci;
      diff += di * di;
    }
  }
  if (norm == GradientNorm::L2) scale = std::sqrt(scale), diff = std::sqrt(diff);
  return scale > 0.0 ? diff / scale : (diff > 0.0 ? 1.0 : 0.0);
}

// Every layer's parameter gradients within `tolerance` of the CPU's bf16-mixed run's, and not all
// zero.
void expectGradientsNearTheCpus(const Chain& base, std::uint64_t seed, double tolerance,
                                GradientNorm norm = GradientNorm::MaxAbs) {
  const RunOptions options{.captureGradients = true};
  cpu::CpuDevice cpu;
  auto cpuRun = runPlan(testing::fittedTo(base, cpu), Plan{}, cpu, testing::seeded(seed), options);
  ASSERT_TRUE(cpuRun.isOk()) << cpuRun.status().message();
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  const Chain chain = testing::fittedTo(base, **device);
  auto gpuRun = runPlan(chain, Plan{}, **device, testing::seeded(seed), options);
  ASSERT_TRUE(gpuRun.isOk()) << gpuRun.status().message();
  ASSERT_EQ(gpuRun->parameterGradients.size(), cpuRun->parameterGradients.size());
  for (std::size_t l = 0; l < chain.size(); ++l) {
    const std::vector<float> g = asFloats(gpuRun->parameterGradients[l]);
    const std::vector<float> c = asFloats(cpuRun->parameterGradients[l]);
    ASSERT_EQ(g.size(), c.size()) << layerLabel(chain, l + 1);
    if (c.empty()) continue;
    // bfloat16 keeps 8 bits: a few roundings apart (cuDNN, cuBLAS and oneDNN sum in other orders).
    EXPECT_LE(relativeDifference(g, c, norm), tolerance) << layerLabel(chain, l + 1);
    EXPECT_TRUE(std::any_of(c.begin(), c.end(), [](float v) { return v != 0.0f; }))
        << layerLabel(chain, l + 1) << ": all-zero gradients test nothing";
  }
}

class CudaHalfRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status available = cudaDeviceAvailable();
    if (!available.isOk()) GTEST_SKIP() << "bf16-mixed on the GPU: " << available.message();
  }
};

TEST_F(CudaHalfRunTest, EveryPlanMeasuresThePredictionAndReproducesStoreAll) {
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  const Chain chain = testing::fittedTo(mixed(kMlp), **device);
  ASSERT_EQ(chain.step.precision, Precision::Bf16Mixed);
  testing::expectEveryPlanReproducesStoreAll(chain, **device, 3);
}

TEST_F(CudaHalfRunTest, GradientsAreTheCpusWithinBfloat16Precision) {
  expectGradientsNearTheCpus(mixed(kMlp), 9, 3e-2);
}

// conv2d (with and without a bias, from a float32 and a bfloat16 input), batch norm, the pools and
// the adaptive pool in bfloat16, the head's linear after them.
TEST_F(CudaHalfRunTest, APlainCnnMeasuresThePredictionUnderEveryPlan) {
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  const Chain chain = testing::fittedTo(mixed(kPlainCnn), **device);
  testing::expectEveryPlanReproducesStoreAll(chain, **device, 5);
}

TEST_F(CudaHalfRunTest, APlainCnnsGradientsAreTheCpus) { expectGradientsNearTheCpus(mixed(kPlainCnn), 5, 3e-2); }

// The zoo's CNNs at a small size: plain stacks whose adaptive pool makes 7x7 of a smaller map
// (AlexNet, VGG-11 with batch norm), basic blocks (ResNet-18), inverted residuals with relu6
// (MobileNetV2), hardswish and SE with hardsigmoid (MobileNetV3), MBConv with
// Squeeze-and-Excitation (EfficientNet-B0), RegNetY's blocks, pool branches and concatenations with
// 1x7 / 7x1 convolutions (Inception-v3 at 75x75), channel slices and shuffles (ShuffleNetV2), every
// inner convolution from its bfloat16 weight copy in E.
TEST_F(CudaHalfRunTest, ZooCnnsMeasureThePredictionUnderEveryPlan) {
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  for (const char* name : kZooCnns) {
    SCOPED_TRACE(name);
    const Chain chain = testing::fittedTo(zooMixed(name), **device);
    testing::expectEveryPlanReproducesStoreAll(chain, **device, 7);
  }
}

TEST_F(CudaHalfRunTest, ZooCnnsGradientsAreTheCpus) {
  for (const char* name : kZooCnns) {
    SCOPED_TRACE(name);
    // Deeper chains add roundings: 5% in the L2 norm, each layer.
    expectGradientsNearTheCpus(zooMixed(name), 7, 5e-2, GradientNorm::L2);
  }
}

// ConvNeXt-Tiny (32x32, batch 2): its blocks read a float32 x(l-1) through the first conv's
// bfloat16 cast (in E before the weight copies), run the layer norm on bfloat16 data with float32
// statistics, layer_scale's product in float32 and the float32 residual add (kernels_half_convnext.cu):
// every plan measures the prediction op by op, and the gradients are the CPU's bf16-mixed run's.
TEST_F(CudaHalfRunTest, ConvNextTinyMeasuresThePredictionUnderEveryPlan) {
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  const Chain chain = testing::fittedTo(zooMixed("convnext_tiny"), **device);
  testing::expectEveryPlanReproducesStoreAll(chain, **device, 7);
  expectGradientsNearTheCpus(zooMixed("convnext_tiny"), 7, 5e-2, GradientNorm::L2);
}

// Issue 22's blocks in bfloat16 after a bfloat16 conv: inner dropout (the float32 mask), sub, div
// and a broadcasting add, sub and div of a pooled mean (kernels_half_arith.cu).
TEST_F(CudaHalfRunTest, BlocksWithDropoutSubDivMeasureThePredictionAndTheCpusGradients) {
  using namespace blocks;
  const json conv = {{"name", "stem"}, {"kind", "conv2d"}, {"out_channels", 8},
                     {"kernel", 3},    {"stride", 1},      {"padding", 1}};
  const json layers = {conv,
                       arithBranch("arith"),
                       dropoutBranch("drop", "gelu"),
                       arithGate("gate"),
                       meanAdd(),
                       meanSub(),
                       meanDiv(),
                       {{"name", "gap"}, {"kind", "adaptive_avgpool"}},
                       {{"name", "flat"}, {"kind", "flatten"}},
                       linear("fc", 10)};
  auto stepped = withPrecision(chainOf("arith_nchw", {2, 3, 8, 8}, layers), Precision::Bf16Mixed);
  ASSERT_TRUE(stepped.isOk()) << stepped.status().message();
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  testing::expectEveryPlanReproducesStoreAll(testing::fittedTo(*stepped, **device), **device, 3);
  expectGradientsNearTheCpus(*stepped, 3, 3e-2);
}

// A layer norm after a bfloat16 linear runs in float32 from its input's float32 copy, and the
// linear after it casts its float32 output back: both casts measured as the model counts them.
TEST_F(CudaHalfRunTest, ALayerNormBetweenBfloat16LayersRunsFromItsFloat32Copy) {
  auto device = createCudaDevice({});
  ASSERT_TRUE(device.isOk()) << device.status().message();
  const Chain chain = testing::fittedTo(mixed(kNormFirst), **device);
  testing::expectEveryPlanReproducesStoreAll(chain, **device, 2);
  expectGradientsNearTheCpus(mixed(kNormFirst), 2, 3e-2);
}

}  // namespace
}  // namespace remat::gpu
