// Host-only checks of bf16-mixed on the GPU backend (issue 24): they run wherever the backend
// builds, with or without a GPU, because checking a bf16-mixed chain's layout touches no device.
// For a ResNet-like chain (conv2d, batch norm, relu, the pools, flatten, dropout, linear), a small
// ResNet of basic blocks and bottlenecks, MobileNetV2's inverted residuals with relu6 and
// hardsigmoid, and layer norms on autocast's fp32 list, every layer runs in the dtype the model's
// cast policy gives it (autocastComputeDType) and what the GPU's bfloat16 layout saves (the
// input's cast copy, the weights' bfloat16 copies, the layer norm's float32 copy, the blocks'
// bfloat16 arenas and inner weight copies) is byte for byte the model's E. A chain one byte off
// is refused naming the layer; pure half precisions and the kinds without a bfloat16 layout are refused
// naming the layer; linears, the activations and dropout prepare in bfloat16 with their copies'
// workspaces, and a chain with a kind only laid out (not yet run) in bfloat16 is refused at its
// first layer, naming that kind's layer, after every layer's numbers were checked.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cuda_device_impl.hpp"
#include "cuda_half.hpp"
#include "elementwise_block_chains.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/zoo.hpp"

namespace remat::gpu {
namespace {

Chain mixed(const char* text, Precision precision = Precision::Bf16Mixed) {
  auto chain = parseChain(text, "gpu_half_host_test.cpp");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  if (!chain) return Chain{};
  auto stepped = withPrecision(*chain, precision);
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped ? std::move(stepped).value() : Chain{};
}

constexpr const char* kResnetLike = R"({
  "format": "remat-chain/1", "name": "resnet_like", "input": {"shape": [4, 3, 32, 32], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "conv1", "out_channels": 16, "kernel": 7, "stride": 2, "padding": 3, "bias": false},
    {"kind": "batchnorm", "name": "bn1"}, {"kind": "relu", "name": "relu1"},
    {"kind": "maxpool", "name": "pool", "kernel": 3, "stride": 2, "padding": 1},
    {"kind": "conv2d", "name": "conv2", "out_channels": 32, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
    {"kind": "batchnorm", "name": "bn2"}, {"kind": "relu", "name": "relu2"},
    {"kind": "conv2d", "name": "conv3", "out_channels": 32, "kernel": 3, "stride": 2, "padding": 1, "bias": true},
    {"kind": "batchnorm", "name": "bn3"}, {"kind": "relu", "name": "relu3"},
    {"kind": "avgpool", "name": "avg", "kernel": 2, "stride": 1},
    {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "dropout", "name": "drop", "p": 0.25}, {"kind": "linear", "name": "fc", "out_features": 10}]})";

constexpr const char* kResidual = R"({
  "format": "remat-chain/1", "name": "residual", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "conv1", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
    {"kind": "batchnorm", "name": "bn1"}, {"kind": "relu", "name": "relu"},
    {"kind": "maxpool", "name": "pool", "kernel": 3, "stride": 2, "padding": 1},
    {"kind": "basic_block", "name": "layer1.0", "out_channels": 8, "stride": 1},
    {"kind": "basic_block", "name": "layer2.0", "out_channels": 16, "stride": 2},
    {"kind": "bottleneck", "name": "layer3.0", "out_channels": 32, "width": 8, "stride": 2},
    {"kind": "bottleneck", "name": "layer3.1", "out_channels": 32, "width": 8, "stride": 1},
    {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "linear", "name": "fc", "out_features": 10}]})";

constexpr const char* kMobile = R"({
  "format": "remat-chain/1", "name": "mobile", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "stem", "out_channels": 8, "kernel": 3, "stride": 2, "padding": 1, "bias": false},
    {"kind": "batchnorm", "name": "bn"}, {"kind": "relu6", "name": "relu6"},
    {"kind": "inverted_residual", "name": "ir1", "out_channels": 8, "stride": 1, "expand_ratio": 2},
    {"kind": "inverted_residual", "name": "ir2", "out_channels": 16, "stride": 2, "expand_ratio": 2},
    {"kind": "hardsigmoid", "name": "hsig"}, {"kind": "adaptive_avgpool", "name": "gap"},
    {"kind": "flatten", "name": "flat"}, {"kind": "linear", "name": "fc", "out_features": 10}]})";

