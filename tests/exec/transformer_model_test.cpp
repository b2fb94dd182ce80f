// Whole transformer models (issue 23) on the CPU backend: a tiny GPT (token_embedding, two causal
// blocks, lm_head) gives PyTorch's parameter gradients of its cross entropy under both attention
// rules (scripts/make-transformer-reference.py), as do a tiny ViT (patch_embedding, two blocks,
// cls_head) and a tiny BERT (token types and the embedding's LayerNorm, post-norm blocks, pooler);
// all run every plan at batch 2 with the measured footprint equal to the prediction op by op, as do
// the zoo's GPT-2 (its tied head under both gradient modes) and BERT-base at batch 1, and an
// out-of-vocabulary id is refused by position.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "chain_driver.hpp"
#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
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

Chain withStep(const Chain& chain, OptimizerKind optimizer, GradMode grads, bool foreach = true) {
  auto stepped = withStepOptions(chain, StepOptions{.optimizer = optimizer, .foreach = foreach, .grads = grads});
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped.isOk() ? std::move(stepped).value() : chain;
}

// Store-all and every planner's plan, each on a fresh interpreter (an optimizer's step changes the
// parameters between runs): the footprint as predicted, op by op, and store-all's gradients.
void expectEveryPlanAsPredictedFromFreshStarts(const Chain& chain, Device& device, std::uint64_t seed) {
  const RunOptions options{.digestGradients = true, .captureDigests = true};
  auto runFresh = [&](const Plan& plan) -> Result<RunResult> {
    auto interp = Interpreter::create(chain, device, testing::seeded(seed));
    if (!interp) return interp.status();
    return (*interp)->run(plan, options);
  };
  auto reference = runFresh(Plan{});
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  testing::expectMatchesSimulation(chain, Plan{}, reference->timelines[0]);
  for (const auto& [name, plan] : testing::plannerPlans(chain, testing::allPlanners())) {
    SCOPED_TRACE(name + " [" + formatCheckpointList(plan) + "]");
    auto run = runFresh(plan);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectReproducesStoreAll(chain, plan, *run, *reference);
  }
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

// A tiny BERT (scripts/make-transformer-reference.py): token_embedding with two token types and its
// LayerNorm, two post-norm blocks, the pooler (dense to 10 features, tanh).
json bertJson(std::int64_t batch, std::int64_t seq, bool fused, double p = 0.0) {
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
  for (int i = 0; i < 2; ++i)
    layers.push_back({{"name", "encoder.layer." + std::to_string(i)},
                      {"kind", "transformer_block"},
                      {"heads", 2},
                      {"hidden", 128},
                      {"pre_norm", false},
                      {"fused_attention", fused},
                      {"p", p}});
  layers.push_back({{"name", "pooler"}, {"kind", "cls_head"}, {"out_features", 10}, {"norm", false}, {"tanh", true}});
  return {{"format", "remat-chain/1"},
          {"name", fused ? "tiny-bert-fused" : "tiny-bert-math"},
          {"input", {{"shape", {batch, seq}}, {"dtype", "float32"}}},
          {"layers", layers}};
}

// One store-all step with the reference's parameters: every layer's gradients are PyTorch's.
// x0 of a token chain: the int64 ids (PyTorch's torch.long), packed into the driver's float vector.
std::vector<float> tokenX0(const std::vector<std::int64_t>& ids) {
  std::vector<float> x0(ids.size() * sizeof(std::int64_t) / sizeof(float));
  std::memcpy(x0.data(), ids.data(), ids.size() * sizeof(std::int64_t));
  return x0;
}

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
  for (std::size_t l = 0; l < params.size(); ++l) ASSERT_EQ(params[l].size(), chain.layers[l].paramCount) << l;
  const auto grads = driver.step(x0, params, ref["labels"].get<std::vector<LabelIndex>>());
  ASSERT_EQ(grads.size(), chain.size());
  for (std::size_t l = 0; l < grads.size(); ++l)
    test::expectCloseToTorch(grads[l], ref["dparams"][l], chain.layers[l].name + " dparams");
}

void checkGptAgainstTorch(bool fused) {
  const json& ref = test::torchReference("transformer")["gpt"];
  checkModelAgainstTorch(gpt(2, 8, fused), ref, tokenX0(ref["ids"].get<std::vector<std::int64_t>>()));
}

void checkVitAgainstTorch(bool fused) {
  const json& ref = test::torchReference("transformer")["vit"];
  auto chain = parseChain(vitJson(fused).dump(), "tiny-vit");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  checkModelAgainstTorch(*chain, ref, test::spread(2 * 3 * 16 * 16, 0.3, 1.0));
}

void checkBertAgainstTorch(bool fused) {
  const json& ref = test::torchReference("transformer")["bert"];
  const std::vector<float> ids = tokenX0(ref["ids"].get<std::vector<std::int64_t>>());
  auto chain = parseChain(bertJson(2, 8, fused).dump(), "tiny-bert");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  checkModelAgainstTorch(*chain, ref, ids);
}

