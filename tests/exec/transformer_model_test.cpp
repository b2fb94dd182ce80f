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

json gptJson(std::int64_t batch, std::int64_t seq, bool fused, std::int64_t vocab = 50, double p = 0.0,
             bool tied = false) {
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
  layers.push_back({{"name", "ln_f+lm_head"}, {"kind", "lm_head"}, {"vocab", vocab}, {"tied", tied}});
  return {{"format", "remat-chain/1"},
          {"name", fused ? "tiny-gpt-fused" : "tiny-gpt-math"},
          {"input", {{"shape", {batch, seq}}, {"dtype", "float32"}}},
          {"layers", layers}};
}

Chain gpt(std::int64_t batch, std::int64_t seq, bool fused, double p = 0.0, bool tied = false) {
  auto chain = parseChain(gptJson(batch, seq, fused, 50, p, tied).dump(), "tiny-gpt");
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

// GPT-2's tied head (no parameters but ln_f's; its weight is layer 1's wte) with dropout, under
// every plan: the head's backward adds into layer 1's static gradient, the footprint as predicted.
TEST(TinyGptRun, TiedHeadWithDropoutRunsEveryPlanAsPredicted) {
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "math");
    cpu::CpuDevice device({.poisonMemory = true});
    const Chain chain = testing::fittedTo(gpt(2, 72, fused, 0.1, true), device);
    testing::expectEveryPlanReproducesStoreAll(chain, device, 7);
  }
}

// The tied head computes what an untied head holding a copy of wte computes: the same blocks'
// gradients (bit for bit) and ln_f's, and layer 1's gradient is the untied embedding's plus the
// untied head's weight gradient (summed in another order: close, not bitwise).
TEST(TinyGptRun, TiedHeadGradientIsTheEmbeddingsPlusTheHeads) {
  const Chain tied = gpt(2, 8, true, 0.0, true), untied = gpt(2, 8, true);
  std::vector<std::vector<float>> params;
  for (std::size_t l = 0; l < untied.size(); ++l)
    params.push_back(test::spread(untied.layers[l].paramCount, 0.3 + 0.1 * static_cast<double>(l), 0.5));
  const std::size_t table = 50 * 32, lnF = 2 * 32;
  std::copy_n(params[0].begin(), table, params[3].begin() + lnF);  // the untied W = wte
  std::vector<std::vector<float>> tiedParams = params;
  tiedParams[3].resize(lnF);
  ASSERT_EQ(tied.layers[3].paramCount, lnF);
  std::vector<float> ids;
  for (int i = 0; i < 16; ++i) ids.push_back(static_cast<float>((i * 7) % 50));
  const std::vector<std::int32_t> labels(16, 3);
  testing::ChainDriver tiedDriver(tied), untiedDriver(untied);
  ASSERT_EQ(tiedDriver.error(), "");
  const auto got = tiedDriver.step(ids, tiedParams, labels), want = untiedDriver.step(ids, params, labels);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_EQ(want.size(), 4u);
  EXPECT_EQ(got[1], want[1]);
  EXPECT_EQ(got[2], want[2]);
  EXPECT_EQ(got[3], std::vector<float>(want[3].begin(), want[3].begin() + lnF));
  std::vector<float> sum = want[0];
  for (std::size_t i = 0; i < table; ++i) sum[i] += want[3][lnF + i];
  test::expectCloseToTorch(got[0], json(sum), "layer 1's gradient");
}

// The interpreter refuses a tied head under on-backward gradients (G(1) is made only at B(1));
// the device prepares it (the profiler times the head alone).
TEST(TinyGptRun, ATiedHeadNeedsStaticGradients) {
  Chain chain = gpt(2, 8, true, 0.0, true);
  chain.step.grads = GradMode::OnBackward;
  cpu::CpuDevice device;
  EXPECT_TRUE(device.prepare(chain).isOk());
  auto interp = Interpreter::create(chain, device, testing::seeded(1));
  ASSERT_FALSE(interp.isOk());
  EXPECT_NE(interp.status().message().find("layer 4 ('ln_f+lm_head', lm_head): tied: the head adds into layer 1's "
                                           "table gradient, which --grads on-backward makes only at B(1)"),
            std::string::npos)
      << interp.status().message();
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