// The layer norms run in float32 from a cast copy of their bfloat16 input; the gelu after the
// first follows its float32 output, and the convolution after it casts back.
constexpr const char* kNorms = R"({
  "format": "remat-chain/1", "name": "norms", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "stem", "out_channels": 8, "kernel": 4, "stride": 4, "padding": 0, "bias": true},
    {"kind": "layernorm", "name": "ln1"}, {"kind": "gelu", "name": "gelu1"},
    {"kind": "conv2d", "name": "conv", "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
    {"kind": "gelu", "name": "gelu"}, {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "layernorm", "name": "ln2"}, {"kind": "linear", "name": "fc", "out_features": 10}]})";

// What the model says layer l's output is: a bfloat16 tensor (2 bytes an element) or float32.
bool modelSaysHalf(const Chain& chain, std::size_t l) {
  const ChainLayer& layer = chain.layers[l - 1];
  return layer.numbers.outBytes == elementCount(layer.outputShape) * 2;
}

TEST(GpuHalfHost, EveryLayerRunsInTheModelsDtypeAndSavesItsE) {
  for (const char* text : {kResnetLike, kResidual, kMobile, kNorms}) {
    const Chain chain = mixed(text);
    SCOPED_TRACE(chain.name);
    auto modes = checkHalfChain(chain);
    ASSERT_TRUE(modes.isOk()) << modes.status().message();
    ASSERT_EQ(modes->size(), chain.size() + 1);
    EXPECT_FALSE((*modes)[0].half);  // the data loader's float32 batch
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      const HalfMode& mode = (*modes)[l];
      EXPECT_EQ(mode.half, modelSaysHalf(chain, l)) << layerLabel(chain, l);
      EXPECT_EQ(mode.castsInput, mode.half && !(*modes)[l - 1].half) << layerLabel(chain, l);
      EXPECT_EQ(mode.castsFromHalf, !mode.half && (*modes)[l - 1].half) << layerLabel(chain, l);
    }
  }
}

TEST(GpuHalfHost, TheCastsAreWhereAutocastPutsThem) {
  const Chain chain = mixed(kNorms);
  auto modes = checkHalfChain(chain);
  ASSERT_TRUE(modes.isOk()) << modes.status().message();
  const auto& m = *modes;
  ASSERT_EQ(m.size(), 9u);
  EXPECT_TRUE(m[1].half && m[1].castsInput);       // stem: the float32 batch cast to bfloat16
  EXPECT_TRUE(!m[2].half && m[2].castsFromHalf);   // ln1: fp32 list, from a float32 copy
  EXPECT_TRUE(!m[3].half && !m[3].castsFromHalf);  // gelu1 follows its float32 input
  EXPECT_TRUE(m[4].half && m[4].castsInput);       // conv casts back
  EXPECT_TRUE(m[5].half && m[6].half);             // gelu, the pool follow bfloat16 (flatten is folded)
  EXPECT_TRUE(!m[7].half && m[7].castsFromHalf);   // ln2
  EXPECT_TRUE(m[8].half && m[8].castsInput);       // fc
  // conv1 of the ResNet-like chain: E = the input's bfloat16 cast + the weights' bfloat16 copy.
  const Chain resnet = mixed(kResnetLike);
  const ChainLayer& conv1 = resnet.layers[0];
  const AutocastCasts casts =
      autocastCastsOf(conv1, resnet.spec.layers[conv1.specIndex], HalfMode{.half = true, .castsInput = true});
  EXPECT_EQ(casts.inputCastBytes, 4u * 3 * 32 * 32 * 2);
  EXPECT_EQ(casts.weightCopyBytes, 16u * 3 * 7 * 7 * 2);
  EXPECT_EQ(conv1.numbers.extraBytes, casts.inputCastBytes + casts.weightCopyBytes);
}

