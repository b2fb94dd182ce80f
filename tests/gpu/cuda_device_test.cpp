// The CUDA backend on a real GPU (skipped, with the reason, where there is none): every plan's
// gradients bitwise equal store-all's in deterministic mode, the measured footprint of every op
// equals the model's (our allocator's count) and the pool's high-water mark is within 2% of the
// predicted peak, results match the CPU reference, profiling feeds the planners, and running out
// of memory is an error that leaves the device usable.
#include "remat/gpu/cuda_device.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "chain_helpers.hpp"
#include "executor_helpers.hpp"
#include "gpu_test_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/exec/profiler.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/random_chain.hpp"
#include "remat/model/zoo.hpp"

namespace remat::gpu {
namespace {

// Every primitive kind: grouped and biased convolutions, both batch norms, both pools with padding,
// a non-divisible adaptive pool, dropout in 4-D and 2-D, relu and relu6, linear layers.
constexpr const char* kPrimitiveChain = R"({"format": "remat-chain/1", "name": "gpu-primitives",
 "input": {"shape": [4, 3, 16, 16], "dtype": "float32"},
 "layers": [
  {"name": "conv1", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1},
  {"name": "bn1", "kind": "batchnorm"},
  {"name": "relu1", "kind": "relu"},
  {"name": "pool1", "kind": "maxpool", "kernel": 2, "stride": 2},
  {"name": "conv2", "kind": "conv2d", "out_channels": 12, "kernel": 3, "stride": 1, "padding": 1, "groups": 4,
   "bias": false},
  {"name": "relu2", "kind": "relu6"},
  {"name": "pool2", "kind": "avgpool", "kernel": 3, "stride": 1, "padding": 1},
  {"name": "drop1", "kind": "dropout", "p": 0.25},
  {"name": "pool3", "kind": "adaptive_avgpool", "output_height": 3, "output_width": 3},
  {"name": "flatten", "kind": "flatten"},
  {"name": "fc1", "kind": "linear", "out_features": 16},
  {"name": "bn2", "kind": "batchnorm"},
  {"name": "relu3", "kind": "relu"},
  {"name": "drop2", "kind": "dropout", "p": 0.5},
  {"name": "fc2", "kind": "linear", "out_features": 10}]})";

// The three residual blocks, with and without downsampling, expansion and the residual add.
constexpr const char* kBlockChain = R"({"format": "remat-chain/1", "name": "gpu-blocks",
 "input": {"shape": [2, 3, 32, 32], "dtype": "float32"},
 "layers": [
  {"name": "conv1", "kind": "conv2d", "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
  {"name": "bn1", "kind": "batchnorm"},
  {"name": "relu", "kind": "relu"},
  {"name": "layer1.0", "kind": "basic_block", "out_channels": 16, "stride": 1},
  {"name": "layer2.0", "kind": "basic_block", "out_channels": 32, "stride": 2},
  {"name": "layer3.0", "kind": "bottleneck", "out_channels": 64, "width": 16, "stride": 1},
  {"name": "features.1", "kind": "inverted_residual", "out_channels": 64, "stride": 1, "expand_ratio": 2},
  {"name": "features.2", "kind": "inverted_residual", "out_channels": 48, "stride": 2, "expand_ratio": 1},
  {"name": "avgpool", "kind": "adaptive_avgpool", "output_height": 1, "output_width": 1},
  {"name": "flatten", "kind": "flatten"},
  {"name": "fc", "kind": "linear", "out_features": 10}]})";

// Blocks with listed inner ops, as the ONNX importer writes them: SqueezeNet's Fire (convs with a
// bias, concat), DenseNet's dense layers (batch norm on a concat, the input concatenated twice)
// and an eval-mode ResNet block (convs with a bias, an add reading the skip first).
constexpr const char* kListedBlockChain = R"({"format": "remat-chain/1", "name": "gpu-listed-blocks",
 "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
 "layers": [
  {"name": "conv1", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1},
  {"name": "relu", "kind": "relu"},
  {"name": "fire", "kind": "block", "ops": [
    {"name": "e1", "kind": "conv2d", "out_channels": 8, "kernel": 1},
    {"name": "r1", "kind": "relu"},
    {"name": "e3", "kind": "conv2d", "inputs": [0], "out_channels": 8, "kernel": 3, "padding": 1},
    {"name": "r3", "kind": "relu"},
    {"name": "cat", "kind": "concat", "inputs": [2, 4]}]},
  {"name": "dense", "kind": "block", "ops": [
    {"name": "n1", "kind": "batchnorm"},
    {"name": "c1", "kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1, "bias": false},
    {"name": "cat", "kind": "concat", "inputs": [0, 2, 0]},
    {"name": "n2", "kind": "batchnorm"},
    {"name": "cat2", "kind": "concat", "inputs": [4, 2]}]},
  {"name": "res", "kind": "block", "ops": [
    {"name": "c1", "kind": "conv2d", "out_channels": 40, "kernel": 3, "padding": 1},
    {"name": "r", "kind": "relu"},
    {"name": "c2", "kind": "conv2d", "out_channels": 40, "kernel": 3, "padding": 1},
    {"name": "add", "kind": "add", "inputs": [0, 3]},
    {"name": "r2", "kind": "relu"}]},
  {"name": "avgpool", "kind": "adaptive_avgpool", "output_height": 1, "output_width": 1},
  {"name": "flatten", "kind": "flatten"},
  {"name": "fc", "kind": "linear", "out_features": 10}]})";

