// Host-only checks of bf16-mixed on the GPU backend (issue 24): they run wherever the backend
// builds, with or without a GPU, because checking a bf16-mixed chain's layout touches no device.
// For a ResNet-like chain (conv2d, batch norm, relu, the pools, flatten, dropout, linear), a small
// ResNet of basic blocks and bottlenecks, MobileNetV2's inverted residuals with relu6 and
// hardsigmoid, and layer norms on autocast's fp32 list, every layer runs in the dtype the model's
// cast policy gives it (autocastComputeDType) and what the GPU's bfloat16 layout saves (the
// input's cast copy, the weights' bfloat16 copies, the layer norm's float32 copy, the blocks'
// bfloat16 arenas and inner weight copies) is byte for byte the model's E. A chain one byte off
// is refused naming the layer; fp16-mixed and the kinds without a bfloat16 layout are refused
// naming the layer; linears, the activations and dropout prepare in bfloat16 with their copies'
// workspaces, and a chain with a kind only laid out (not yet run) in bfloat16 is refused at its
// first layer, naming that kind's layer, after every layer's numbers were checked.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cuda_device_impl.hpp"
#include "cuda_half.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"

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

// A chain with a layer whose bfloat16 kernels are not written yet (conv2d here) is refused at its
// first layer naming that layer; one whose layout does not match is refused naming the layer that
// does not match, before that.
TEST(GpuHalfHost, PreparingChecksEveryLayerThenRefusesWhatCannotRun) {
  auto layers = prepareAll(mixed(kResidual));
  ASSERT_FALSE(layers.isOk());
  EXPECT_NE(layers.status().message().find("gpu: layer 1 ('conv1', conv2d): precision bf16-mixed"), std::string::npos)
      << layers.status().message();
  EXPECT_NE(layers.status().message().find("layer 1 ('conv1', conv2d) has no bfloat16 kernels"), std::string::npos)
      << layers.status().message();
  Chain broken = mixed(kResidual);
  broken.layers[7].numbers.extraBytes -= 2;
  layers = prepareAll(broken);
  ASSERT_FALSE(layers.isOk());
  EXPECT_NE(layers.status().message().find("layer 8 ('layer3.1', bottleneck)"), std::string::npos)
      << layers.status().message();
}

// Linears, the activations and dropout run: each bfloat16 layer prepared with its copies' workspace
// (a discard-mode forward's input cast and weight copy; the backward's bfloat16 weight gradient and,
// after a float32 layer, the bfloat16 d(input) before its cast).
TEST(GpuHalfHost, AMultilayerPerceptronPreparesInBfloat16) {
  const Chain chain = mixed(R"({
    "format": "remat-chain/1", "name": "mlp", "input": {"shape": [8, 192], "dtype": "float32"},
    "layers": [
      {"kind": "linear", "name": "fc1", "out_features": 96}, {"kind": "relu", "name": "relu1"},
      {"kind": "dropout", "name": "drop", "p": 0.2}, {"kind": "layernorm", "name": "ln"},
      {"kind": "linear", "name": "fc2", "out_features": 10, "bias": false}]})");
  auto modes = checkHalfChain(chain);
  ASSERT_TRUE(modes.isOk()) << modes.status().message();
  // ln (layer 4) runs float32 from a cast copy, which has no GPU kernel yet: refused naming it.
  auto refused = prepareAll(chain);
  ASSERT_FALSE(refused.isOk());
  EXPECT_NE(refused.status().message().find("layer 4 ('ln', layernorm) has no bfloat16 kernels"), std::string::npos)
      << refused.status().message();
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

TEST(GpuHalfHost, Fp16AndPureHalfPrecisionsAreRefusedNamingTheLayer) {
  auto fp16 = checkHalfChain(mixed(kResnetLike, Precision::Fp16Mixed));
  ASSERT_FALSE(fp16.isOk());
  EXPECT_NE(fp16.status().message().find("gpu: layer 1 ('conv1', conv2d): precision fp16-mixed"), std::string::npos)
      << fp16.status().message();
  for (Precision precision : {Precision::Bf16, Precision::Fp16}) {
    auto layers = prepareAll(mixed(kResnetLike, precision));
    ASSERT_FALSE(layers.isOk()) << precisionName(precision);
    EXPECT_NE(layers.status().message().find("gpu: layer 1 ('conv1', conv2d)"), std::string::npos)
        << layers.status().message();
    EXPECT_NE(layers.status().message().find("float32 only"), std::string::npos) << layers.status().message();
  }
}

// The Swin kinds have no bfloat16 layout on the GPU: refused by kind, naming the layer (GPT's,
// BERT's and ViT's kinds have one: gpu_transformer_half_host_test.cpp).
TEST(GpuHalfHost, KindsWithoutABfloat16LayoutAreRefusedByName) {
  const Chain chain = mixed(R"({
    "format": "remat-chain/1", "name": "swin-body", "input": {"shape": [2, 8, 8, 32], "dtype": "float32"},
    "layers": [{"name": "features.1.0", "kind": "swin_block", "heads": 2, "hidden": 128, "window": 4, "shift": 0,
                "stochastic_depth": 0.0}]})");
  auto modes = checkHalfChain(chain);
  ASSERT_FALSE(modes.isOk());
  EXPECT_NE(modes.status().message().find("gpu: layer 1 ('features.1.0', swin_block)"), std::string::npos)
      << modes.status().message();
  EXPECT_NE(modes.status().message().find("the swin_block kind"), std::string::npos) << modes.status().message();
}

}  // namespace
}  // namespace remat::gpu