// One byte more in E, of a plain layer or of a block, and the GPU's layout no longer matches.
TEST(GpuHalfHost, AnEOffByOneByteIsRefusedNamingTheLayer) {
  struct Case {
    const char* text;
    std::size_t layer;
    const char* label;
  };
  for (const Case& c :
       {Case{kResnetLike, 1, "layer 1 ('conv1', conv2d)"}, Case{kResnetLike, 14, "layer 14 ('fc', linear)"},
        Case{kResidual, 6, "layer 6 ('layer2.0', basic_block)"}, Case{kNorms, 2, "layer 2 ('ln1', layernorm)"}}) {
    Chain chain = mixed(c.text);
    ASSERT_LE(c.layer, chain.size()) << c.label;  // (flatten is folded into the layer before it)
    chain.layers[c.layer - 1].numbers.extraBytes += 1;
    auto modes = checkHalfChain(chain);
    ASSERT_FALSE(modes.isOk()) << c.label;
    EXPECT_NE(modes.status().message().find(std::string("gpu: ") + c.label), std::string::npos)
        << modes.status().message();
  }
}

// Every layer prepared as CudaDevice::prepare does, without CUDA handles.
Result<std::vector<LayerState>> prepareAll(const Chain& chain) {
  std::vector<LayerState> layers;
  for (std::size_t l = 0; l <= chain.size(); ++l) REMAT_RETURN_IF_ERROR(prepareLayer(chain, l, {}, {}, layers));
  return layers;
}

// ResNet's blocks, Squeeze-and-Excitation, pool branches and ShuffleNetV2's channel slices and
// shuffle run in bfloat16: nothing refuses those chains before their first convolution asks cuDNN
// for algorithms (no handle here). A block whose inner ops have no bfloat16 kernels yet (an inner
// dropout) is refused when the first layer is prepared, naming the block; one whose layout does not
// match is refused naming that layer.
constexpr const char* kSqueeze = R"({
  "format": "remat-chain/1", "name": "squeeze", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "stem", "out_channels": 8, "kernel": 3, "stride": 2, "padding": 1, "bias": false},
    {"kind": "batchnorm", "name": "bn"}, {"kind": "silu", "name": "silu"},
    {"name": "se1", "kind": "block", "ops": [
      {"name": "avgpool", "kind": "global_avgpool"}, {"name": "fc1", "kind": "conv2d", "out_channels": 2, "kernel": 1},
      {"name": "activation", "kind": "silu"}, {"name": "fc2", "kind": "conv2d", "out_channels": 8, "kernel": 1},
      {"name": "scale_activation", "kind": "sigmoid"}, {"name": "mul", "kind": "mul", "inputs": [5, 0]}]},
    {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "linear", "name": "fc", "out_features": 10}]})";

constexpr const char* kShuffle = R"({
  "format": "remat-chain/1", "name": "shuffle", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "stem", "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
    {"name": "stage", "kind": "block", "ops": [
      {"name": "slice", "kind": "slice", "begin": 0, "out_channels": 8, "inputs": [0]},
      {"name": "slice_1", "kind": "slice", "begin": 8, "out_channels": 8, "inputs": [0]},
      {"name": "conv", "kind": "conv2d", "out_channels": 8, "kernel": 1, "bias": false, "inputs": [2]},
      {"name": "concat", "kind": "concat", "inputs": [1, 3]},
      {"name": "channel_shuffle", "kind": "channel_shuffle", "groups": 2}]},
    {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "linear", "name": "fc", "out_features": 10}]})";

constexpr const char* kInnerDropout = R"({
  "format": "remat-chain/1", "name": "inner-dropout", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "stem", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
    {"name": "res", "kind": "block", "ops": [
      {"name": "conv", "kind": "conv2d", "out_channels": 8, "kernel": 3, "padding": 1, "bias": false},
      {"name": "drop", "kind": "dropout", "p": 0.1},
      {"name": "add", "kind": "add", "inputs": [2, 0]}]},
    {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "linear", "name": "fc", "out_features": 10}]})";