// Every pointwise activation as a chain layer and as an inner op (the generic CUDA kernels; sigmoid
// and tanh from their output, the others from their input).
constexpr const char* kActivationChain = R"({"format": "remat-chain/1", "name": "gpu-activations",
 "input": {"shape": [2, 3, 12, 12], "dtype": "float32"},
 "layers": [
  {"name": "conv1", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1},
  {"name": "bn1", "kind": "batchnorm"},
  {"name": "silu", "kind": "silu"},
  {"name": "conv2", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1},
  {"name": "hs", "kind": "hardswish"},
  {"name": "res", "kind": "block", "ops": [
    {"name": "c1", "kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1},
    {"name": "s", "kind": "sigmoid"},
    {"name": "c2", "kind": "conv2d", "out_channels": 8, "kernel": 1},
    {"name": "t", "kind": "tanh"},
    {"name": "add", "kind": "add", "inputs": [0, 4]},
    {"name": "g", "kind": "gelu"},
    {"name": "h", "kind": "hardsigmoid"},
    {"name": "w", "kind": "hardswish"},
    {"name": "u", "kind": "silu"}]},
  {"name": "conv3", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1},
  {"name": "tanh", "kind": "tanh"},
  {"name": "conv4", "kind": "conv2d", "out_channels": 8, "kernel": 1},
  {"name": "sigmoid", "kind": "sigmoid"},
  {"name": "conv5", "kind": "conv2d", "out_channels": 8, "kernel": 1},
  {"name": "hsig", "kind": "hardsigmoid"},
  {"name": "avgpool", "kind": "adaptive_avgpool", "output_height": 1, "output_width": 1},
  {"name": "flatten", "kind": "flatten"},
  {"name": "fc1", "kind": "linear", "out_features": 12},
  {"name": "gelu", "kind": "gelu"},
  {"name": "fc2", "kind": "linear", "out_features": 10}]})";

// layernorm (own kernels, kernels_layernorm.cu) right after a flatten and between linear layers.
constexpr const char* kLayerNormChain = R"({"format": "remat-chain/1", "name": "gpu-layernorm",
 "input": {"shape": [3, 3, 6, 6], "dtype": "float32"},
 "layers": [
  {"name": "conv1", "kind": "conv2d", "out_channels": 4, "kernel": 3, "stride": 1, "padding": 1},
  {"name": "flatten", "kind": "flatten"},
  {"name": "norm0", "kind": "layernorm"},
  {"name": "fc1", "kind": "linear", "out_features": 300},
  {"name": "norm1", "kind": "layernorm"},
  {"name": "gelu", "kind": "gelu"},
  {"name": "fc2", "kind": "linear", "out_features": 16},
  {"name": "norm2", "kind": "layernorm", "epsilon": 0.01},
  {"name": "silu", "kind": "silu"},
  {"name": "fc3", "kind": "linear", "out_features": 10}]})";

