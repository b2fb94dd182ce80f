#pragma once
// Shared by the GPU transformer tests (tests/gpu/*transformer*_test.cpp): the tiny GPT, BERT and ViT
// chains and chains of bare blocks, as chain JSON, parsed as float32 or stepped to bf16-mixed.
// Every test builds the same layers; each keeps its own chain names and input shapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"

namespace remat::gpu::tiny {

using nlohmann::json;

inline json block(const std::string& name, bool causal, bool fused, double p, bool preNorm = true) {
  return {{"name", name}, {"kind", "transformer_block"}, {"heads", 2},      {"hidden", 128},      {"causal", causal},
          {"p", p},       {"fused_attention", fused},    {"epsilon", 1e-5}, {"pre_norm", preNorm}};
}

// "<base>-fused" or "<base>-math", then "-dropout" when p > 0.
inline std::string variantName(const std::string& base, bool fused, double p) {
  return base + (fused ? "-fused" : "-math") + (p > 0 ? "-dropout" : "");
}

inline json chainJson(const std::string& name, const std::vector<std::int64_t>& shape, const json& layers) {
  json j = {{"format", "remat-chain/1"}, {"name", name}};
  j["input"] = {{"shape", shape}, {"dtype", "float32"}};
  j["layers"] = layers;
  return j;
}

// Three blocks: "gpt" causal pre-norm (tanh GELU); "vit" pre-norm encoder blocks; "bert" post-norm
// blocks (erf GELU).
inline json blockLayers(const std::string& model, bool fused, double p) {
  json layers = json::array();
  for (int i = 0; i < 3; ++i)
    layers.push_back(block("h." + std::to_string(i), model == "gpt", fused, p, model != "bert"));
  return layers;
}

// The small GPT: token_embedding (wte + wpe), two causal blocks, lm_head (ln_f, the projection,
// log_softmax; its own W or tied to wte), with one label per token. Input [2, seq].
inline json gptLayers(bool fused, double p, bool tied, std::int64_t seq = 40) {
  json layers = json::array();
  layers.push_back(
      {{"name", "wte+wpe"}, {"kind", "token_embedding"}, {"vocab", 50}, {"positions", seq}, {"width", 32}, {"p", p}});
  for (int i = 0; i < 2; ++i) layers.push_back(block("h." + std::to_string(i), true, fused, p));
  layers.push_back({{"name", "ln_f+lm_head"}, {"kind", "lm_head"}, {"vocab", 50}, {"tied", tied}});
  return layers;
}

// A tiny BERT: token_embedding with two token types and its LayerNorm, two post-norm blocks, the
// pooler (cls_head without the norm: dense to 10 features, tanh). Input [2, 16].
inline json bertLayers(bool fused, double p) {
  json layers = json::array();
  layers.push_back({{"name", "embeddings"},
                    {"kind", "token_embedding"},
                    {"vocab", 50},
                    {"positions", 16},
                    {"width", 32},
                    {"segments", 2},
                    {"norm", true},
                    {"epsilon", 1e-12},
                    {"p", p}});
  for (int i = 0; i < 2; ++i) layers.push_back(block("encoder.layer." + std::to_string(i), false, fused, p, false));
  layers.push_back({{"name", "pooler"}, {"kind", "cls_head"}, {"out_features", 10}, {"norm", false}, {"tanh", true}});
  return layers;
}

// A tiny ViT: patch_embedding (16x16, patch 4: 16 patches and the class token), two blocks (their
// layer norms' epsilon blockEpsilon), the head (LayerNorm, token 0, the linear). Input [2, 3, 16, 16].
inline json vitLayers(bool fused, double p, double blockEpsilon = 1e-5) {
  json layers = json::array();
  layers.push_back({{"name", "conv_proj+class_token+pos_embedding"},
                    {"kind", "patch_embedding"},
                    {"patch", 4},
                    {"width", 32},
                    {"p", p}});
  for (int i = 0; i < 2; ++i) {
    json b = block("encoder_layer_" + std::to_string(i), false, fused, p);
    b["epsilon"] = blockEpsilon;
    layers.push_back(b);
  }
  layers.push_back({{"name", "ln+heads"}, {"kind", "cls_head"}, {"out_features", 10}, {"epsilon", 1e-6}});
  return layers;
}

// The chain of j (a failed parse fails the test, naming `where`, and gives an empty chain).
inline Chain parsed(const json& j, const char* where) {
  auto chain = parseChain(j.dump(), where);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

// The chain of j under bf16-mixed.
inline Chain mixed(const json& j, const char* where) {
  auto chain = parseChain(j.dump(), where);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  if (!chain) return Chain{};
  auto stepped = withPrecision(*chain, Precision::Bf16Mixed);
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped ? std::move(stepped).value() : Chain{};
}

}  // namespace remat::gpu::tiny
