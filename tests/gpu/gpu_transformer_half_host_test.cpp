// Host-only checks of GPT's, BERT's and ViT's kinds under bf16-mixed on the GPU backend (issue 24):
// they run wherever the backend builds, with or without a GPU, because checking a chain's bfloat16
// layout touches no device. For the small GPT (untied and tied), a tiny BERT (post-norm blocks, the
// tanh pooler) and a tiny ViT (patch embedding, pre-norm blocks, the head), under both attention
// rules, without and with dropout, the GPU's bfloat16 layout of every layer
// (cuda_transformer_half_layout.cpp: float32 residual stream and statistics, the linears' bfloat16
// casts and weight copies, bfloat16 attention and GELU tensors) is byte for byte the model's E
// (transformer_mixed.cpp), as are its parameters and needs_input / needs_output; each layer's
// dtype is the CPU's (cls_head's logits bfloat16, the rest float32). An E one byte off or a missing
// needs_input is refused naming the layer; a transformer kind reading a bfloat16 input is refused.
// transformer_block, lm_head, cls_head and patch_embedding have bfloat16 runners
// (cuda_transformer_half.cpp, cuda_heads_half.cpp, cuda_patch_half.cpp), token_embedding its float32
// one (float32 throughout under autocast): chains of blocks, the small GPT, the tiny BERT and the
// tiny ViT prepare, each layer on its bfloat16 runner.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cuda_device_impl.hpp"
#include "cuda_half.hpp"
#include "cuda_heads_half.hpp"
#include "cuda_transformer_half.hpp"
#include "cuda_transformer_half_layout.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"
#include "tiny_transformer_chains.hpp"

namespace remat::gpu {
namespace {

using nlohmann::json;

using tiny::block;

Chain mixed(const std::string& name, std::vector<std::int64_t> shape, const json& layers) {
  return tiny::mixed(tiny::chainJson(name, shape, layers), "gpu_transformer_half_host_test.cpp");
}

Chain gpt(bool fused, double p, bool tied, std::int64_t seq = 40) {
  return mixed("tiny-gpt", {2, seq}, tiny::gptLayers(fused, p, tied, seq));
}

Chain bert(bool fused, double p) { return mixed("tiny-bert", {2, 16}, tiny::bertLayers(fused, p)); }

Chain vit(bool fused, double p) { return mixed("tiny-vit", {2, 3, 16, 16}, tiny::vitLayers(fused, p)); }

std::vector<Chain> everyChain() {
  std::vector<Chain> chains;
  for (bool fused : {false, true})
    for (double p : {0.0, 0.1}) {
      chains.push_back(gpt(fused, p, false));
      chains.push_back(gpt(fused, p, true));
      chains.push_back(bert(fused, p));
      chains.push_back(vit(fused, p));
      chains.back().name += std::string(fused ? " fused" : " math") + (p > 0 ? " dropout" : "");
    }
  return chains;
}

// Every layer prepared as CudaDevice::prepare does, without CUDA handles.
Result<std::vector<LayerState>> prepareAll(const Chain& chain) {
  std::vector<LayerState> layers;
  for (std::size_t l = 0; l <= chain.size(); ++l) REMAT_RETURN_IF_ERROR(prepareLayer(chain, l, {}, {}, layers));
  return layers;
}

TEST(GpuTransformerHalfHost, EveryLayerSavesTheModelsEInTheCpusDtypes) {
  for (const Chain& chain : everyChain()) {
    SCOPED_TRACE(chain.name);
    auto modes = checkHalfChain(chain);
    ASSERT_TRUE(modes.isOk()) << modes.status().message();
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      const bool logits = chain.layers[l - 1].kind == LayerKind::ClsHead;
      EXPECT_EQ((*modes)[l].half, logits) << "layer " << l;  // the float32 residual stream between layers
      EXPECT_FALSE((*modes)[l].castsInput) << "layer " << l;
      EXPECT_EQ(chain.layers[l - 1].numbers.outBytes, elementCount(chain.layers[l - 1].outputShape) * (logits ? 2 : 4));
    }
  }
}

// The model's E differs from float32's for every kind but token_embedding (float32 throughout):
// the check is against the bfloat16 numbers, not float32's.
TEST(GpuTransformerHalfHost, TheLayoutIsAutocastsNotFloat32s) {
  auto plain =
      parseChain(R"({"format": "remat-chain/1", "name": "b", "input": {"shape": [2, 17, 32], "dtype": "float32"},
    "layers": [{"name": "b0", "kind": "transformer_block", "heads": 2, "hidden": 128, "causal": false, "p": 0.0,
                "fused_attention": false, "epsilon": 1e-6, "pre_norm": true}]})",
                 "gpu_transformer_half_host_test.cpp");
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  auto half = withPrecision(*plain, Precision::Bf16Mixed);
  ASSERT_TRUE(half.isOk()) << half.status().message();
  const LayerSpec& spec = half->spec.layers[half->layers[0].specIndex];
  const HalfBlockLayout t = halfBlockLayout(half->layers[0].inputShape, spec);
  EXPECT_EQ(t.savedBytes, half->layers[0].numbers.extraBytes);
  EXPECT_NE(t.savedBytes, plain->layers[0].numbers.extraBytes);
  // [N, h, S, S] bfloat16 probabilities last; the q, k, v copies before them
  const std::uint64_t scores = 2ull * 2 * 17 * 17;
  EXPECT_EQ(t.probs + scores * 2, t.savedBytes);
  EXPECT_EQ(t.k - t.q, 2ull * 17 * 32 * 2);
  EXPECT_EQ(t.stats1, 0u);
  EXPECT_EQ(t.h1, 2 * 2 * (2ull * 17) * 4);  // both norms' mean and rstd, float32
}