// Squeeze-and-Excitation (global_avgpool, 1x1 convs with bias, mul with broadcasting) without and
// with a skip, as EfficientNet's and MobileNetV3's blocks hold it.
constexpr const char* kSqueezeExcitationChain = R"({"format": "remat-chain/1", "name": "gpu-se",
 "input": {"shape": [2, 3, 12, 12], "dtype": "float32"},
 "layers": [
  {"name": "conv1", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1},
  {"name": "bn1", "kind": "batchnorm"},
  {"name": "silu", "kind": "silu"},
  {"name": "se", "kind": "block", "ops": [
    {"name": "avgpool", "kind": "global_avgpool"},
    {"name": "fc1", "kind": "conv2d", "out_channels": 2, "kernel": 1},
    {"name": "activation", "kind": "relu"},
    {"name": "fc2", "kind": "conv2d", "out_channels": 8, "kernel": 1},
    {"name": "scale_activation", "kind": "hardsigmoid"},
    {"name": "mul", "kind": "mul", "inputs": [5, 0]}]},
  {"name": "mbconv", "kind": "block", "ops": [
    {"name": "dw", "kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1, "groups": 8, "bias": false},
    {"name": "bn", "kind": "batchnorm"},
    {"name": "act", "kind": "silu"},
    {"name": "avgpool", "kind": "global_avgpool"},
    {"name": "fc1", "kind": "conv2d", "out_channels": 2, "kernel": 1},
    {"name": "activation", "kind": "silu"},
    {"name": "fc2", "kind": "conv2d", "out_channels": 8, "kernel": 1},
    {"name": "scale_activation", "kind": "sigmoid"},
    {"name": "mul", "kind": "mul", "inputs": [3, 8]},
    {"name": "project", "kind": "conv2d", "out_channels": 8, "kernel": 1, "bias": false},
    {"name": "bn2", "kind": "batchnorm"},
    {"name": "add", "kind": "add", "inputs": [11, 0]}]},
  {"name": "avgpool", "kind": "adaptive_avgpool", "output_height": 1, "output_width": 1},
  {"name": "flatten", "kind": "flatten"},
  {"name": "fc", "kind": "linear", "out_features": 10}]})";

// ConvNeXt (issue 22): the stem's LayerNorm2d (layernorm over the channels of NCHW), a CNBlock
// (depthwise 7x7, channel layer norm, 1x1 convs for the Linears, GELU, layer_scale, add) and the
// head's LayerNorm2d over [N, C, 1, 1].
constexpr const char* kConvNextChain = R"({"format": "remat-chain/1", "name": "gpu-convnext",
 "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
 "layers": [
  {"name": "stem", "kind": "conv2d", "out_channels": 8, "kernel": 4, "stride": 4, "bias": true},
  {"name": "stem.norm", "kind": "layernorm", "epsilon": 1e-6},
  {"name": "block", "kind": "block", "ops": [
    {"name": "dw", "kind": "conv2d", "out_channels": 8, "kernel": 7, "padding": 3, "groups": 8, "bias": true},
    {"name": "norm", "kind": "layernorm", "epsilon": 1e-6},
    {"name": "fc1", "kind": "conv2d", "out_channels": 32, "kernel": 1, "bias": true},
    {"name": "gelu", "kind": "gelu"},
    {"name": "fc2", "kind": "conv2d", "out_channels": 8, "kernel": 1, "bias": true},
    {"name": "layer_scale", "kind": "layer_scale"},
    {"name": "add", "kind": "add", "inputs": [6, 0]}]},
  {"name": "avgpool", "kind": "adaptive_avgpool", "output_height": 1, "output_width": 1},
  {"name": "head.norm", "kind": "layernorm", "epsilon": 1e-6},
  {"name": "flatten", "kind": "flatten"},
  {"name": "fc", "kind": "linear", "out_features": 10}]})";

// Inception-v3's factorised convs (issue 22): chain-level 1x7 and 7x1 convs (cuDNN's filter and
// convolution descriptors per axis), a conv with every per-axis field different, and a block of
// InceptionE's branches (1x3 and 3x1 reading one tensor, concatenated with a 1x1 branch and an
// average-pool branch).
constexpr const char* kNonSquareChain = R"({"format": "remat-chain/1", "name": "gpu-nonsquare",
 "input": {"shape": [2, 3, 12, 12], "dtype": "float32"},
 "layers": [
  {"name": "c17", "kind": "conv2d", "out_channels": 6, "kernel": 1, "kernel_width": 7, "padding_width": 3,
   "bias": false},
  {"name": "bn", "kind": "batchnorm"}, {"name": "relu", "kind": "relu"},
  {"name": "c71", "kind": "conv2d", "out_channels": 6, "kernel": 7, "kernel_width": 1, "padding": 3,
   "padding_width": 0, "bias": true},
  {"name": "odd", "kind": "conv2d", "out_channels": 8, "kernel": 2, "stride": 2, "padding": 1, "kernel_width": 3,
   "stride_width": 1, "padding_width": 0, "bias": true},
  {"name": "mixed", "kind": "block", "ops": [
    {"name": "b1", "kind": "conv2d", "out_channels": 4, "kernel": 1, "bias": false},
    {"name": "b3_1", "kind": "conv2d", "out_channels": 4, "kernel": 1, "bias": false, "inputs": [0]},
    {"name": "b3_2a", "kind": "conv2d", "out_channels": 4, "kernel": 1, "kernel_width": 3, "padding_width": 1,
     "bias": false},
    {"name": "b3_2b", "kind": "conv2d", "out_channels": 4, "kernel": 3, "kernel_width": 1, "padding": 1,
     "padding_width": 0, "bias": false, "inputs": [2]},
    {"name": "pool", "kind": "avgpool", "kernel": 3, "stride": 1, "padding": 1, "inputs": [0]},
    {"name": "bp", "kind": "conv2d", "out_channels": 2, "kernel": 1, "bias": false},
    {"name": "concat", "kind": "concat", "inputs": [1, 3, 4, 6]}]},
  {"name": "avgpool", "kind": "adaptive_avgpool", "output_height": 1, "output_width": 1},
  {"name": "flatten", "kind": "flatten"},
  {"name": "fc", "kind": "linear", "out_features": 10}]})";

