// Transformers (issue 23) on the CPU backend: transformer_block forward and backward, pre-norm and
// BERT's post-norm, under both attention rules (math: the [N, h, S, S] probabilities kept; fused: flash attention
// blocked over the sequence, saving qkv, the output and the log-sum-exp) give PyTorch's values and gradients
// (scripts/make-transformer-reference.py: nanoGPT's block, torchvision's ViT EncoderBlock and
// torch.nn.TransformerEncoderLayer in post-norm), and a
// chain of blocks runs store-all and every planner's plan with the measured footprint equal to the
// model's prediction op by op and store-all's gradients bit for bit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cpu_harness.hpp"
#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/planners/planners.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

json block(const std::string& name, bool causal, bool fused, double epsilon = 1e-5, double p = 0.0) {
  return {{"name", name},     {"kind", "transformer_block"}, {"heads", 2}, {"hidden", 128},
          {"causal", causal}, {"fused_attention", fused},    {"p", p},     {"epsilon", epsilon}};
}

void checkAgainstTorch(const std::string& variant, const json& layer) {
  const json& ref = test::torchReference("transformer");
  const json& want = ref["variants"][variant];
  testing::LayerHarness h(ref["shape"].get<std::vector<std::int64_t>>(), layer);
  ASSERT_EQ(h.error(), "");
  ASSERT_EQ(h.paramCount(), want["param_count"].get<std::size_t>());
  const std::vector<float> x = test::spread(h.inputCount(), 0.1, 2.0);
  const std::vector<float> params = test::spread(h.paramCount(), 0.4, 0.5);
  // A discard-mode forward (R: its saved tensors in the workspace) computes the same output.
  const std::vector<float> discarded = h.forward(x, params, /*keep=*/false);
  const std::vector<float> y = h.forward(x, params, /*keep=*/true);
  EXPECT_EQ(discarded, y);
  test::expectCloseToTorch(y, want["y"], variant + " y");
  const auto g = h.backward(test::spread(h.outputCount(), 0.7, 1.0));
  test::expectCloseToTorch(g.dx, want["dx"], variant + " dx");
  test::expectCloseToTorch(g.dparams, want["dparams"], variant + " dparams");
}

TEST(TransformerVsTorch, GptBlockWithMathAttentionMatchesPyTorch) {
  checkAgainstTorch("gpt_block", block("b", true, false));
}

TEST(TransformerVsTorch, GptBlockWithFusedAttentionMatchesPyTorch) {
  checkAgainstTorch("gpt_block", block("b", true, true));
}

TEST(TransformerVsTorch, VitBlockWithMathAttentionMatchesPyTorch) {
  checkAgainstTorch("vit_block", block("b", false, false, 1e-6));
}

TEST(TransformerVsTorch, VitBlockWithFusedAttentionMatchesPyTorch) {
  checkAgainstTorch("vit_block", block("b", false, true, 1e-6));
}

Chain blocks(std::int64_t batch, std::int64_t seq, bool causal, bool fused, std::int64_t count, double p = 0.0) {
  json layers = json::array();
  for (std::int64_t i = 0; i < count; ++i) layers.push_back(block("h." + std::to_string(i), causal, fused, 1e-5, p));
  const json j = {{"format", "remat-chain/1"},
                  {"name", std::string(causal ? "gpt" : "vit") + (fused ? "-fused" : "-math")},
                  {"input", {{"shape", {batch, seq, 32}}, {"dtype", "float32"}}},
                  {"layers", layers}};
  auto chain = parseChain(j.dump(), "blocks");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

// Batch 2, 4 blocks, a sequence of 80 (two flash tiles, the second partial): store-all and every
// planner's plan (optimal's among them) as predicted, op by op, under both rules, without dropout
// and with p = 0.1 (the masks in E; a recompute redraws the same masks, so the gradients are
// store-all's bit for bit).
void expectEveryPlanAsPredicted(double p) {
  for (bool causal : {true, false})
    for (bool fused : {false, true}) {
      SCOPED_TRACE(std::string(causal ? "causal " : "") + (fused ? "fused" : "math"));
      cpu::CpuDevice device({.poisonMemory = true});
      Chain built = blocks(2, 80, causal, fused, 4, p);
      if (!causal) {  // the encoder chain mixes BERT's post-norm blocks in
        built.spec.layers[1].preNorm = false;
        built.spec.layers[3].preNorm = false;
        auto rebuilt = buildChain(built.spec);
        ASSERT_TRUE(rebuilt.isOk()) << rebuilt.status().message();
        built = std::move(rebuilt).value();
      }
      const Chain chain = testing::fittedTo(built, device);
      testing::expectEveryPlanReproducesStoreAll(chain, device, 23);
    }
}

TEST(TransformerRun, MeasuredFootprintEqualsPredictionUnderEveryPlanBothRules) { expectEveryPlanAsPredicted(0.0); }

TEST(TransformerRun, WithDropoutMeasuredFootprintEqualsPredictionUnderEveryPlanBothRules) {
  expectEveryPlanAsPredicted(0.1);
}

// The fused rule keeps no S x S tensor: its E is math's less the probabilities (and the q, k, v
// copies) plus qkv, the output and the [N, h, S] log-sum-exp; and the run still matches.
TEST(TransformerRun, FusedKeepsNoSequenceSquaredTensor) {
  const Chain math = blocks(2, 80, true, false, 1), fused = blocks(2, 80, true, true, 1);
  const std::uint64_t tokens = 2 * 80, d = 32, probs = 2 * 2 * 80 * 80;
  EXPECT_EQ(math.layers[0].numbers.extraBytes - fused.layers[0].numbers.extraBytes,
            probs * 4 + 3 * tokens * d * 4 - 4 * tokens * d * 4 - 2 * 2 * 80 * 4);
  // At S = 1,024 one [N, h, S, S] tensor is 16 MiB; the fused kernels' workspaces hold none (the
  // backward recomputes the probabilities tile by tile), math's backward holds d(probabilities).
  const std::uint64_t longProbs = 2 * 2 * 1024 * 1024 * 4;
  cpu::CpuDevice device;
  for (bool rule : {true, false}) {
    ASSERT_TRUE(device.prepare(blocks(2, 1024, true, rule, 1)).isOk());
    for (Pass pass : {Pass::Forward, Pass::Backward}) {
      auto w = device.requiredWorkspaceBytes(1, pass);
      ASSERT_TRUE(w.isOk());
      if (rule) {
        EXPECT_LT(*w, longProbs);
      } else if (pass == Pass::Backward) {
        EXPECT_GT(*w, longProbs);
      }
    }
  }
}

json postNorm(bool fused) {
  json layer = block("b", false, fused);
  layer["pre_norm"] = false;
  return layer;
}

TEST(TransformerVsTorch, BertPostNormBlockWithMathAttentionMatchesPyTorch) {
  checkAgainstTorch("bert_block", postNorm(false));
}

TEST(TransformerVsTorch, BertPostNormBlockWithFusedAttentionMatchesPyTorch) {
  checkAgainstTorch("bert_block", postNorm(true));
}

}  // namespace
}  // namespace remat