constexpr const char* kPoolBranch = R"({
  "format": "remat-chain/1", "name": "pool-branch", "input": {"shape": [2, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "stem", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "bias": false},
    {"name": "inception", "kind": "block", "ops": [
      {"name": "b1", "kind": "conv2d", "out_channels": 4, "kernel": 1, "inputs": [0]},
      {"name": "pool", "kind": "maxpool", "kernel": 3, "stride": 1, "padding": 1, "inputs": [0]},
      {"name": "cat", "kind": "concat", "inputs": [1, 2]}]},
    {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "linear", "name": "fc", "out_features": 10}]})";

TEST(GpuHalfHost, PreparingChecksEveryLayerThenRefusesWhatCannotRun) {
  auto layers = prepareAll(mixed(kResidual));
  ASSERT_FALSE(layers.isOk());  // conv1's algorithm query: no cuDNN handle on the host
  EXPECT_NE(layers.status().message().find("gpu: layer 1 ('conv1', conv2d)"), std::string::npos)
      << layers.status().message();
  EXPECT_EQ(layers.status().message().find("no bfloat16"), std::string::npos) << layers.status().message();
  layers = prepareAll(mixed(kSqueeze));
  ASSERT_FALSE(layers.isOk());
  EXPECT_NE(layers.status().message().find("no cuDNN handle"), std::string::npos) << layers.status().message();
  layers = prepareAll(mixed(kPoolBranch));
  ASSERT_FALSE(layers.isOk());
  EXPECT_NE(layers.status().message().find("no cuDNN handle"), std::string::npos) << layers.status().message();
  layers = prepareAll(mixed(kShuffle));
  ASSERT_FALSE(layers.isOk());
  EXPECT_NE(layers.status().message().find("no cuDNN handle"), std::string::npos) << layers.status().message();
  layers = prepareAll(mixed(kInnerDropout));  // an inner dropout runs in bfloat16 (kernels_half_arith.cu)
  ASSERT_FALSE(layers.isOk());
  EXPECT_NE(layers.status().message().find("no cuDNN handle"), std::string::npos) << layers.status().message();
  Chain broken = mixed(kResidual);
  broken.layers[7].numbers.extraBytes -= 2;
  layers = prepareAll(broken);
  ASSERT_FALSE(layers.isOk());
  EXPECT_NE(layers.status().message().find("layer 8 ('layer3.1', bottleneck)"), std::string::npos)
      << layers.status().message();
}

// Linears, the activations, dropout and layer norm run: each bfloat16 layer prepared with its
// copies' workspace (a discard-mode forward's input cast and weight copy; the backward's bfloat16
// weight gradient and, after a float32 layer, the bfloat16 d(input) before its cast).
TEST(GpuHalfHost, AMultilayerPerceptronPreparesInBfloat16) {
  const Chain chain = mixed(R"({
    "format": "remat-chain/1", "name": "mlp", "input": {"shape": [8, 192], "dtype": "float32"},
    "layers": [
      {"kind": "linear", "name": "fc1", "out_features": 96}, {"kind": "relu", "name": "relu1"},
      {"kind": "dropout", "name": "drop", "p": 0.2}, {"kind": "layernorm", "name": "ln"},
      {"kind": "linear", "name": "fc2", "out_features": 10, "bias": false}]})");
  auto modes = checkHalfChain(chain);
  ASSERT_TRUE(modes.isOk()) << modes.status().message();
  // ln (layer 4) runs float32 from a float32 copy of its bfloat16 input, kept in E after its
  // statistics (or made in a discard-mode forward's workspace); its float32 d(input) is made in
  // the backward's workspace and cast. fc2 reads ln's float32 output: it casts it.
  auto normed = prepareAll(chain);
  ASSERT_TRUE(normed.isOk()) << normed.status().message();
  const LayerState& ln = (*normed)[4];
  EXPECT_TRUE(ln.castsFromHalf && !ln.half);
  EXPECT_EQ(ln.requiredFwdWorkspace, 8u * 96 * 4);
  EXPECT_EQ(ln.requiredBwdWorkspace, 8u * 96 * 4);
  EXPECT_EQ(chain.layers[3].numbers.extraBytes, 2u * 8 * 4 + 8u * 96 * 4);  // [mean, rstd][the copy]
  const LayerState& cast = (*normed)[5];
  EXPECT_TRUE(cast.half && cast.castsInput);
  EXPECT_EQ(cast.requiredBwdWorkspace, 10u * 96 * 2 + 8u * 96 * 2);  // dW, then d(input) before its cast
  const Chain runnable = mixed(R"({
    "format": "remat-chain/1", "name": "mlp", "input": {"shape": [8, 192], "dtype": "float32"},
    "layers": [
      {"kind": "linear", "name": "fc1", "out_features": 96}, {"kind": "relu", "name": "relu1"},
      {"kind": "dropout", "name": "drop", "p": 0.2}, {"kind": "linear", "name": "fc2", "out_features": 10,
      "bias": false}]})");
  auto layers = prepareAll(runnable);
  ASSERT_TRUE(layers.isOk()) << layers.status().message();
  const LayerState& fc1 = (*layers)[1];
  EXPECT_TRUE(fc1.half && fc1.castsInput);
  EXPECT_EQ(fc1.requiredFwdWorkspace, 8u * 192 * 2 + 96u * 192 * 2);           // the cast input, the weight copy
  EXPECT_EQ(fc1.requiredBwdWorkspace, 96u * 192 * 2);                          // layer 1: no d(input)
  EXPECT_EQ(runnable.layers[0].numbers.extraBytes, fc1.requiredFwdWorkspace);  // keep mode: both in E
  EXPECT_TRUE((*layers)[2].half && !(*layers)[2].castsInput);
  EXPECT_TRUE((*layers)[3].half);
  const LayerState& fc2 = (*layers)[4];
  EXPECT_TRUE(fc2.half && !fc2.castsInput && !fc2.bias);
  EXPECT_EQ(fc2.requiredFwdWorkspace, 10u * 96 * 2);
  EXPECT_EQ(fc2.requiredBwdWorkspace, 10u * 96 * 2);
  EXPECT_EQ(runnable.layers[3].numbers.extraBytes, 10u * 96 * 2);
}