// GoogLeNet / Inception pool branches (issue 22): a block of a 1x1 conv, a ceil-mode 3x3 max pool
// then a 1x1 conv, and a padded 3x3 average pool then a 1x1 conv, concatenated; the pools'
// backwards add into the gradient the other branches wrote, and the max pool keeps its argmax in E.
// Twice, so the second block's input gradient is a recomputed layer's.
constexpr const char* kPoolBlockChain = R"({"format": "remat-chain/1", "name": "gpu-pool-branches",
 "input": {"shape": [2, 3, 9, 9], "dtype": "float32"},
 "layers": [
  {"name": "stem", "kind": "conv2d", "out_channels": 4, "kernel": 3, "padding": 1},
  {"name": "inception1", "kind": "block", "ops": [
    {"name": "b1", "kind": "conv2d", "out_channels": 3, "kernel": 1, "inputs": [0]},
    {"name": "b2pool", "kind": "maxpool", "kernel": 3, "stride": 1, "padding": 1, "ceil_mode": true, "inputs": [0]},
    {"name": "b2", "kind": "conv2d", "out_channels": 2, "kernel": 1, "inputs": [2]},
    {"name": "b3pool", "kind": "avgpool", "kernel": 3, "stride": 1, "padding": 1, "inputs": [0]},
    {"name": "b3", "kind": "conv2d", "out_channels": 2, "kernel": 1, "inputs": [4]},
    {"name": "concat", "kind": "concat", "inputs": [1, 3, 5]}]},
  {"name": "pool", "kind": "maxpool", "kernel": 3, "stride": 2},
  {"name": "inception2", "kind": "block", "ops": [
    {"name": "b1", "kind": "conv2d", "out_channels": 3, "kernel": 1, "inputs": [0]},
    {"name": "b2pool", "kind": "maxpool", "kernel": 3, "stride": 2, "padding": 1, "ceil_mode": true, "inputs": [0]},
    {"name": "b2", "kind": "conv2d", "out_channels": 2, "kernel": 3, "stride": 1, "padding": 1, "inputs": [2]},
    {"name": "b2up", "kind": "avgpool", "kernel": 2, "stride": 1, "padding": 1, "inputs": [3]},
    {"name": "b3pool", "kind": "avgpool", "kernel": 3, "stride": 1, "padding": 1, "inputs": [0]},
    {"name": "b3", "kind": "conv2d", "out_channels": 2, "kernel": 1, "inputs": [5]},
    {"name": "b1b", "kind": "relu", "inputs": [1]},
    {"name": "concat", "kind": "concat", "inputs": [7, 4, 6]}]},
  {"name": "avgpool", "kind": "adaptive_avgpool", "output_height": 1, "output_width": 1},
  {"name": "flatten", "kind": "flatten"},
  {"name": "fc", "kind": "linear", "out_features": 10}]})";

