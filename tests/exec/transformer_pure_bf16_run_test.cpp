// Pure bf16 on the CPU for transformer_block (the model cast with .to(torch.bfloat16);
// docs/memory-model.md 11.7 and 12.11, docs/executor.md): GPT's pre-norm causal blocks (math and
// fused attention, with dropout), BERT's post-norm blocks and ViT's non-causal pre-norm blocks on a
// bfloat16 residual stream, with bfloat16 parameters, gradients and optimizer state. Every op's
// measured footprint equals the prediction under every planner's plan and in several optimizer and
// gradient modes; every plan's gradients are store-all's bit for bit; the gradients lie within
// bfloat16's error of float32's. Swin's kinds run pure too (swin_half_run_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "chain_helpers.hpp"
#include "cpu_bfloat16.hpp"
#include "executor_helpers.hpp"
#include "precision_runs.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/precision.hpp"

namespace remat {
namespace {

using nlohmann::json;

enum class Style { Gpt, Bert, Vit };

// Three blocks of width 64 (4 heads, MLP 256) on a [2, 16, 64] stream, then flatten and a linear
// classifier (the loss reads its bfloat16 logits).
json blocksJson(Style style, bool fused, double p = 0.0) {
  json layers = json::array();
  for (int i = 0; i < 3; ++i)
    layers.push_back({{"name", "h." + std::to_string(i)},
                      {"kind", "transformer_block"},
                      {"heads", 4},
                      {"hidden", 256},
                      {"causal", style == Style::Gpt},
                      {"pre_norm", style != Style::Bert},
                      {"epsilon", style == Style::Vit ? 1e-6 : 1e-5},
                      {"p", p},
                      {"fused_attention", fused}});
  layers.push_back({{"name", "flat"}, {"kind", "flatten"}});
  layers.push_back({{"name", "head"}, {"kind", "linear"}, {"out_features", 10}});
  const std::string name = std::string(style == Style::Gpt    ? "gpt"
                                       : style == Style::Bert ? "bert"
                                                              : "vit") +
                           (fused ? "-fused" : "-math") + (p > 0.0 ? "-dropout" : "");
  return {{"format", "remat-chain/1"},
          {"name", name},
          {"input", {{"shape", {2, 16, 64}}, {"dtype", "float32"}}},
          {"layers", layers}};
}

// GPT (token_embedding, two pre-norm causal blocks, the tied lm_head with ln_f) and BERT (its
// embedding with two token types and a LayerNorm, two post-norm blocks, an untied lm_head without
// a norm) on token ids [2, 16].
json tokensJson(bool bert, bool fused, double p = 0.0) {
  json layers = json::array();
  json embedding = {
      {"name", "embeddings"}, {"kind", "token_embedding"}, {"vocab", 100}, {"positions", 16}, {"width", 64}, {"p", p}};
  if (bert) {
    embedding["segments"] = 2;
    embedding["norm"] = true;
    embedding["epsilon"] = 1e-12;
  }
  layers.push_back(embedding);
  for (int i = 0; i < 2; ++i)
    layers.push_back({{"name", "h." + std::to_string(i)},
                      {"kind", "transformer_block"},
                      {"heads", 4},
                      {"hidden", 256},
                      {"causal", !bert},
                      {"pre_norm", !bert},
                      {"p", p},
                      {"fused_attention", fused}});
  layers.push_back(
      {{"name", "head"}, {"kind", "lm_head"}, {"vocab", 100}, {"tied", !bert}, {"norm", !bert}, {"epsilon", 1e-5}});
  const std::string name =
      std::string(bert ? "bert-tokens" : "gpt-tokens") + (fused ? "-fused" : "-math") + (p > 0.0 ? "-dropout" : "");
  return {{"format", "remat-chain/1"},
          {"name", name},
          {"input", {{"shape", {2, 16}}, {"dtype", "float32"}}},
          {"layers", layers}};
}

// A small ViT: patch_embedding (32x32, patch 8: 16 patches and the class token), two pre-norm
// blocks, cls_head (its LayerNorm, token 0, the linear); or BERT's pooler after post-norm blocks
// (cls_head without a norm, with tanh).
json vitJson(bool fused, bool pooler = false, double p = 0.0) {
  json layers = json::array();
  layers.push_back({{"name", "conv_proj"}, {"kind", "patch_embedding"}, {"patch", 8}, {"width", 64}, {"p", p}});
  for (int i = 0; i < 2; ++i)
    layers.push_back({{"name", "encoder_layer_" + std::to_string(i)},
                      {"kind", "transformer_block"},
                      {"heads", 4},
                      {"hidden", 256},
                      {"causal", false},
                      {"pre_norm", !pooler},
                      {"epsilon", 1e-6},
                      {"p", p},
                      {"fused_attention", fused}});
  if (pooler)
    layers.push_back({{"name", "pooler"}, {"kind", "cls_head"}, {"out_features", 10}, {"norm", false}, {"tanh", true}});
  else
    layers.push_back({{"name", "heads"}, {"kind", "cls_head"}, {"out_features", 10}, {"epsilon", 1e-6}});
  const std::string name =
      std::string(pooler ? "vit-pooler" : "vit-image") + (fused ? "-fused" : "-math") + (p > 0.0 ? "-dropout" : "");
  return {{"format", "remat-chain/1"},
          {"name", name},
          {"input", {{"shape", {2, 3, 32, 32}}, {"dtype", "float32"}}},
          {"layers", layers}};
}

Chain blocks(const json& file, Precision precision, StepOptions step = {}) {
  return testing::withStep(testing::chainFromJson(file), precision, step);
}

std::vector<json> everyStyle() {
  return {blocksJson(Style::Gpt, false),
          blocksJson(Style::Gpt, true),
          blocksJson(Style::Bert, false),
          blocksJson(Style::Bert, true),
          blocksJson(Style::Vit, true),
          blocksJson(Style::Vit, false),
          blocksJson(Style::Gpt, false, 0.1),
          blocksJson(Style::Gpt, true, 0.1),
          blocksJson(Style::Bert, false, 0.1),
          tokensJson(false, false),
          tokensJson(false, true),
          tokensJson(true, false),
          tokensJson(true, true),
          tokensJson(false, false, 0.1),
          tokensJson(true, true, 0.1),
          vitJson(false),
          vitJson(true),
          vitJson(true, true),
          vitJson(false, false, 0.1)};
}

// The model's pure rule is float32's with 2-byte tensors and float32 norm statistics (memory-model.md
// 12.11): E is float32's E less half of its bfloat16-able bytes.
TEST(TransformerPureBf16Run, TheModelHalvesTheBlockButTheNormStatistics) {
  const Chain plain = blocks(blocksJson(Style::Gpt, false), Precision::Fp32);
  const Chain half = blocks(blocksJson(Style::Gpt, false), Precision::Bf16);
  ASSERT_EQ(half.dtype, DType::BFloat16);
  const std::uint64_t tokens = 2 * 16, stats = 2 * 2 * tokens * 4;  // both norms' mean and rstd, float32
  EXPECT_EQ(half.layers[0].numbers.extraBytes - stats, (plain.layers[0].numbers.extraBytes - stats) / 2);
  EXPECT_EQ(half.layers[0].numbers.paramBytes * 2, plain.layers[0].numbers.paramBytes);
  EXPECT_EQ(half.layers[0].numbers.outBytes * 2, plain.layers[0].numbers.outBytes);
}

// Math and fused attention, GPT, BERT and ViT blocks, dropout: every planner's plan measures the
// prediction op by op and its gradients are store-all's bit for bit.
TEST(TransformerPureBf16Run, EveryPlanMeasuresThePredictionAndReproducesStoreAll) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  for (const json& file : everyStyle()) {
    SCOPED_TRACE(file["name"].get<std::string>());
    cpu::CpuDevice device({.poisonMemory = true, .threads = 1});
    const Chain chain = testing::fittedTo(blocks(file, Precision::Bf16), device);
    ASSERT_EQ(chain.step.precision, Precision::Bf16);
    testing::expectEveryPlanReproducesStoreAll(chain, device, 3);
    EXPECT_EQ(device.allocator().bytesHeld(), 0u);
  }
}

Chain gptMath(Precision precision, StepOptions step) {
  return blocks(blocksJson(Style::Gpt, false, 0.1), precision, step);
}
Chain bertFused(Precision precision, StepOptions step) {
  return blocks(blocksJson(Style::Bert, true), precision, step);
}

// SGD, momentum, Adam and AdamW, foreach on and off, gradients static and on backward: two steps
// of store-all and of optimal's plan, the bfloat16 optimizer step included.
TEST(TransformerPureBf16Run, EveryOptimizerAndGradientMode) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  testing::expectEveryStepModeMeasured(gptMath, Precision::Bf16);
}