// A plain CNN runs in bfloat16 on the GPU: nothing refuses it before its first convolution asks
// cuDNN for algorithms (which needs a device: without a handle that query is what fails, naming the
// layer). The layers after the stem prepare on the host: batch norm (an own kernel) and the pools
// (bfloat16 cuDNN ops) with no workspace, the adaptive pool with its geometry, the linear from a bfloat16 input.
constexpr const char* kPlainCnn = R"({
  "format": "remat-chain/1", "name": "plain_cnn", "input": {"shape": [4, 3, 16, 16], "dtype": "float32"},
  "layers": [
    {"kind": "conv2d", "name": "conv1", "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "bias": true},
    {"kind": "batchnorm", "name": "bn1"}, {"kind": "relu", "name": "relu1"},
    {"kind": "maxpool", "name": "pool", "kernel": 2, "stride": 2},
    {"kind": "avgpool", "name": "avg", "kernel": 3, "stride": 1, "padding": 1},
    {"kind": "adaptive_avgpool", "name": "gap"}, {"kind": "flatten", "name": "flat"},
    {"kind": "dropout", "name": "drop", "p": 0.1}, {"kind": "linear", "name": "fc", "out_features": 10}]})";

TEST(GpuHalfHost, APlainCnnPreparesInBfloat16) {
  const Chain chain = mixed(kPlainCnn);
  auto whole = prepareAll(chain);
  ASSERT_FALSE(whole.isOk());  // conv1's algorithm query has no cuDNN handle here
  EXPECT_NE(whole.status().message().find("gpu: layer 1 ('conv1', conv2d)"), std::string::npos)
      << whole.status().message();
  EXPECT_EQ(whole.status().message().find("no bfloat16"), std::string::npos) << whole.status().message();
  // The stem as prepareLayer leaves it, then the rest prepared for real.
  std::vector<LayerState> layers;
  ASSERT_TRUE(prepareLayer(chain, 0, {}, {}, layers).isOk());
  LayerState stem;
  stem.kind = LayerKind::Conv2d;
  stem.real = stem.half = stem.castsInput = true;
  stem.outShape = chain.layers[0].outputShape;
  stem.outCount = static_cast<Index>(elementCount(stem.outShape));
  layers.push_back(std::move(stem));
  for (std::size_t l = 2; l <= chain.size(); ++l) {
    const Status prepared = prepareLayer(chain, l, {}, {}, layers);
    ASSERT_TRUE(prepared.isOk()) << layerLabel(chain, l) << ": " << prepared.message();
  }
  for (std::size_t l = 2; l <= chain.size(); ++l) {
    const LayerState& s = layers[l];
    EXPECT_TRUE(s.half && !s.castsInput) << s.label;
    if (l == chain.size()) break;  // fc: its weight copy and gradient, below
    EXPECT_EQ(s.requiredFwdWorkspace, 0u) << s.label;
    EXPECT_EQ(s.requiredBwdWorkspace, 0u) << s.label;
  }
  EXPECT_EQ(layers[2].halfNorm.n, 4);  // bn1: its own bfloat16 kernel over [4, 8, 16, 16]
  EXPECT_EQ(layers[2].halfNorm.c, 8);
  EXPECT_EQ(layers[2].halfNorm.h * layers[2].halfNorm.w, 256);
  EXPECT_FALSE(layers[2].dxInWorkspace);
  ASSERT_TRUE(layers[4].pool.has_value());
  EXPECT_EQ(layers[4].pool->outputDims(), (Dims4{4, 8, 8, 8}));
  ASSERT_TRUE(layers[5].pool.has_value());
  EXPECT_EQ(layers[5].pool->outputDims(), (Dims4{4, 8, 8, 8}));
  EXPECT_EQ(layers[6].adaptive.inHeight, 8);
  EXPECT_EQ(layers[6].adaptive.outHeight, 1);
  ASSERT_EQ(chain.size(), 8u);                             // flatten is folded into the pool
  EXPECT_EQ(layers[8].requiredFwdWorkspace, 10u * 8 * 2);  // fc: its weight copy (discard mode)
  EXPECT_EQ(layers[8].requiredBwdWorkspace, 10u * 8 * 2);  // and its bfloat16 weight gradient
  // E of the bfloat16 max pool holds its bfloat16 output's copy (8 bytes an output: int64 indices).
  EXPECT_GE(chain.layers[3].numbers.extraBytes, 4u * 8 * 8 * 8 * 2);
}

