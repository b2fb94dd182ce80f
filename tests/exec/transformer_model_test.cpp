// Whole transformer models (issue 23) on the CPU backend: a tiny GPT (token_embedding, two causal
// blocks, lm_head) gives PyTorch's parameter gradients of its cross entropy under both attention
// rules (scripts/make-transformer-reference.py), as does a tiny ViT (patch_embedding, two blocks,
// cls_head); both run store-all and optimal's plan at batch 2 with
// the measured footprint equal to the prediction op by op, and refuses an out-of-vocabulary id by
// position.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chain_driver.hpp"
#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/planners.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

json gptJson(std::int64_t batch, std::int64_t seq, bool fused, std::int64_t vocab = 50, double p = 0.0) {
  json layers = json::array();
  layers.push_back({{"name", "wte+wpe"},
                    {"kind", "token_embedding"},
                    {"vocab", vocab},
                    {"positions", seq},
                    {"width", 32},
                    {"p", p}});
  for (int i = 0; i < 2; ++i)
    layers.push_back({{"name", "h." + std::to_string(i)},
                      {"kind", "transformer_block"},
                      {"heads", 2},
                      {"hidden", 128},
                      {"causal", true},
                      {"fused_attention", fused},
                      {"p", p}});
  layers.push_back({{"name", "ln_f+lm_head"}, {"kind", "lm_head"}, {"vocab", vocab}});
  return {{"format", "remat-chain/1"},
          {"name", fused ? "tiny-gpt-fused" : "tiny-gpt-math"},
          {"input", {{"shape", {batch, seq}}, {"dtype", "float32"}}},
          {"layers", layers}};
}

Chain gpt(std::int64_t batch, std::int64_t seq, bool fused, double p = 0.0) {
  auto chain = parseChain(gptJson(batch, seq, fused, 50, p).dump(), "tiny-gpt");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

json vitJson(bool fused, double p = 0.0) {
  json layers = json::array();
  layers.push_back({{"name", "conv_proj+class_token+pos_embedding"},
                    {"kind", "patch_embedding"},
                    {"patch", 4},
                    {"width", 32},
                    {"p", p}});
  for (int i = 0; i < 2; ++i)
    layers.push_back({{"name", "encoder_layer_" + std::to_string(i)},
                      {"kind", "transformer_block"},
                      {"heads", 2},
                      {"hidden", 128},
                      {"fused_attention", fused},
                      {"p", p},
                      {"epsilon", 1e-6}});
  layers.push_back({{"name", "ln+heads"}, {"kind", "cls_head"}, {"out_features", 10}, {"epsilon", 1e-6}});
  return {{"format", "remat-chain/1"},
          {"name", fused ? "tiny-vit-fused" : "tiny-vit-math"},
          {"input", {{"shape", {2, 3, 16, 16}}, {"dtype", "float32"}}},
          {"layers", layers}};
}

// One store-all step with the reference's parameters: every layer's gradients are PyTorch's.
void checkModelAgainstTorch(const Chain& chain, const json& ref, const std::vector<float>& x0) {
  testing::ChainDriver driver(chain);
  ASSERT_EQ(driver.error(), "");
  std::size_t total = 0;
  for (std::size_t count : ref["layer_params"].get<std::vector<std::size_t>>()) total += count;
  const std::vector<float> flat = test::spread(total, 0.4, 0.5);  // set_parameters' values
  std::vector<std::vector<float>> params;
  std::size_t at = 0;
  for (std::size_t count : ref["layer_params"].get<std::vector<std::size_t>>()) {
    params.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at),
                        flat.begin() + static_cast<std::ptrdiff_t>(at + count));
    at += count;
  }
  ASSERT_EQ(params.size(), chain.size());
  const auto grads = driver.step(x0, params, ref["labels"].get<std::vector<std::int32_t>>());
  ASSERT_EQ(grads.size(), chain.size());
  for (std::size_t l = 0; l < grads.size(); ++l)
    test::expectCloseToTorch(grads[l], ref["dparams"][l], chain.layers[l].name + " dparams");
}

void checkGptAgainstTorch(bool fused) {
  const json& ref = test::torchReference("transformer")["gpt"];
  std::vector<float> ids;
  for (int id : ref["ids"].get<std::vector<int>>()) ids.push_back(static_cast<float>(id));
  checkModelAgainstTorch(gpt(2, 8, fused), ref, ids);
}

void checkVitAgainstTorch(bool fused) {
  const json& ref = test::torchReference("transformer")["vit"];
  auto chain = parseChain(vitJson(fused).dump(), "tiny-vit");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  checkModelAgainstTorch(*chain, ref, test::spread(2 * 3 * 16 * 16, 0.3, 1.0));
}

