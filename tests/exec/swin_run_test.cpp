// Swin Transformer (issue 23) on the CPU backend: a tiny torchvision SwinTransformer as a chain
// (swin_embedding, shifted-window blocks, patch_merging, swin_head) gives PyTorch's parameter
// gradients of its cross entropy (scripts/make-swin-reference.py: an unpadded 32x32 image and a
// 40x40 one whose every stage pads and shifts), and runs store-all and every planner's plan with
// the measured footprint equal to the model's prediction op by op and store-all's gradients bit for
// bit: without and with stochastic depth, with one window in the whole batch (N * windows = 1,
// where E keeps qkv itself), and zoo swin_t at its smallest resolution.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chain_driver.hpp"
#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/zoo.hpp"
#include "small_chains.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

using testing::swinBlock;
using testing::tinySwin;

Chain parsed(const json& j) {
  auto chain = parseChain(j.dump(), "tiny-swin");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

// One store-all step with the reference's parameters: every layer's gradients are PyTorch's.
void checkAgainstTorch(const std::string& variant) {
  const json& ref = test::torchReference("swin")["models"][variant];
  const double paramScale = test::torchReference("swin")["param_scale"].get<double>();
  const auto image = ref["image"].get<std::int64_t>();
  const Chain chain = parsed(tinySwin(2, image));
  testing::ChainDriver driver(chain);
  ASSERT_EQ(driver.error(), "");
  const auto counts = ref["layer_params"].get<std::vector<std::size_t>>();
  std::size_t total = 0;
  for (std::size_t count : counts) total += count;
  const std::vector<float> flat = test::spread(total, 0.4, paramScale);  // the script's set_parameters
  std::vector<std::vector<float>> params;
  std::size_t at = 0;
  for (std::size_t count : counts) {
    params.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(at),
                        flat.begin() + static_cast<std::ptrdiff_t>(at + count));
    at += count;
  }
  ASSERT_EQ(params.size(), chain.size());
  const auto x0 = test::spread(static_cast<std::size_t>(2 * 3 * image * image), 0.3, 1.0);
  const auto grads = driver.step(x0, params, ref["labels"].get<std::vector<LabelIndex>>());
  ASSERT_EQ(grads.size(), chain.size());
  for (std::size_t l = 0; l < grads.size(); ++l)
    test::expectCloseToTorch(grads[l], ref["dparams"][l], chain.layers[l].name + " dparams");
}

TEST(TinySwinVsTorch, UnpaddedGradientsMatchPyTorch) { checkAgainstTorch("image32"); }
TEST(TinySwinVsTorch, PaddedAndShiftedEverywhereGradientsMatchPyTorch) { checkAgainstTorch("image40"); }

void expectEveryPlanAsPredicted(const Chain& built) {
  // One thread: ctest runs test programs side by side.
  cpu::CpuDevice device({.poisonMemory = true, .threads = 1});
  const Chain chain = testing::fittedTo(built, device);
  testing::expectEveryPlanReproducesStoreAll(chain, device, 23);
}

TEST(TinySwinRun, MeasuredFootprintEqualsPredictionUnderEveryPlan) {
  expectEveryPlanAsPredicted(parsed(tinySwin(2, 40)));
}

// Stochastic depth keeps its two [N] noises in E; a recompute draws the same noise.
TEST(TinySwinRun, WithStochasticDepthMeasuredFootprintEqualsPredictionUnderEveryPlan) {
  expectEveryPlanAsPredicted(parsed(tinySwin(2, 40, 0.3)));
}

// Batch 1 at 32x32: stage 2 is one 4x4 window in the whole batch, where E keeps qkv itself
// (one [Tp, C] more than the copies, memory-model.md 12.7).
TEST(TinySwinRun, OneWindowInTheBatchKeepsQkvAsPredicted) {
  const Chain chain = parsed(tinySwin(1, 32));
  bool keepsQkv = false;
  for (const SavedPart& part : chain.layers[4].extraParts)
    keepsQkv = keepsQkv || part.name == "attention: windowed input, q * scale, qkv, merged heads";
  EXPECT_TRUE(keepsQkv);
  expectEveryPlanAsPredicted(chain);
}

// A Swin block after a convolution would read an NCHW map as [N, H, W, C]: refused at prepare,
// naming the layer, before anything runs.
TEST(SwinRun, BlockAfterAConvolutionIsRefusedByName) {
  const json j = {
      {"format", "remat-chain/1"},
      {"name", "conv-then-swin"},
      {"input", {{"shape", {1, 3, 8, 8}}, {"dtype", "float32"}}},
      {"layers",
       {{{"name", "conv"}, {"kind", "conv2d"}, {"out_channels", 4}, {"kernel", 1}}, swinBlock("b", 2, 8, 0, 0.0)}}};
  const Chain chain = parsed(j);
  cpu::CpuDevice device({.threads = 1});
  const Status st = device.prepare(chain);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("layer 2 ('b', swin_block)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not on a convolution's NCHW map"), std::string::npos) << st.message();
}

// torchvision's swin_t (28,288,354 parameters) at its smallest resolution, batch 1: 49 windows in
// stage 1, padded stages 2 and 3, one window in stage 4 (interpreter_zoo_test runs it at batch 2
// under every planner); store-all, optimal's and linear's plans.
TEST(ZooSwinRun, SwinTStoreAllAndOptimalAsPredicted) {
  auto spec = zooChain("swin_t", {.batch = 1, .resolution = 196, .numClasses = 10});
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  auto built = buildChain(*spec);
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device({.threads = 1});
  const Chain chain = testing::fittedTo(*built, device);
  testing::expectEveryPlanReproducesStoreAll(chain, device, 5, {"optimal", "linear"});
}

}  // namespace
}  // namespace remat