TEST(TransformerPureBf16Run, PostNormFusedInEveryOptimizerAndGradientMode) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  testing::expectEveryStepModeMeasured(bertFused, Precision::Bf16);
}

// Each parameter layer's relative (L2) difference of its bfloat16 gradient from float32's, for the
// same weights (float32's rounded) and batch.
std::vector<double> relativeDifferences(const json& file, std::uint64_t seed) {
  const auto plain = testing::gradientBytesOf(blocks(file, Precision::Fp32), seed);
  const auto half = testing::gradientBytesOf(blocks(file, Precision::Bf16), seed);
  return testing::relativeHalfDifferences(plain, half);
}

// The gradients lie within a few percent of float32's (bfloat16's 8 bits of mantissa through three
// blocks and a bfloat16 residual stream) and differ from them (the bfloat16 kernels ran).
TEST(TransformerPureBf16Run, GradientsLieWithinBfloat16sErrorOfFloat32s) {
  REMAT_SKIP_WITHOUT_CPU_BFLOAT16();
  for (const json& file : everyStyle()) {
    SCOPED_TRACE(file["name"].get<std::string>());
    const auto differences = relativeDifferences(file, 5);
    ASSERT_GE(differences.size(), 3u);  // the blocks and the head or the embedding
    for (std::size_t l = 0; l < differences.size(); ++l) {
      EXPECT_LT(differences[l], 0.05) << "parameter layer " << l + 1;
      EXPECT_GT(differences[l], 1e-4) << "parameter layer " << l + 1;
    }
  }
}

}  // namespace
}  // namespace remat