TEST(TinyGptVsTorch, MathAttentionGradientsMatchPyTorch) { checkGptAgainstTorch(false); }
TEST(TinyGptVsTorch, FusedAttentionGradientsMatchPyTorch) { checkGptAgainstTorch(true); }
TEST(TinyVitVsTorch, MathAttentionGradientsMatchPyTorch) { checkVitAgainstTorch(false); }
TEST(TinyVitVsTorch, FusedAttentionGradientsMatchPyTorch) { checkVitAgainstTorch(true); }

// The tiny ViT at batch 2 under every plan, both rules; with p = 0.1 too (the patch embedding's
// and the blocks' masks in E, redrawn by every recompute).
TEST(TinyVitRun, MeasuredFootprintEqualsPredictionBothRules) {
  for (double p : {0.0, 0.1})
    for (bool fused : {false, true}) {
      SCOPED_TRACE(std::string(fused ? "fused" : "math") + (p > 0.0 ? ", p = 0.1" : ""));
      auto built = parseChain(vitJson(fused, p).dump(), "tiny-vit");
      ASSERT_TRUE(built.isOk()) << built.status().message();
      cpu::CpuDevice device({.poisonMemory = true});
      const Chain chain = testing::fittedTo(*built, device);
      testing::expectEveryPlanReproducesStoreAll(chain, device, 9);
    }
}

// Batch 2: store-all and optimal's plan (and every other planner's) as predicted, op by op, with
// store-all's gradients, under both rules, without dropout and with p = 0.1 in the embedding and
// every block (GPT-2's); sequence 72 spans two flash tiles.
TEST(TinyGptRun, MeasuredFootprintEqualsPredictionBothRules) {
  for (double p : {0.0, 0.1})
    for (bool fused : {false, true}) {
      SCOPED_TRACE(std::string(fused ? "fused" : "math") + (p > 0.0 ? ", p = 0.1" : ""));
      cpu::CpuDevice device({.poisonMemory = true});
      const Chain chain = testing::fittedTo(gpt(2, 72, fused, p), device);
      testing::expectEveryPlanReproducesStoreAll(chain, device, 7);
    }
}

// The zoo's ViT-B/16 at batch 2 (32x32: 5 tokens, 12 blocks of d 768) runs optimal's plan as
// predicted, op by op, under both rules (the zoo execution test runs every planner on fused).
TEST(ZooVitRun, OptimalsPlanRunsAsPredictedUnderBothRules) {
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "math");
    auto spec =
        zooChain("vit_b_16", ZooOptions{.batch = 2, .resolution = 32, .numClasses = 10, .fusedAttention = fused});
    ASSERT_TRUE(spec.isOk()) << spec.status().message();
    auto built = buildChain(*spec);
    ASSERT_TRUE(built.isOk()) << built.status().message();
    cpu::CpuDevice device({.threads = 1});
    const Chain chain = testing::fittedTo(*built, device);
    auto optimal = runPlanner(chain, "optimal");
    ASSERT_TRUE(optimal.isOk()) << optimal.status().message();
    auto interp = Interpreter::create(chain, device, testing::seeded(3));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    for (const Plan& plan : {Plan{}, optimal->plan}) {
      auto run = (*interp)->run(plan, RunOptions{});
      ASSERT_TRUE(run.isOk()) << run.status().message();
      testing::expectMatchesSimulation(chain, plan, run->timelines[0]);
    }
  }
}

TEST(TinyGptRun, AnOutOfVocabularyIdIsALocatedError) {
  const Chain chain = gpt(2, 8, true);
  testing::ChainDriver driver(chain);
  ASSERT_EQ(driver.error(), "");
  std::vector<std::vector<float>> params;
  for (const ChainLayer& layer : chain.layers) params.emplace_back(layer.paramCount, 0.01f);
  for (float bad : {50.0f, -1.0f, 2.5f}) {
    std::vector<float> ids(16, 1.0f);
    ids[11] = bad;  // sample 1, position 3
    std::string failure;
    EXPECT_TRUE(driver.step(ids, params, std::vector<std::int32_t>(16, 0), &failure).empty());
    EXPECT_NE(failure.find("cpu: layer 1 ('wte+wpe', token_embedding): token id"), std::string::npos) << failure;
    EXPECT_NE(failure.find("of sample 1, position 3 is not a whole number in [0, 50)"), std::string::npos) << failure;
  }
}

}  // namespace
}  // namespace remat
