// Host-only checks of fp16-mixed on the GPU backend (issue 24): they run wherever the backend
// builds, with or without a GPU. fp16-mixed shares bf16-mixed's layout (float16 and bfloat16 are
// both two bytes an element; CUDA's autocast lists are the same for both dtypes), so for zoo CNNs
// (ResNet-18, MobileNetV2, EfficientNet-B0, ConvNeXt-Tiny) and tiny GPT, BERT and ViT chains the
// model's fp16-mixed numbers equal its bf16-mixed numbers layer by layer, every layer's mode
// (half, casts) is bf16-mixed's, the GPU's layout checks them byte for byte, and nothing refuses
// the chain before cuDNN is asked for algorithms (no handle here). What still cannot run is
// refused naming the layer and the precision: the Swin kinds (no half layout), a transformer kind
// reading a float16 input, pure fp16 and pure bf16 ("float32 only").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuda_device_impl.hpp"
#include "cuda_half.hpp"
#include "cuda_transformer_half_layout.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/zoo.hpp"
#include "tiny_transformer_chains.hpp"

namespace remat::gpu {
namespace {

Chain withMixed(const Chain& chain, Precision precision) {
  auto stepped = withPrecision(chain, precision);
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped ? std::move(stepped).value() : Chain{};
}

Chain zoo(const char* name) {
  const std::string n(name);
  auto spec = zooChain(name, {.batch = 2, .resolution = 32, .numClasses = 10});
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  if (!spec) return Chain{};
  auto built = buildChain(*spec);
  EXPECT_TRUE(built.isOk()) << built.status().message();
  return built ? std::move(built).value() : Chain{};
}

std::vector<Chain> float32Chains() {
  std::vector<Chain> chains;
  for (const char* name : {"resnet18", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"}) chains.push_back(zoo(name));
  const char* where = "gpu_fp16_host_test.cpp";
  chains.push_back(tiny::parsed(tiny::chainJson("tiny-gpt", {2, 40}, tiny::gptLayers(false, 0.1, true)), where));
  chains.push_back(tiny::parsed(tiny::chainJson("tiny-bert", {2, 16}, tiny::bertLayers(true, 0.0)), where));
  chains.push_back(tiny::parsed(tiny::chainJson("tiny-vit", {2, 3, 16, 16}, tiny::vitLayers(false, 0.1)), where));
  return chains;
}

// Every layer prepared as CudaDevice::prepare does, without CUDA handles.
Result<std::vector<LayerState>> prepareAll(const Chain& chain) {
  std::vector<LayerState> layers;
  for (std::size_t l = 0; l <= chain.size(); ++l) REMAT_RETURN_IF_ERROR(prepareLayer(chain, l, {}, {}, layers));
  return layers;
}

TEST(GpuFp16Host, TheHalfTypeFollowsThePrecision) {
  EXPECT_EQ(halfTypeOf(Precision::Fp16Mixed), HalfType::Float16);
  EXPECT_EQ(halfTypeOf(Precision::Bf16Mixed), HalfType::BFloat16);
  EXPECT_STREQ(halfTypeName(HalfType::Float16), "float16");
  EXPECT_STREQ(halfTypeName(HalfType::BFloat16), "bfloat16");
}

// The model predicts fp16-mixed with bf16-mixed's bytes; the GPU lays both out alike, so the
// layout check passes for fp16-mixed exactly where it does for bf16-mixed, with the same modes.
TEST(GpuFp16Host, Fp16MixedLaysOutAsTheModelWithBf16MixedsModes) {
  for (const Chain& plain : float32Chains()) {
    SCOPED_TRACE(plain.name);
    const Chain fp16 = withMixed(plain, Precision::Fp16Mixed);
    const Chain bf16 = withMixed(plain, Precision::Bf16Mixed);
    ASSERT_EQ(fp16.size(), bf16.size());
    for (std::size_t l = 1; l <= fp16.size(); ++l) {
      const LayerNumbers& f = fp16.at(l);
      const LayerNumbers& b = bf16.at(l);
      EXPECT_EQ(f.outBytes, b.outBytes) << layerLabel(fp16, l);
      EXPECT_EQ(f.extraBytes, b.extraBytes) << layerLabel(fp16, l);
      EXPECT_EQ(f.paramBytes, b.paramBytes) << layerLabel(fp16, l);
      EXPECT_EQ(f.fwdWorkspaceBytes, b.fwdWorkspaceBytes) << layerLabel(fp16, l);
      EXPECT_EQ(f.bwdWorkspaceBytes, b.bwdWorkspaceBytes) << layerLabel(fp16, l);
    }
    auto fp16Modes = checkHalfChain(fp16);
    auto bf16Modes = checkHalfChain(bf16);
    ASSERT_TRUE(fp16Modes.isOk()) << fp16Modes.status().message();
    ASSERT_TRUE(bf16Modes.isOk()) << bf16Modes.status().message();
    ASSERT_EQ(fp16Modes->size(), bf16Modes->size());
    for (std::size_t l = 1; l < fp16Modes->size(); ++l) {
      const HalfMode& f = (*fp16Modes)[l];
      const HalfMode& b = (*bf16Modes)[l];
      EXPECT_EQ(f.half, b.half) << layerLabel(fp16, l);
      EXPECT_EQ(f.castsInput, b.castsInput) << layerLabel(fp16, l);
      EXPECT_EQ(f.castsFromHalf, b.castsFromHalf) << layerLabel(fp16, l);
      EXPECT_EQ(f.floatOutput, b.floatOutput) << layerLabel(fp16, l);
    }
    // The layout checked is autocast's, not float32's: some layer's E differs from float32's.
    bool halfE = false;
    for (std::size_t l = 1; l <= fp16.size(); ++l) halfE = halfE || fp16.at(l).extraBytes != plain.at(l).extraBytes;
    EXPECT_TRUE(halfE);
  }
}

// Nothing refuses an fp16-mixed chain that runs under bf16-mixed: preparing stops only where the
// first convolution asks cuDNN for algorithms (no handle here), or, for the transformer chains
// (cuBLAS at run time), prepares every layer.
TEST(GpuFp16Host, Fp16MixedChainsPrepareWhereBf16MixedOnesDo) {
  for (const Chain& plain : float32Chains()) {
    SCOPED_TRACE(plain.name);
    auto fp16 = prepareAll(withMixed(plain, Precision::Fp16Mixed));
    auto bf16 = prepareAll(withMixed(plain, Precision::Bf16Mixed));
    ASSERT_EQ(fp16.isOk(), bf16.isOk());
    if (!fp16) {
      EXPECT_EQ(fp16.status().message(), bf16.status().message());
      EXPECT_NE(fp16.status().message().find("no cuDNN handle"), std::string::npos) << fp16.status().message();
      continue;
    }
    ASSERT_EQ(fp16->size(), bf16->size());
    for (std::size_t l = 1; l < fp16->size(); ++l) {
      EXPECT_EQ((*fp16)[l].requiredFwdWorkspace, (*bf16)[l].requiredFwdWorkspace) << (*fp16)[l].label;
      EXPECT_EQ((*fp16)[l].requiredBwdWorkspace, (*bf16)[l].requiredBwdWorkspace) << (*fp16)[l].label;
    }
  }
}

// One byte off in a layer's E is refused under fp16-mixed as under bf16-mixed, naming the layer.
TEST(GpuFp16Host, AnEOffByOneByteIsRefusedNamingTheLayer) {
  Chain chain = withMixed(zoo("resnet18"), Precision::Fp16Mixed);
  const std::size_t l = 5;  // layer1.0, a basic block
  chain.layers[l - 1].numbers.extraBytes += 1;
  auto modes = checkHalfChain(chain);
  ASSERT_FALSE(modes.isOk());
  EXPECT_NE(modes.status().message().find("gpu: " + layerLabel(chain, l)), std::string::npos)
      << modes.status().message();
}

// The transformer kinds read the float32 residual stream under fp16-mixed too: a float16 input is
// refused naming the layer, the precision and the dtype.
TEST(GpuFp16Host, ATransformerKindReadingAFloat16InputIsRefused) {
  const Chain chain = withMixed(
      tiny::parsed(tiny::chainJson("tiny-vit", {2, 3, 16, 16}, tiny::vitLayers(true, 0.0)), "gpu_fp16_host_test.cpp"),
      Precision::Fp16Mixed);
  for (std::size_t l = 2; l <= chain.size(); ++l) {
    const LayerChecks check{"gpu", layerLabel(chain, l), true};
    EXPECT_TRUE(checkHalfTransformerLayer(chain, l, false, check).isOk()) << "layer " << l;
    const Status status = checkHalfTransformerLayer(chain, l, true, check);
    ASSERT_FALSE(status.isOk()) << "layer " << l;
    EXPECT_NE(status.message().find("gpu: " + layerLabel(chain, l) + ": precision fp16-mixed"), std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("reads a float16 input"), std::string::npos) << status.message();
  }
}

TEST(GpuFp16Host, SwinIsRefusedNamingTheLayerAndThePrecision) {
  auto plain = parseChain(R"({
    "format": "remat-chain/1", "name": "swin-body", "input": {"shape": [2, 8, 8, 32], "dtype": "float32"},
    "layers": [{"name": "features.1.0", "kind": "swin_block", "heads": 2, "hidden": 128, "window": 4, "shift": 0,
                "stochastic_depth": 0.0}]})",
                          "gpu_fp16_host_test.cpp");
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  auto modes = checkHalfChain(withMixed(*plain, Precision::Fp16Mixed));
  ASSERT_FALSE(modes.isOk());
  const std::string& message = modes.status().message();
  EXPECT_NE(message.find("gpu: layer 1 ('features.1.0', swin_block): precision fp16-mixed"), std::string::npos)
      << message;
  EXPECT_NE(message.find("the swin_block kind"), std::string::npos) << message;
}

TEST(GpuFp16Host, PureHalfPrecisionsStayRefused) {
  for (Precision precision : {Precision::Fp16, Precision::Bf16}) {
    auto layers = prepareAll(withMixed(zoo("resnet18"), precision));
    ASSERT_FALSE(layers.isOk()) << precisionName(precision);
    EXPECT_NE(layers.status().message().find("gpu: layer 1 ("), std::string::npos) << layers.status().message();
    EXPECT_NE(layers.status().message().find("float32 only"), std::string::npos) << layers.status().message();
  }
}

}  // namespace
}  // namespace remat::gpu