// ShuffleNetV2 (issue 22): a stride-2 block (two branches) and a stride-1 block whose channel split
// is two views of its input (the concat reads one in place, the first conv gathers the other), the
// channel concatenation and the channel shuffle.
constexpr const char* kShuffleChain = R"({"format": "remat-chain/1", "name": "gpu-shuffle",
 "input": {"shape": [2, 3, 8, 8], "dtype": "float32"},
 "layers": [
  {"name": "stem", "kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1},
  {"name": "stage.0", "kind": "block", "ops": [
    {"name": "branch1.0", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 2, "padding": 1, "groups": 8, "bias": false, "inputs": [0]},
    {"name": "branch1.1", "kind": "batchnorm"},
    {"name": "branch1.2", "kind": "conv2d", "out_channels": 8, "kernel": 1, "stride": 1, "padding": 0, "groups": 1, "bias": false, "inputs": [2]},
    {"name": "branch1.3", "kind": "batchnorm"},
    {"name": "branch1.4", "kind": "relu"},
    {"name": "branch2.0", "kind": "conv2d", "out_channels": 8, "kernel": 1, "stride": 1, "padding": 0, "groups": 1, "bias": false, "inputs": [0]},
    {"name": "branch2.1", "kind": "batchnorm"},
    {"name": "branch2.2", "kind": "relu"},
    {"name": "branch2.3", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 2, "padding": 1, "groups": 8, "bias": false, "inputs": [8]},
    {"name": "branch2.4", "kind": "batchnorm"},
    {"name": "branch2.5", "kind": "conv2d", "out_channels": 8, "kernel": 1, "stride": 1, "padding": 0, "groups": 1, "bias": false, "inputs": [10]},
    {"name": "branch2.6", "kind": "batchnorm"},
    {"name": "branch2.7", "kind": "relu"},
    {"name": "concat", "kind": "concat", "inputs": [5, 13]},
    {"name": "channel_shuffle", "kind": "channel_shuffle", "groups": 2}]},
  {"name": "stage.1", "kind": "block", "ops": [
    {"name": "slice", "kind": "slice", "begin": 0, "out_channels": 8, "inputs": [0]},
    {"name": "slice_1", "kind": "slice", "begin": 8, "out_channels": 8, "inputs": [0]},
    {"name": "branch2.0", "kind": "conv2d", "out_channels": 8, "kernel": 1, "stride": 1, "padding": 0, "groups": 1, "bias": false, "inputs": [2]},
    {"name": "branch2.1", "kind": "batchnorm"},
    {"name": "branch2.2", "kind": "relu"},
    {"name": "branch2.3", "kind": "conv2d", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "groups": 8, "bias": false, "inputs": [5]},
    {"name": "branch2.4", "kind": "batchnorm"},
    {"name": "branch2.5", "kind": "conv2d", "out_channels": 8, "kernel": 1, "stride": 1, "padding": 0, "groups": 1, "bias": false, "inputs": [7]},
    {"name": "branch2.6", "kind": "batchnorm"},
    {"name": "branch2.7", "kind": "relu"},
    {"name": "concat", "kind": "concat", "inputs": [1, 10]},
    {"name": "channel_shuffle", "kind": "channel_shuffle", "groups": 2}]},
  {"name": "avgpool", "kind": "adaptive_avgpool", "output_height": 1, "output_width": 1},
  {"name": "flatten", "kind": "flatten"},
  {"name": "fc", "kind": "linear", "out_features": 10}]})";

Chain parse(const char* text) {
  auto chain = parseChain(text, "cuda_device_test.cpp");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status available = cudaDeviceAvailable();
    if (!available.isOk()) GTEST_SKIP() << available.message();
  }

  static std::unique_ptr<CudaDevice> open(CudaDeviceOptions options = {}) {
    auto device = createCudaDevice(options);
    EXPECT_TRUE(device.isOk()) << device.status().message();
    return device.isOk() ? std::move(device).value() : nullptr;
  }

  // The chain with the workspaces of the algorithms this GPU picks written in (what `remat profile`
  // does): deterministic backward-filter algorithms may need a workspace, which an unprofiled
  // chain (wf = wb = 0) does not give them.
  static Chain profiled(const Chain& chain) {
    auto device = open({.workspacePolicy = WorkspacePolicy::Profile});
    if (device == nullptr) return chain;
    auto profile = profileChain(chain, *device, {.repeats = 1});
    EXPECT_TRUE(profile.isOk()) << profile.status().message();
    if (!profile) return chain;
    auto built = buildChain(profile->spec);
    EXPECT_TRUE(built.isOk()) << built.status().message();
    return built.isOk() ? std::move(built).value() : chain;
  }
};

// Plans of every planner and every single-checkpoint plan: recomputation and every checkpoint
// position, for each layer kind.
std::vector<Plan> plansToCheck(const Chain& chain) {
  std::vector<Plan> plans;
  for (const auto& [name, plan] : testing::plannerPlans(chain, testing::allPlanners())) plans.push_back(plan);
  for (std::size_t c = 1; c < chain.size(); ++c) {
    Plan single{{c}};
    if (std::find(plans.begin(), plans.end(), single) == plans.end()) plans.push_back(single);
  }
  Plan every;
  for (std::size_t c = 1; c < chain.size(); ++c) every.checkpoints.push_back(c);
  if (std::find(plans.begin(), plans.end(), every) == plans.end()) plans.push_back(every);
  return plans;
}

