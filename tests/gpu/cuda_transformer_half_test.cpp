// transformer_block under bf16-mixed on a real GPU (issue 24; gpu/src/cuda_transformer_half.cpp;
// skipped, with the reason, where there is none): chains of GPT's causal pre-norm blocks, ViT's
// encoder blocks and BERT's post-norm blocks, under both attention rules, without and with dropout,
// as torch.autocast runs them (the float32 residual stream and layer norms, bfloat16 linears,
// attention and GELU): every planner's plan measures the model's prediction op by op and reproduces
// store-all's gradients, and the gradients are the CPU's bf16-mixed run's within bfloat16's
// precision (3% of the largest: cuBLAS and the CPU's loops sum in other orders). The small GPT
// (token_embedding, blocks, lm_head untied and tied), a tiny BERT (its embedding's LayerNorm,
// post-norm blocks, the tanh pooler) and a tiny ViT (patch_embedding, blocks, cls_head) do the
// same end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "executor_helpers.hpp"
#include "gpu_test_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/gpu/cuda_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"

namespace remat::gpu {
namespace {

using nlohmann::json;

json block(const std::string& name, bool causal, bool fused, double p, bool preNorm = true) {
  return {{"name", name}, {"kind", "transformer_block"}, {"heads", 2},      {"hidden", 128},      {"causal", causal},
          {"p", p},       {"fused_attention", fused},    {"epsilon", 1e-5}, {"pre_norm", preNorm}};
}

Chain mixed(const json& j) {
  auto chain = parseChain(j.dump(), "cuda_transformer_half_test.cpp");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  if (!chain) return Chain{};
  auto stepped = withPrecision(*chain, Precision::Bf16Mixed);
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped ? std::move(stepped).value() : Chain{};
}

// Batch 2, a sequence of 40, width 32, three blocks: "gpt" causal pre-norm (tanh GELU); "vit"
// pre-norm encoder blocks; "bert" post-norm blocks (erf GELU).
Chain blocks(const std::string& model, bool fused, double p) {
  json layers = json::array();
  for (int i = 0; i < 3; ++i)
    layers.push_back(block("h." + std::to_string(i), model == "gpt", fused, p, model != "bert"));
  return mixed({{"format", "remat-chain/1"},
                {"name", model + (fused ? "-fused" : "-math") + (p > 0 ? "-dropout" : "")},
                {"input", {{"shape", {2, 40, 32}}, {"dtype", "float32"}}},
                {"layers", layers}});
}

// The small GPT: token_embedding, two causal blocks, lm_head (its own W or tied to wte), one label
// per token.
Chain gpt(bool fused, double p, bool tied) {
  json layers = json::array();
  layers.push_back(
      {{"name", "wte+wpe"}, {"kind", "token_embedding"}, {"vocab", 50}, {"positions", 40}, {"width", 32}, {"p", p}});
  for (int i = 0; i < 2; ++i) layers.push_back(block("h." + std::to_string(i), true, fused, p));
  layers.push_back({{"name", "ln_f+lm_head"}, {"kind", "lm_head"}, {"vocab", 50}, {"tied", tied}});
  return mixed({{"format", "remat-chain/1"},
                {"name", std::string("tiny-gpt") + (fused ? "-fused" : "-math") + (p > 0 ? "-dropout" : "") +
                             (tied ? "-tied" : "")},
                {"input", {{"shape", {2, 40}}, {"dtype", "float32"}}},
                {"layers", layers}});
}

// A tiny BERT: the embedding with token types and its LayerNorm, two post-norm blocks, the tanh
// pooler (cls_head: bfloat16 logits, the loss's seed from them).
Chain bert(bool fused, double p) {
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
  return mixed({{"format", "remat-chain/1"},
                {"name", std::string("tiny-bert") + (fused ? "-fused" : "-math") + (p > 0 ? "-dropout" : "")},
                {"input", {{"shape", {2, 16}}, {"dtype", "float32"}}},
                {"layers", layers}});
}

// A tiny ViT: patch_embedding (16x16, patch 4: 16 patches and the class token), two blocks, the
// head (LayerNorm, token 0, the linear).
Chain vit(bool fused, double p) {
  json layers = json::array();
  layers.push_back({{"name", "conv_proj+class_token+pos_embedding"},
                    {"kind", "patch_embedding"},
                    {"patch", 4},
                    {"width", 32},
                    {"p", p}});
  for (int i = 0; i < 2; ++i) layers.push_back(block("encoder_layer_" + std::to_string(i), false, fused, p));
  layers.push_back({{"name", "ln+heads"}, {"kind", "cls_head"}, {"out_features", 10}, {"epsilon", 1e-6}});
  return mixed({{"format", "remat-chain/1"},
                {"name", std::string("tiny-vit") + (fused ? "-fused" : "-math") + (p > 0 ? "-dropout" : "")},
                {"input", {{"shape", {2, 3, 16, 16}}, {"dtype", "float32"}}},
                {"layers", layers}});
}

class CudaTransformerHalfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status available = cudaDeviceAvailable();
    if (!available.isOk()) GTEST_SKIP() << "transformer kinds under bf16-mixed on the GPU: " << available.message();
  }