TEST(GpuTransformerHalfHost, AnEOffByOneByteIsRefusedNamingTheLayer) {
  for (const Chain& base : everyChain())
    for (std::size_t l = 1; l <= base.size(); ++l) {
      Chain chain = base;
      chain.layers[l - 1].numbers.extraBytes += 1;
      auto modes = checkHalfChain(chain);
      ASSERT_FALSE(modes.isOk()) << base.name << " layer " << l;
      EXPECT_NE(modes.status().message().find(layerLabel(chain, l)), std::string::npos) << modes.status().message();
      EXPECT_NE(modes.status().message().find("extra bytes"), std::string::npos) << modes.status().message();
    }
}

// Pre-norm blocks and the heads with a norm keep x(l-1) (the norm's backward reads it): a chain
// saying needs_input = false for one is refused naming the layer.
TEST(GpuTransformerHalfHost, AMissingNeedsInputIsRefusedNamingTheLayer) {
  int refused = 0;
  for (const Chain& base : {gpt(true, 0.0, false), gpt(false, 0.1, true), vit(true, 0.1)})
    for (std::size_t l = 1; l <= base.size(); ++l) {
      if (!base.layers[l - 1].numbers.needsInput) continue;
      Chain chain = base;
      chain.layers[l - 1].numbers.needsInput = false;
      auto modes = checkHalfChain(chain);
      ASSERT_FALSE(modes.isOk()) << base.name << " layer " << l;
      EXPECT_NE(modes.status().message().find(layerLabel(chain, l)), std::string::npos) << modes.status().message();
      EXPECT_NE(modes.status().message().find("needs_input = false"), std::string::npos) << modes.status().message();
      ++refused;
    }
  EXPECT_EQ(refused, 4 + 4 + 3);  // embedding, two pre-norm blocks, ln_f; ViT: blocks and the head's norm
}

// The layout (as the model's) reads the float32 residual stream: a transformer kind whose input
// is bfloat16 is refused naming its layer.
TEST(GpuTransformerHalfHost, ABfloat16InputIsRefused) {
  const Chain chain = vit(true, 0.0);
  for (std::size_t l = 2; l <= chain.size(); ++l) {
    const LayerChecks check{"gpu", layerLabel(chain, l), true};
    EXPECT_TRUE(checkHalfTransformerLayer(chain, l, false, check).isOk()) << "layer " << l;
    const Status status = checkHalfTransformerLayer(chain, l, true, check);
    ASSERT_FALSE(status.isOk()) << "layer " << l;
    EXPECT_NE(status.message().find("gpu: " + layerLabel(chain, l)), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("reads a bfloat16 input"), std::string::npos) << status.message();
  }
}

// The tiny ViT runs whole: patch_embedding (conv_proj as a bfloat16 GEMM over the patches), the
// blocks, cls_head; x(1) float32, the logits bfloat16.
TEST(GpuTransformerHalfHost, TheTinyVitPreparesInBfloat16) {
  for (bool fused : {false, true}) {
    const Chain chain = vit(fused, 0.1);
    auto layers = prepareAll(chain);
    ASSERT_TRUE(layers.isOk()) << layers.status().message();
    const LayerState& patch = (*layers)[1];
    EXPECT_TRUE(patch.halfPatch != nullptr && patch.vit == nullptr && !patch.half);
    EXPECT_GT(patch.requiredFwdWorkspace, chain.layers[0].numbers.extraBytes);  // discard mode holds E
    EXPECT_GT(patch.requiredBwdWorkspace, 0u);
    EXPECT_TRUE((*layers)[chain.size()].halfClsHead != nullptr);
  }
}