TEST_F(CudaDeviceTest, EveryPlanBitwiseEqualsStoreAllAndMatchesTheModel) {
  for (const char* text : {kPrimitiveChain, kBlockChain, kListedBlockChain, kActivationChain, kSqueezeExcitationChain,
                           kLayerNormChain, kConvNextChain, kPoolBlockChain, kShuffleChain, kNonSquareChain}) {
    const Chain chain = profiled(parse(text));
    SCOPED_TRACE(chain.name);
    auto device = open();
    ASSERT_NE(device, nullptr);
    auto interp = Interpreter::create(chain, *device, testing::seeded(5));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    RunOptions options{.captureGradients = true, .captureDigests = true};
    auto reference = (*interp)->run(Plan{}, options);
    ASSERT_TRUE(reference.isOk()) << reference.status().message();
    EXPECT_EQ(reference->timelines[0].source, "gpu");
    testing::expectMatchesSimulation(chain, Plan{}, reference->timelines[0]);
    for (const Plan& plan : plansToCheck(chain)) {
      SCOPED_TRACE("plan [" + formatCheckpointList(plan) + "]");
      options.steps = 2;  // the second step reuses pool memory: must not change anything
      auto run = (*interp)->run(plan, options);
      ASSERT_TRUE(run.isOk()) << run.status().message();
      testing::expectReproducesStoreAll(chain, plan, *run, *reference);
    }
    EXPECT_EQ(device->allocator().bytesHeld(), (*interp)->staticBytes());  // the int64 labels are static
    EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
  }
}

TEST_F(CudaDeviceTest, MatchesTheCpuReference) {
  for (const char* text : {kPrimitiveChain, kBlockChain, kListedBlockChain, kActivationChain, kSqueezeExcitationChain,
                           kLayerNormChain, kConvNextChain, kPoolBlockChain, kShuffleChain, kNonSquareChain}) {
    const Chain chain = profiled(parse(text));
    SCOPED_TRACE(chain.name);
    const RunOptions options{.captureGradients = true};
    cpu::CpuDevice cpu;
    // The CPU's oneDNN scratch may exceed the GPU profile's workspaces: the values do not depend on it.
    auto cpuRun = runPlan(testing::fittedTo(chain, cpu), Plan{}, cpu, testing::seeded(9), options);
    ASSERT_TRUE(cpuRun.isOk()) << cpuRun.status().message();
    auto device = open();
    ASSERT_NE(device, nullptr);
    auto gpuRun = runPlan(chain, Plan{}, *device, testing::seeded(9), options);
    ASSERT_TRUE(gpuRun.isOk()) << gpuRun.status().message();
    expectGradientsNearTheCpus(chain, *gpuRun, *cpuRun);
  }
}

// Abstract layers run the CPU's synthetic kernels bit for bit.
TEST_F(CudaDeviceTest, AbstractChainsEqualTheCpuBitForBit) {
  const Chain chain = makeRandomChain({.layers = 9, .seed = 3});
  const RunOptions options{.captureGradients = true, .captureDigests = true};
  const Plan plan{{2, 5}};
  cpu::CpuDevice cpu;
  auto cpuRun = runPlan(chain, plan, cpu, testing::seeded(4), options);
  ASSERT_TRUE(cpuRun.isOk()) << cpuRun.status().message();
  auto device = open();
  ASSERT_NE(device, nullptr);
  auto gpuRun = runPlan(chain, plan, *device, testing::seeded(4), options);
  ASSERT_TRUE(gpuRun.isOk()) << gpuRun.status().message();
  testing::expectMatchesSimulation(chain, plan, gpuRun->timelines[0]);
  EXPECT_EQ(gpuRun->parameterGradients, cpuRun->parameterGradients);
  EXPECT_EQ(testing::gradientDigests(*gpuRun), testing::gradientDigests(*cpuRun));
}

