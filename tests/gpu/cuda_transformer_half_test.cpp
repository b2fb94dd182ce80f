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
#include <string>

#include "cuda_run_helpers.hpp"
#include "executor_helpers.hpp"
#include "gpu_test_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/gpu/cuda_device.hpp"
#include "remat/model/precision.hpp"
#include "tiny_transformer_chains.hpp"

namespace remat::gpu {
namespace {

constexpr const char* kWhere = "cuda_transformer_half_test.cpp";

// Batch 2, a sequence of 40, width 32, three blocks (tiny::blockLayers).
Chain blocks(const std::string& model, bool fused, double p) {
  return tiny::mixed(
      tiny::chainJson(tiny::variantName(model, fused, p), {2, 40, 32}, tiny::blockLayers(model, fused, p)), kWhere);
}

Chain gpt(bool fused, double p, bool tied) {
  const std::string name = tiny::variantName("tiny-gpt", fused, p) + (tied ? "-tied" : "");
  return tiny::mixed(tiny::chainJson(name, {2, 40}, tiny::gptLayers(fused, p, tied)), kWhere);
}

Chain bert(bool fused, double p) {
  return tiny::mixed(tiny::chainJson(tiny::variantName("tiny-bert", fused, p), {2, 16}, tiny::bertLayers(fused, p)),
                     kWhere);
}

Chain vit(bool fused, double p) {
  return tiny::mixed(
      tiny::chainJson(tiny::variantName("tiny-vit", fused, p), {2, 3, 16, 16}, tiny::vitLayers(fused, p)), kWhere);
}

class CudaTransformerHalfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status available = cudaDeviceAvailable();
    if (!available.isOk()) GTEST_SKIP() << "transformer kinds under bf16-mixed on the GPU: " << available.message();
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
    auto device = openCudaDevice();
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
    auto device = openCudaDevice();
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