// A bfloat16 conv2d's workspaces: a discard-mode forward's input cast and weight copy, then cuDNN's
// scratch; the backward's half weight gradient (what the model adds to wb), the half d(input) when
// it casts (not at layer 1), then cuDNN's scratch; every region at a 256-byte boundary.
TEST(GpuHalfHost, AConvolutionsCopiesAndHalfGradientsComeBeforeCudnnsScratch) {
  const Chain resnet = mixed(kResnetLike);
  LayerState conv1;
  conv1.castsInput = true;
  conv1.inCount = 4 * 3 * 32 * 32;
  const std::uint64_t weights = 16u * 3 * 7 * 7;
  setHalfConvOffsets(conv1, weights, false);
  EXPECT_EQ(conv1.halfFwdScratchOffset, 29440u);  // 24,576 + 4,704 aligned up
  EXPECT_EQ(resnet.layers[0].numbers.extraBytes, 24576u + 4704u);
  EXPECT_EQ(conv1.halfBwdInputGradOffset, 4864u);  // 4,704 aligned up
  EXPECT_EQ(conv1.halfBwdScratchOffset, 4864u);    // layer 1: no d(input)
  EXPECT_GE(resnet.layers[0].numbers.bwdWorkspaceBytes, weights * 2);
  // The conv after a layer norm reads a float32 input: its d(input) is made in bfloat16, then cast.
  const Chain norms = mixed(kNorms);
  LayerState conv;
  conv.castsInput = true;
  conv.inCount = 2 * 8 * 4 * 4;
  setHalfConvOffsets(conv, 16u * 8 * 9, true);
  EXPECT_EQ(conv.halfBwdInputGradOffset, 2304u);
  EXPECT_EQ(conv.halfBwdScratchOffset, 2304u + 512u);
  EXPECT_EQ(conv.halfFwdScratchOffset, 2816u);  // 512 + 2,304
  EXPECT_EQ(norms.layers[3].numbers.extraBytes, 512u + 2304u);
  // Reading a bfloat16 input, nothing is cast.
  LayerState inner;
  inner.inCount = 1000;
  setHalfConvOffsets(inner, 100, true);
  EXPECT_EQ(inner.halfFwdScratchOffset, 256u);
  EXPECT_EQ(inner.halfBwdScratchOffset, 256u);
}