  static std::unique_ptr<CudaDevice> open() {
    auto device = createCudaDevice({});
    EXPECT_TRUE(device.isOk()) << device.status().message();
    return device.isOk() ? std::move(device).value() : nullptr;
  }

  template <typename Body>
  static void forEachVariant(Body body) {
    for (bool fused : {false, true})
      for (double p : {0.0, 0.1}) {
        for (const char* model : {"gpt", "vit", "bert"}) {
          const Chain chain = blocks(model, fused, p);
          SCOPED_TRACE(chain.name);
          body(chain);
        }
        for (const Chain& chain : {gpt(fused, p, false), gpt(fused, p, true), bert(fused, p), vit(fused, p)}) {
          SCOPED_TRACE(chain.name);
          body(chain);
        }
      }
  }
};

TEST_F(CudaTransformerHalfTest, EveryPlanMeasuresThePredictionAndReproducesStoreAll) {
  forEachVariant([](const Chain& built) {
    auto device = open();
    ASSERT_NE(device, nullptr);
    const Chain chain = testing::fittedTo(built, *device);
    ASSERT_EQ(chain.step.precision, Precision::Bf16Mixed);
    testing::expectEveryPlanReproducesStoreAll(chain, *device, 23);
  });
}

TEST_F(CudaTransformerHalfTest, GradientsAreTheCpusWithinBfloat16Precision) {
  forEachVariant([](const Chain& base) {
    const RunOptions options{.captureGradients = true};
    cpu::CpuDevice cpu;
    auto cpuRun = runPlan(testing::fittedTo(base, cpu), Plan{}, cpu, testing::seeded(9), options);
    ASSERT_TRUE(cpuRun.isOk()) << cpuRun.status().message();
    auto device = open();
    ASSERT_NE(device, nullptr);
    auto gpuRun = runPlan(testing::fittedTo(base, *device), Plan{}, *device, testing::seeded(9), options);
    ASSERT_TRUE(gpuRun.isOk()) << gpuRun.status().message();
    ASSERT_EQ(gpuRun->parameterGradients.size(), cpuRun->parameterGradients.size());
    for (std::size_t l = 0; l < base.size(); ++l) {
      const std::vector<float> g = asFloats(gpuRun->parameterGradients[l]);
      const std::vector<float> c = asFloats(cpuRun->parameterGradients[l]);
      ASSERT_EQ(g.size(), c.size()) << "layer " << l + 1;
      double scale = 0.0, diff = 0.0;
      for (std::size_t i = 0; i < c.size(); ++i) {
        scale = std::max(scale, std::fabs(static_cast<double>(c[i])));
        diff = std::max(diff, std::fabs(static_cast<double>(g[i]) - static_cast<double>(c[i])));
      }
      EXPECT_LE(diff, 3e-2 * scale + 1e-30) << "layer " << l + 1 << ": max |gpu - cpu| " << diff << ", max " << scale;
      EXPECT_GT(scale, 0.0) << "layer " << l + 1 << ": all-zero gradients test nothing";
    }
  });
}

}  // namespace
}  // namespace remat::gpu
