// Whole transformer models (issue 23) on the CPU backend: a tiny GPT (token_embedding, two causal
// blocks, lm_head) gives PyTorch's parameter gradients of its cross entropy under both attention
// rules (scripts/make-transformer-reference.py), runs store-all and optimal's plan at batch 2 with
// the measured footprint equal to the prediction op by op, and refuses an out-of-vocabulary id by
// position.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chain_driver.hpp"
#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/planners/planners.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

json gptJson(std::int64_t batch, std::int64_t seq, bool fused, std::int64_t vocab = 50) {
  json layers = json::array();
  layers.push_back({{"name", "wte+wpe"},
                    {"kind", "token_embedding"},
                    {"vocab", vocab},
                    {"positions", seq},
                    {"width", 32},
                    {"p", 0.0}});
  for (int i = 0; i < 2; ++i)
    layers.push_back({{"name", "h." + std::to_string(i)},
                      {"kind", "transformer_block"},
                      {"heads", 2},
                      {"hidden", 128},
                      {"causal", true},
                      {"fused_attention", fused},
                      {"p", 0.0}});
  layers.push_back({{"name", "ln_f+lm_head"}, {"kind", "lm_head"}, {"vocab", vocab}});
  return {{"format", "remat-chain/1"},
          {"name", fused ? "tiny-gpt-fused" : "tiny-gpt-math"},
          {"input", {{"shape", {batch, seq}}, {"dtype", "float32"}}},
          {"layers", layers}};
}

Chain gpt(std::int64_t batch, std::int64_t seq, bool fused) {
  auto chain = parseChain(gptJson(batch, seq, fused).dump(), "tiny-gpt");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

void checkGptAgainstTorch(bool fused) {
  const json& ref = test::torchReference("transformer")["gpt"];
  const Chain chain = gpt(2, 8, fused);
  testing::ChainDriver driver(chain);
  ASSERT_EQ(driver.error(), "");
  const auto flat = ref["params"].get<std::vector<float>>();
  std::vector<std::vector<float>> params;
  std::size_t at = 0;
  for (std::size_t count : ref["layer_params"].get<std::vector<std::size_t>>()) {
    params.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at),
                        flat.begin() + static_cast<std::ptrdiff_t>(at + count));
    at += count;
  }
  ASSERT_EQ(params.size(), chain.size());
  std::vector<float> ids;
  for (int id : ref["ids"].get<std::vector<int>>()) ids.push_back(static_cast<float>(id));
  const auto grads = driver.step(ids, params, ref["labels"].get<std::vector<std::int32_t>>());
  ASSERT_EQ(grads.size(), chain.size());
  for (std::size_t l = 0; l < grads.size(); ++l)
    test::expectCloseToTorch(grads[l], ref["dparams"][l], chain.layers[l].name + " dparams");
}

TEST(TinyGptVsTorch, MathAttentionGradientsMatchPyTorch) { checkGptAgainstTorch(false); }
TEST(TinyGptVsTorch, FusedAttentionGradientsMatchPyTorch) { checkGptAgainstTorch(true); }

// Batch 2: store-all and optimal's plan (and every other planner's) as predicted, op by op, with
// store-all's gradients, under both rules; sequence 72 spans two flash tiles.
TEST(TinyGptRun, MeasuredFootprintEqualsPredictionBothRules) {
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "math");
    cpu::CpuDevice device({.poisonMemory = true});
    const Chain chain = testing::fittedTo(gpt(2, 72, fused), device);
    testing::expectEveryPlanReproducesStoreAll(chain, device, 7);
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