TEST(TinyBertVsTorch, MathAttentionGradientsMatchPyTorch) { checkBertAgainstTorch(false); }
TEST(TinyBertVsTorch, FusedAttentionGradientsMatchPyTorch) { checkBertAgainstTorch(true); }
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

// The tiny BERT at batch 2 under every plan, both rules, without dropout and with p = 0.1 (the
// embedding's mask after its LayerNorm, the blocks'), static and on-backward gradients.
TEST(TinyBertRun, MeasuredFootprintEqualsPredictionBothRules) {
  for (double p : {0.0, 0.1})
    for (bool fused : {false, true}) {
      SCOPED_TRACE(std::string(fused ? "fused" : "math") + (p > 0.0 ? ", p = 0.1" : ""));
      auto built = parseChain(bertJson(2, 12, fused, p).dump(), "tiny-bert");
      ASSERT_TRUE(built.isOk()) << built.status().message();
      cpu::CpuDevice device({.poisonMemory = true});
      const GradMode grads = p > 0.0 ? GradMode::OnBackward : GradMode::Static;
      const Chain chain = testing::fittedTo(withStep(*built, OptimizerKind::AdamW, grads), device);
      expectEveryPlanAsPredictedFromFreshStarts(chain, device, 9);
    }
}

// The zoo's BERT-base (token types, embedding LayerNorm, 12 post-norm blocks, pooler) at batch 1,
// sequence 16, runs store-all and optimal's plan as predicted, op by op, with static gradients.
TEST(ZooBertRun, StoreAllAndOptimalRunAsPredicted) {
  auto spec = zooChain("bert_base", ZooOptions{.batch = 1, .sequence = 16});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto built = buildChain(*spec);
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device;
  const Chain chain = testing::fittedTo(withStep(*built, OptimizerKind::None, GradMode::Static), device);
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
  std::vector<std::int64_t> tokens;
  for (int i = 0; i < 16; ++i) tokens.push_back((i * 7) % 50);
  const std::vector<float> ids = tokenX0(tokens);
  const std::vector<LabelIndex> labels(16, 3);
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

// Under on-backward gradients the tied head's B(n), the first backward to use wte, makes layer 1's
// G(1), and B(1) adds into it (memory-model.md 11.2): the model says so (the liveness trace) and
// every plan runs as predicted, op by op, in several optimizers' steps.
TEST(TinyGptRun, TiedHeadUnderOnBackwardGradientsRunsEveryPlanAsPredicted) {
  for (OptimizerKind optimizer : {OptimizerKind::None, OptimizerKind::Momentum, OptimizerKind::AdamW}) {
    SCOPED_TRACE(std::string(optimizerName(optimizer)));
    cpu::CpuDevice device({.poisonMemory = true});
    const Chain chain = testing::fittedTo(
        withStep(gpt(2, 16, true, 0.1, true), optimizer, GradMode::OnBackward, optimizer != OptimizerKind::AdamW),
        device);
    const LivenessTrace trace = traceLiveness(chain, Plan{});
    std::size_t tables = 0;
    for (const TensorLife& t : trace.tensors)
      if (t.kind == TensorLife::Kind::WeightGradient && t.layer == 1) {
        ++tables;
        EXPECT_EQ(trace.ops[t.writer].kind, OpKind::B);
        EXPECT_EQ(trace.ops[t.writer].layer, 4u);  // the head's backward
        EXPECT_EQ(t.bytes, chain.at(1).paramBytes);
      }
    EXPECT_EQ(tables, 1u);
    expectEveryPlanAsPredictedFromFreshStarts(chain, device, 7);
  }
}

// Under --grads static a transformer block holds one node's fresh gradient at a time, PyTorch's
// largest being the MLP's first linear (weight [hidden, d] and bias), not the block's whole p(l)
// (memory-model.md 11.2; the gradients are bitwise the in-place run's, the test below): every plan
// runs as predicted with it, op by op.
TEST(TinyGptRun, StaticGradientsHoldTheLargestNodesFreshGradient) {
  const Chain chain = withStep(gpt(2, 16, true, 0.1), OptimizerKind::Sgd, GradMode::Static);
  const std::uint64_t d = 32, hidden = 128;
  ASSERT_EQ(chain.layers[1].kind, LayerKind::TransformerBlock);
  EXPECT_EQ(freshGradientBytes(chain, 2), (hidden * d + hidden) * sizeof(float));
  EXPECT_LT(freshGradientBytes(chain, 2), chain.at(2).paramBytes);
  cpu::CpuDevice device({.poisonMemory = true});
  expectEveryPlanAsPredictedFromFreshStarts(testing::fittedTo(chain, device), device, 7);
}

// The gradients made on backward are the in-place ones, bit for bit: G(1) starts at zero at B(n) in
// both modes and takes the head's then the embedding's contributions in the same order. Under
// static, B(1) makes the embedding's part in a fresh buffer first (as PyTorch's embedding backward
// does) and AccumulateGrad adds it into the head's: layer 1's table then differs in rounding only,
// every other layer's gradient is bitwise the same (0 + g is g).
TEST(TinyGptRun, TiedHeadGradientsOnBackwardEqualTheStaticOnes) {
  std::vector<std::vector<std::byte>> byMode[3];
  const GradMode modes[] = {GradMode::InPlace, GradMode::OnBackward, GradMode::Static};
  for (int m = 0; m < 3; ++m) {
    cpu::CpuDevice device;
    const Chain chain =
        testing::fittedTo(withStep(gpt(2, 16, false, 0.0, true), OptimizerKind::None, modes[m]), device);
    auto run = runPlan(chain, Plan{{2}}, device, testing::seeded(5), RunOptions{.captureGradients = true});
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectMatchesSimulation(chain, Plan{{2}}, run->timelines[0]);
    byMode[m] = run->parameterGradients;
  }
  ASSERT_EQ(byMode[0].size(), 4u);     // layers 1..4
  EXPECT_FALSE(byMode[0][0].empty());  // layer 1's: the table's
  EXPECT_EQ(byMode[0], byMode[1]);
  for (std::size_t l = 1; l < 4; ++l) EXPECT_EQ(byMode[2][l], byMode[0][l]) << "layer " << l + 1;
  ASSERT_EQ(byMode[2][0].size(), byMode[0][0].size());
  const std::size_t count = byMode[0][0].size() / sizeof(float);
  std::vector<float> inPlace(count), fresh(count);
  std::memcpy(inPlace.data(), byMode[0][0].data(), count * sizeof(float));
  std::memcpy(fresh.data(), byMode[2][0].data(), count * sizeof(float));
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_NEAR(fresh[i], inPlace[i], 1e-6f + 1e-5f * std::abs(inPlace[i])) << "table element " << i;
}

// The zoo's GPT-2 (d 768, vocabulary 50,257, dropout 0.1, tied head) at batch 1 runs optimal's plan
// as predicted, op by op, under both gradient modes and three optimizers' steps (store-all: the CLI
// test, tests/cli/transformer_cli_test.cpp; about 20 s a mode on two cores).
TEST(ZooGpt2Run, TiedHeadRunsAsPredictedUnderEveryGradientMode) {
  auto spec = zooChain("gpt2", ZooOptions{.batch = 1, .sequence = 16});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto built = buildChain(*spec);
  ASSERT_TRUE(built.isOk()) << built.status().message();
  const std::pair<OptimizerKind, GradMode> modes[] = {{OptimizerKind::AdamW, GradMode::OnBackward},
                                                      {OptimizerKind::Sgd, GradMode::OnBackward},
                                                      {OptimizerKind::None, GradMode::OnBackward},
                                                      {OptimizerKind::Momentum, GradMode::Static}};
  for (const auto& [optimizer, grads] : modes) {
    SCOPED_TRACE(std::string(optimizerName(optimizer)) + ", " + std::string(gradModeName(grads)));
    cpu::CpuDevice device;
    const Chain chain = testing::fittedTo(withStep(*built, optimizer, grads), device);
    auto optimal = runPlanner(chain, "optimal");
    ASSERT_TRUE(optimal.isOk()) << optimal.status().message();
    auto interp = Interpreter::create(chain, device, testing::seeded(3));
    ASSERT_TRUE(interp.isOk()) << interp.status().message();
    auto run = (*interp)->run(optimal->plan, RunOptions{});
    ASSERT_TRUE(run.isOk()) << run.status().message();
    testing::expectMatchesSimulation(chain, optimal->plan, run->timelines[0]);
  }
}

TEST(TinyGptRun, AnOutOfVocabularyIdIsALocatedError) {
  const Chain chain = gpt(2, 8, true);
  testing::ChainDriver driver(chain);
  ASSERT_EQ(driver.error(), "");
  std::vector<std::vector<float>> params;
  for (const ChainLayer& layer : chain.layers) params.emplace_back(layer.paramCount, 0.01f);
  for (std::int64_t bad : {std::int64_t{50}, std::int64_t{-1}, std::int64_t{1} << 40}) {
    std::vector<std::int64_t> ids(16, 1);
    ids[11] = bad;  // sample 1, position 3
    std::string failure;
    EXPECT_TRUE(driver.step(tokenX0(ids), params, std::vector<LabelIndex>(16, 0), &failure).empty());
    EXPECT_NE(failure.find("cpu: layer 1 ('wte+wpe', token_embedding): token id"), std::string::npos) << failure;
    EXPECT_NE(failure.find("of sample 1, position 3 is not in [0, 50)"), std::string::npos) << failure;
  }
}

}  // namespace
}  // namespace remat