// The zoo's CNNs the device test runs: AlexNet's and VGG's (whose adaptive pool makes 7x7 of a
// smaller map), ResNet-18's, MobileNetV2's and V3's, EfficientNet-B0's, RegNetY's, Inception-v3's
// and ShuffleNetV2's layouts match the model and nothing refuses them before cuDNN is asked for
// algorithms. ConvNeXt's layout (float32 block inputs read through the first conv's cast, layer
// norms on bfloat16 data, layer_scale's float32 product, the float32 residual add) matches the
// model too, and nothing refuses it either.
TEST(GpuHalfHost, ZooCnnsLayOutInBfloat16OrAreRefusedByLayer) {
  for (const char* name : {"alexnet", "vgg11_bn", "resnet18", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
                           "regnet_y_400mf", "inception_v3", "shufflenet_v2_x1_0", "convnext_tiny"}) {
    SCOPED_TRACE(name);
    const std::string n(name);
    const std::int64_t resolution = n == "inception_v3" ? 75 : n == "alexnet" ? 63 : 32;  // the smallest
    auto spec = zooChain(name, {.batch = 2, .resolution = resolution, .numClasses = 10});
    ASSERT_TRUE(spec.isOk()) << spec.status().message();
    auto built = buildChain(*spec);
    ASSERT_TRUE(built.isOk()) << built.status().message();
    auto chain = withPrecision(*built, Precision::Bf16Mixed);
    ASSERT_TRUE(chain.isOk()) << chain.status().message();
    auto modes = checkHalfChain(*chain);
    auto layers = prepareAll(*chain);
    ASSERT_FALSE(layers.isOk());
    ASSERT_TRUE(modes.isOk()) << modes.status().message();
    EXPECT_NE(layers.status().message().find("no cuDNN handle"), std::string::npos) << layers.status().message();
  }
}

// ConvNeXt-Tiny's blocks under bf16-mixed, as the model lays them out (memory-model.md 11.7): a
// block reads a float32 x(l-1) (after the stem's layer norm, or the previous block; bfloat16 after
// a downsampling conv), its E then holds the first conv's bfloat16 cast of it before the inner
// weight copies, and its output is float32.
// The GPU's layout carries that dtype on: the next block casts again, the downsampling layer norm
// reads float32 without a copy. One byte off in a block's E is refused naming that block.
TEST(GpuHalfHost, ConvNextBlocksLayOutAsTheModelWithFloat32InputsAndOutputs) {
  auto spec = zooChain("convnext_tiny", {.batch = 2, .resolution = 32, .numClasses = 10});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto built = buildChain(*spec);
  ASSERT_TRUE(built.isOk()) << built.status().message();
  auto chain = withPrecision(*built, Precision::Bf16Mixed);
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  auto modes = checkHalfChain(*chain);
  ASSERT_TRUE(modes.isOk()) << modes.status().message();
  std::size_t blocks = 0, castBlocks = 0;
  for (std::size_t l = 1; l <= chain->size(); ++l) {
    const ChainLayer& layer = chain->layers[l - 1];
    const HalfMode& mode = (*modes)[l];
    SCOPED_TRACE(layer.name);
    if (layer.kind != LayerKind::Block) continue;
    ++blocks;
    // x(l-1) is float32 after the stem's layer norm and after a block, bfloat16 after a stage's
    // downsampling conv; a float32 one is read through the first conv's cast, saved instead of it.
    const bool floatInput = chain->layers[l - 2].kind != LayerKind::Conv2d;
    EXPECT_TRUE(mode.half);
    EXPECT_EQ(mode.castsInput, floatInput);
    EXPECT_EQ(layer.numbers.needsInput, !floatInput);
    castBlocks += floatInput ? 1 : 0;
    EXPECT_TRUE(mode.floatOutput);  // layer_scale's float32 product + x(l-1)
    EXPECT_FALSE(modelSaysHalf(*chain, l));
  }
  EXPECT_EQ(blocks, 18u);      // 3 + 3 + 9 + 3
  EXPECT_EQ(castBlocks, 15u);  // all but the first of stages 2 to 4
  for (std::size_t l = 1; l <= chain->size(); ++l) {
    if (chain->layers[l - 1].kind != LayerKind::Block) continue;
    Chain off = *chain;
    off.layers[l - 1].numbers.extraBytes += 1;
    auto refused = checkHalfChain(off);
    ASSERT_FALSE(refused.isOk());
    EXPECT_NE(refused.status().message().find("('" + off.layers[l - 1].name + "', block)"), std::string::npos)
        << refused.status().message();
    break;
  }
}