// The tiny BERT runs whole: its embedding (and LayerNorm) on the float32 runner, the post-norm
// blocks, the pooler on cls_head's bfloat16 runner, whose x(l) is bfloat16 (half logits).
TEST(GpuTransformerHalfHost, TheTinyBertPreparesInBfloat16) {
  for (bool fused : {false, true}) {
    const Chain chain = bert(fused, 0.1);
    auto layers = prepareAll(chain);
    ASSERT_TRUE(layers.isOk()) << layers.status().message();
    const LayerState& pooler = (*layers)[chain.size()];
    EXPECT_TRUE(pooler.halfClsHead != nullptr && pooler.vit == nullptr);
    EXPECT_TRUE(pooler.half) << "bfloat16 logits";
    EXPECT_GT(pooler.requiredBwdWorkspace, 0u);
  }
}

// The small GPT runs whole: token_embedding on its float32 runner (float32 throughout under
// autocast), the blocks and lm_head (untied and tied) on their bfloat16 runners.
TEST(GpuTransformerHalfHost, TheSmallGptPreparesInBfloat16) {
  for (bool fused : {false, true})
    for (bool tied : {false, true}) {
      const Chain chain = gpt(fused, 0.1, tied);
      auto layers = prepareAll(chain);
      ASSERT_TRUE(layers.isOk()) << layers.status().message();
      EXPECT_TRUE((*layers)[1].ends != nullptr && !(*layers)[1].half) << "the embedding's float32 runner";
      for (std::size_t l = 2; l < chain.size(); ++l) EXPECT_TRUE((*layers)[l].halfBlock != nullptr) << "layer " << l;
      const LayerState& head = (*layers)[chain.size()];
      EXPECT_TRUE(head.halfLmHead != nullptr && head.ends == nullptr);
      EXPECT_GT(head.requiredFwdWorkspace, chain.layers.back().numbers.extraBytes);  // discard mode holds E
      EXPECT_GT(head.requiredBwdWorkspace, 0u);
    }
}

// Blocks alone (ViT's encoder, BERT's post-norm layers) have bfloat16 runners: every layer prepares
// in bfloat16 (its halfBlock state, not float32's), with workspaces; the fused rule's hold no S x S
// tensor at S = 1,024, math's backward holds d(scores).
TEST(GpuTransformerHalfHost, BlocksPrepareInBfloat16) {
  for (bool fused : {false, true})
    for (bool preNorm : {true, false}) {
      json layers = json::array();
      for (int i = 0; i < 2; ++i) layers.push_back(block("b" + std::to_string(i), false, fused, 0.1, preNorm));
      const Chain chain = mixed("blocks", {2, 17, 32}, layers);
      auto prepared = prepareAll(chain);
      ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
      for (std::size_t l = 1; l <= chain.size(); ++l) {
        const LayerState& s = (*prepared)[l];
        EXPECT_TRUE(s.halfBlock != nullptr && s.transformer == nullptr) << "layer " << l;
        EXPECT_FALSE(s.half) << "x(l) stays float32";
        EXPECT_GT(s.requiredFwdWorkspace, chain.layers[l - 1].numbers.extraBytes) << "discard mode holds E";
        EXPECT_GT(s.requiredBwdWorkspace, 0u);
      }
    }
  const std::uint64_t probsBytes = 2ull * 2 * 1024 * 1024 * 2;
  for (bool fused : {true, false}) {
    json layers = json::array({block("b0", true, fused, 0.0)});
    auto prepared = prepareAll(mixed("long", {2, 1024, 32}, layers));
    ASSERT_TRUE(prepared.isOk()) << prepared.status().message();
    const LayerState& s = (*prepared)[1];
    if (fused) {
      EXPECT_LT(s.requiredFwdWorkspace, probsBytes);
      EXPECT_LT(s.requiredBwdWorkspace, probsBytes);
    } else {
      EXPECT_GT(s.requiredBwdWorkspace, probsBytes);
    }
  }
}

// The fused rule's E holds no S x S tensor: at S = 1,024 one bfloat16 [N, h, S, S] is 8 MiB.
TEST(GpuTransformerHalfHost, FusedEHoldsNoSequenceSquaredTensor) {
  const std::uint64_t probsBytes = 2ull * 2 * 1024 * 1024 * 2;
  for (bool fused : {true, false}) {
    const Chain chain = gpt(fused, 0.0, false, 1024);
    ASSERT_TRUE(checkHalfChain(chain).isOk());
    const std::uint64_t e = chain.layers[1].numbers.extraBytes;
    if (fused)
      EXPECT_LT(e, probsBytes);
    else
      EXPECT_GT(e, probsBytes);
  }
}

}  // namespace
}  // namespace remat::gpu