// Big enough tensors (megabytes) that the pool's rounding is small against them.
TEST_F(CudaDeviceTest, PoolHighWaterIsWithinTwoPercentOfThePrediction) {
  auto spec = zooChain("resnet18", {.batch = 16, .resolution = 112});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto built = buildChain(*spec);
  ASSERT_TRUE(built.isOk()) << built.status().message();
  const Chain profiledChain = profiled(*built);
  const Chain* chain = &profiledChain;
  auto device = open();
  ASSERT_NE(device, nullptr);
  auto interp = Interpreter::create(*chain, *device);
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  for (const char* planner : {"none", "sqrt", "optimal"}) {
    auto planned = runPlanner(*chain, planner);
    ASSERT_TRUE(planned.isOk()) << planned.status().message();
    auto sim = simulate(*chain, planned->plan);
    ASSERT_TRUE(sim.isOk());
    CudaAllocator& allocator = device->cudaAllocator();
    ASSERT_TRUE(allocator.trim().isOk());
    ASSERT_TRUE(device->checkFits(sim->peakBytes()).isOk());
    ASSERT_TRUE(allocator.beginLongWindow().isOk());
    auto run = (*interp)->run(planned->plan);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectMatchesSimulation(*chain, planned->plan, run->timelines[0]);
    auto pool = allocator.longWindowStats();
    ASSERT_TRUE(pool.isOk()) << pool.status().message();
    const double predicted = static_cast<double>(sim->peakBytes());  // the labels included
    const double used = static_cast<double>(pool->usedHighBytes);
    EXPECT_GE(used, predicted) << planner << ": the pool handed out less than we counted";
    EXPECT_LE(used, 1.02 * predicted) << planner << ": pool used high-water " << used << " vs predicted " << predicted;
    EXPECT_GE(pool->reservedHighBytes, pool->usedHighBytes) << planner;
  }
}

TEST_F(CudaDeviceTest, ProfileWritesWorkspacesThatTheRunThenUsesExactly) {
  const Chain chain = parse(kBlockChain);
  auto profiler = open({.workspacePolicy = WorkspacePolicy::Profile});
  ASSERT_NE(profiler, nullptr);
  auto profile = profileChain(chain, *profiler, {.repeats = 3});
  ASSERT_TRUE(profile.isOk()) << profile.status().message();
  ASSERT_EQ(profile->layers.size(), chain.size());
  for (const LayerProfile& p : profile->layers) {
    EXPECT_TRUE(p.measured) << p.name;
    EXPECT_GT(p.fwdMs, 0.0) << p.name;
    EXPECT_GT(p.bwdMs, 0.0) << p.name;
  }
  for (const LayerSpec& l : profile->spec.layers)
    if (l.kind != LayerKind::Flatten) {
      EXPECT_TRUE(l.hasMeasuredWorkspace && l.hasMeasuredCost) << l.name;
    }
  // Through the file format and back, as `remat profile` then `remat run` would.
  auto profiled = parseChain(chainSpecToText(profile->spec), "profiled.json");
  ASSERT_TRUE(profiled.isOk()) << profiled.status().message();
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    EXPECT_EQ(profiled->at(l).fwdWorkspaceBytes, profile->layers[l - 1].fwdWorkspaceBytes);
    EXPECT_EQ(profiled->at(l).bwdWorkspaceBytes, profile->layers[l - 1].bwdWorkspaceBytes);
    // Blocks: the arena, plus cuDNN's scratch when an inner convolution wants one.
    if (isComposite(profiled->layers[l - 1].kind)) {
      EXPECT_GE(profiled->at(l).fwdWorkspaceBytes, chain.at(l).fwdWorkspaceBytes) << profiled->layers[l - 1].name;
    }
  }
  profiler.reset();
  auto device = open();
  ASSERT_NE(device, nullptr);
  auto planned = runPlanner(*profiled, "optimal");
  ASSERT_TRUE(planned.isOk());
  auto run = runPlan(*profiled, planned->plan, *device);
  ASSERT_TRUE(run.isOk()) << run.status().message();
  testing::expectMatchesSimulation(*profiled, planned->plan, run->timelines[0]);
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    auto text = device->describeLayer(l);
    ASSERT_TRUE(text.isOk());
    // Deterministic mode never picks the atomics-based backward algorithms.
    EXPECT_EQ(text->find("bwd data ALGO_0"), std::string::npos) << *text;
    EXPECT_EQ(text->find("bwd filter ALGO_0"), std::string::npos) << *text;
    EXPECT_EQ(text->find("bwd filter ALGO_3"), std::string::npos) << *text;
  }
}

// Without measured workspaces the device either finds zero-workspace algorithms or says what to do.
TEST_F(CudaDeviceTest, UnprofiledChainsRunOrAskForAProfile) {
  for (const char* text : {kPrimitiveChain, kBlockChain, kListedBlockChain, kActivationChain}) {
    const Chain chain = parse(text);
    auto device = open();
    ASSERT_NE(device, nullptr);
    auto run = runPlan(chain, Plan{{2}}, *device);
    if (run.isOk()) {
      testing::expectMatchesSimulation(chain, Plan{{2}}, run->timelines[0]);
    } else {
      EXPECT_EQ(run.status().code(), ErrorCode::InvalidInput) << run.status().message();
      EXPECT_NE(run.status().message().find("profile"), std::string::npos) << run.status().message();
    }
  }
}