// Issue 22's blocks after a bfloat16 convolution: dropout, sub and div (reading both operands) and
// a broadcasting add, sub and div of a pooled mean lay out in bfloat16 as the model's, and nothing
// refuses them before cuDNN is asked for the stem's algorithms (their kernels: kernels_half_arith.cu).
TEST(GpuHalfHost, BlocksWithDropoutSubDivLayOutInBfloat16) {
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
  auto modes = checkHalfChain(*stepped);
  ASSERT_TRUE(modes.isOk()) << modes.status().message();
  for (std::size_t l = 2; l <= 7; ++l) {
    SCOPED_TRACE(stepped->layers[l - 1].name);
    EXPECT_TRUE((*modes)[l].outputHalf());
    EXPECT_FALSE((*modes)[l].castsInput);
    EXPECT_TRUE(modelSaysHalf(*stepped, l));
  }
  auto layersPrepared = prepareAll(*stepped);
  ASSERT_FALSE(layersPrepared.isOk());
  EXPECT_NE(layersPrepared.status().message().find("no cuDNN handle"), std::string::npos)
      << layersPrepared.status().message();
  Chain off = *stepped;  // the dropout's mask one byte short in the model
  off.layers[2].numbers.extraBytes -= 1;
  auto refused = checkHalfChain(off);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("layer 3 ('drop', block)"), std::string::npos)
      << refused.status().message();
}

// (fp16-mixed runs with bf16-mixed's layout: gpu_fp16_host_test.cpp.)
TEST(GpuHalfHost, PureHalfPrecisionsAreRefusedNamingTheLayer) {
  for (Precision precision : {Precision::Bf16, Precision::Fp16}) {
    auto layers = prepareAll(mixed(kResnetLike, precision));
    ASSERT_FALSE(layers.isOk()) << precisionName(precision);
    EXPECT_NE(layers.status().message().find("gpu: layer 1 ('conv1', conv2d)"), std::string::npos)
        << layers.status().message();
    EXPECT_NE(layers.status().message().find("float32 only"), std::string::npos) << layers.status().message();
  }
}

// Every kind has a bfloat16 layout on the GPU now (Swin's: gpu_swin_half_host_test.cpp), so no
// layer is refused by its kind; a Swin block reading the float32 batch (a chain starting inside a
// Swin) is refused for its input's dtype, naming the layer.
TEST(GpuHalfHost, NoKindIsRefusedByNameASwinBlockOnTheFloat32BatchIsByItsInput) {
  const Chain chain = mixed(R"({
    "format": "remat-chain/1", "name": "swin-body", "input": {"shape": [2, 8, 8, 32], "dtype": "float32"},
    "layers": [{"name": "features.1.0", "kind": "swin_block", "heads": 2, "hidden": 128, "window": 4, "shift": 0,
                "stochastic_depth": 0.0}]})");
  auto modes = checkHalfChain(chain);
  ASSERT_FALSE(modes.isOk());
  EXPECT_NE(modes.status().message().find("gpu: layer 1 ('features.1.0', swin_block)"), std::string::npos)
      << modes.status().message();
  EXPECT_EQ(modes.status().message().find("no bfloat16 layout"), std::string::npos) << modes.status().message();
  EXPECT_NE(modes.status().message().find("swin_block reads a float32 input"), std::string::npos)
      << modes.status().message();
}

}  // namespace
}  // namespace remat::gpu
