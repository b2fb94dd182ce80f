// Host-only checks of the GPU backend's transformer and Swin kinds (issue 23): they run wherever the backend
// builds, with or without a GPU, because preparing these kinds touches no device. For the small
// GPT (untied and tied), a tiny BERT (token types, the embedding's LayerNorm, post-norm blocks, the
// tanh pooler), chains of ViT blocks and a Swin past its patch embedding (padded, shifted, one
// window in the batch, with stochastic depth), under both attention rules, without and with dropout,
// every layer's GPU preparation accepts the chain's numbers: the E the GPU kernels lay out is
// byte for byte the model's (LayerChecks::expectExtra), as are the parameter counts and the
// needs_input / needs_output flags. The fused rule's workspaces hold no S x S tensor at S = 1,024.
// A chain whose e is off by a byte is refused, naming the layer; half precisions are refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuda_device_impl.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"
#include "tiny_transformer_chains.hpp"

namespace remat::gpu {
namespace {

using nlohmann::json;

using tiny::block;
using tiny::chainJson;

Chain parsed(const json& j) { return tiny::parsed(j, "gpu_transformer_host_test.cpp"); }

Chain gpt(bool fused, double p, bool tied, std::int64_t seq = 40) {
  return parsed(chainJson("tiny-gpt", {2, seq}, tiny::gptLayers(fused, p, tied, seq)));
}

Chain bert(bool fused, double p) { return parsed(chainJson("tiny-bert", {2, 16}, tiny::bertLayers(fused, p))); }

// ViT's blocks and its head (the patch embedding's cuDNN conv needs a device).
Chain vitBody(bool fused, double p) {
  json layers = json::array();
  for (int i = 0; i < 2; ++i) layers.push_back(block("encoder_layer_" + std::to_string(i), false, fused, p));
  layers.push_back({{"name", "ln+heads"}, {"kind", "cls_head"}, {"out_features", 10}, {"epsilon", 1e-6}});
  return parsed(chainJson("vit-body", {2, 17, 32}, layers));
}

// Swin past its patch embedding (whose cuDNN conv needs a device): blocks (padded and shifted at
// 10x10, with stochastic depth), patch merging, more blocks (one window in the batch at batch 1),
// the head, on the [N, H, W, C] stream.
Chain swinBody(std::int64_t batch, std::int64_t side, double sd) {
  auto swinBlock = [](const std::string& name, std::int64_t heads, std::int64_t width, std::int64_t shift, double p) {
    return json{{"name", name}, {"kind", "swin_block"}, {"heads", heads},       {"hidden", 4 * width},
                {"window", 4},  {"shift", shift},       {"stochastic_depth", p}};
  };
  json layers = json::array();
  layers.push_back(swinBlock("features.1.0", 2, 32, 0, 0.0));
  layers.push_back(swinBlock("features.1.1", 2, 32, 2, sd));
  layers.push_back({{"name", "features.2"}, {"kind", "patch_merging"}});
  layers.push_back(swinBlock("features.3.0", 4, 64, 0, sd));
  layers.push_back(swinBlock("features.3.1", 4, 64, 2, sd));
  layers.push_back({{"name", "norm+avgpool+head"}, {"kind", "swin_head"}, {"out_features", 10}});
  return parsed(chainJson("swin-body", {batch, side, side, 32}, layers));
}

// Every layer prepared as CudaDevice::prepare does, without CUDA handles.
Result<std::vector<LayerState>> prepareAll(const Chain& chain) {
  std::vector<LayerState> layers;
  for (std::size_t l = 0; l <= chain.size(); ++l) REMAT_RETURN_IF_ERROR(prepareLayer(chain, l, {}, {}, layers));
  return layers;
}

TEST(GpuTransformerHost, EveryLayerSavesWhatTheModelSays) {
  for (bool fused : {false, true})
    for (double p : {0.0, 0.1}) {
      for (const Chain& chain : {gpt(fused, p, false), gpt(fused, p, true), bert(fused, p), vitBody(fused, p),
                                 swinBody(2, 10, p), swinBody(1, 8, p)}) {
        SCOPED_TRACE(chain.name + (fused ? " fused" : " math") + (p > 0 ? " dropout" : ""));
        auto layers = prepareAll(chain);
        ASSERT_TRUE(layers.isOk()) << layers.status().message();
        for (std::size_t l = 1; l <= chain.size(); ++l) {
          EXPECT_TRUE((*layers)[l].real) << "layer " << l;
          EXPECT_GT((*layers)[l].requiredFwdWorkspace, 0u) << "layer " << l;
        }
      }
    }
}

TEST(GpuTransformerHost, AnEOffByOneByteIsRefusedNamingTheLayer) {
  for (bool fused : {false, true}) {
    Chain chain = gpt(fused, 0.1, false);
    chain.layers[1].numbers.extraBytes += 1;
    auto layers = prepareAll(chain);
    ASSERT_FALSE(layers.isOk());
    EXPECT_NE(layers.status().message().find("layer 2 ('h.0', transformer_block)"), std::string::npos)
        << layers.status().message();
    EXPECT_NE(layers.status().message().find("extra bytes"), std::string::npos) << layers.status().message();
  }
}

// Pure bf16 is refused at the first layer, saying so, before anything is allocated (bf16-mixed:
// gpu_transformer_half_host_test.cpp).
TEST(GpuTransformerHost, HalfPrecisionsAreRefused) {
  for (Precision precision : {Precision::Bf16}) {
    auto chain = withPrecision(gpt(true, 0.0, false), precision);
    ASSERT_TRUE(chain.isOk()) << chain.status().message();
    auto layers = prepareAll(*chain);
    ASSERT_FALSE(layers.isOk()) << precisionName(precision);
    EXPECT_NE(layers.status().message().find("gpu: layer 1 ('wte+wpe', token_embedding)"), std::string::npos)
        << layers.status().message();
    const char* why = "float32 only";
    EXPECT_NE(layers.status().message().find(why), std::string::npos) << layers.status().message();
  }
}

// One [N, h, S, S] float tensor at S = 1,024 is 16 MiB: the fused rule's workspaces hold none,
// math's backward holds d(probabilities).
TEST(GpuTransformerHost, FusedWorkspacesHoldNoSequenceSquaredTensor) {
  const std::uint64_t probsBytes = 2ull * 2 * 1024 * 1024 * 4;
  for (bool fused : {true, false}) {
    auto layers = prepareAll(gpt(fused, 0.0, false, 1024));
    ASSERT_TRUE(layers.isOk()) << layers.status().message();
    const LayerState& b = (*layers)[2];
    if (fused) {  // (math's discard-mode forward holds E, the probabilities among them, in its workspace)
      EXPECT_LT(b.requiredFwdWorkspace, probsBytes);
      EXPECT_LT(b.requiredBwdWorkspace, probsBytes);
    } else {
      EXPECT_GT(b.requiredBwdWorkspace, probsBytes);
    }
  }
}

}  // namespace
}  // namespace remat::gpu