TEST_F(CudaDeviceTest, RefusesAPlanThatCannotFit) {
  auto device = open();
  ASSERT_NE(device, nullptr);
  const Status status = device->checkFits(2 * device->info().totalBytes);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(status.message().find("needs"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("device has"), std::string::npos) << status.message();
  EXPECT_TRUE(device->checkFits(1 << 20).isOk());
}

TEST_F(CudaDeviceTest, AllocationFailureMidRunLeavesTheDeviceUsable) {
  auto device = open();
  ASSERT_NE(device, nullptr);
  // Layer 2's output is twice the device: F(2) cannot allocate it.
  LayerNumbers small;
  small.outBytes = 1 << 20;
  LayerNumbers huge = small;
  huge.outBytes = 2 * device->info().totalBytes;
  const Chain chain = makeAbstractChain("too-big", 1 << 20, {small, huge, small});
  auto interp = Interpreter::create(chain, *device);
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  const std::uint64_t held = device->allocator().bytesHeld();
  auto run = (*interp)->run(Plan{});
  ASSERT_FALSE(run.isOk());
  EXPECT_EQ(run.status().code(), ErrorCode::OutOfMemory) << run.status().message();
  EXPECT_NE(run.status().message().find("F(2)"), std::string::npos) << run.status().message();
  EXPECT_EQ(device->allocator().bytesHeld(), held) << "the failed step left buffers behind";
  interp->reset();
  // The same device still runs a chain that fits.
  const Chain fits = makeAbstractChain("fits", 1 << 20, {small, small, small});
  auto again = runPlan(fits, Plan{{1}}, *device);
  ASSERT_TRUE(again.isOk()) << again.status().message();
  testing::expectMatchesSimulation(fits, Plan{{1}}, again->timelines[0]);
}

// The whole step (memory-model.md section 11) on the GPU under every optimizer, foreach and
// gradient mode: each plan's two-step run measures the model's footprint op by op, STEP included;
// the second step's gradients (made from the weights the first update left) equal the CPU's within
// 1e-4, so both backends updated alike; abstract layers' updates equal the CPU's bit for bit.
TEST_F(CudaDeviceTest, OptimizerStepsMatchTheModelAndTheCpu) {
  const Chain base = profiled(parse(kPrimitiveChain));
  const RunOptions options{.steps = 2, .captureGradients = true, .captureDigests = true};
  for (std::size_t mode = 0; mode < testing::kStepModeCount; ++mode) {
    Chain chain = base;
    chain.step = testing::stepMode(mode);
    SCOPED_TRACE(describeStepOptions(chain.step));
    auto device = open();
    ASSERT_NE(device, nullptr);
    for (const Plan& plan : {Plan{}, Plan{{3, 8}}}) {
      auto gpuRun = runPlan(chain, plan, *device, testing::seeded(7), options);
      ASSERT_TRUE(gpuRun.isOk()) << gpuRun.status().message();
      for (const Timeline& t : gpuRun->timelines) testing::expectMatchesSimulation(chain, plan, t);
      cpu::CpuDevice cpu;
      auto cpuRun = runPlan(testing::fittedTo(chain, cpu), plan, cpu, testing::seeded(7), options);
      ASSERT_TRUE(cpuRun.isOk()) << cpuRun.status().message();
      expectGradientsNearTheCpus(chain, *gpuRun, *cpuRun);
    }
    const Chain abstract = testing::withParameters(makeRandomChain({.layers = 7, .seed = 40 + mode}), 40 + mode, mode);
    cpu::CpuDevice cpu;
    auto cpuRun = runPlan(abstract, Plan{{2, 5}}, cpu, testing::seeded(3), options);
    ASSERT_TRUE(cpuRun.isOk()) << cpuRun.status().message();
    auto gpuRun = runPlan(abstract, Plan{{2, 5}}, *device, testing::seeded(3), options);
    ASSERT_TRUE(gpuRun.isOk()) << gpuRun.status().message();
    testing::expectMatchesSimulation(abstract, Plan{{2, 5}}, gpuRun->timelines.back());
    EXPECT_EQ(gpuRun->parameterGradients, cpuRun->parameterGradients);
  }
}

}  // namespace
}  // namespace remat::gpu
