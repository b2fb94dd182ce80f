// Dropout (p > 0) in the transformer kinds on the CPU backend (issue 23). PyTorch's generator is not
// the counter-based one every backend here shares (counter_rng.hpp), so no PyTorch values can be
// compared; the masks are checked by what they must do instead: with parameters chosen so that a
// dropout site's input is known, x(l) shows the kept fraction (about 1 - p) and the kept elements
// scaled by exactly 1/(1-p); a dropped element's gradient is zero and a kept one's is scaled; math
// attention (mask kept in E) and fused attention (mask redrawn in the backward) draw the very same
// mask, so their values and gradients agree; a discard-mode forward (a recompute) redraws the same
// masks; another seed draws others. The every-plan footprint tests with p = 0.1 are in
// transformer_run_test.cpp and transformer_model_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cpu_harness.hpp"
#include "torch_reference.hpp"

namespace remat {
namespace {

using nlohmann::json;

constexpr std::int64_t kBatch = 2, kSeq = 80, kWidth = 32, kHidden = 128;  // 2 heads of 16
constexpr double kP = 0.1;
const float kScale = static_cast<float>(1.0 / (1.0 - kP));  // the kernels' scale

json block(bool causal, bool fused, double p = kP) {
  return {{"name", "h.0"},    {"kind", "transformer_block"}, {"heads", 2}, {"hidden", kHidden},
          {"causal", causal}, {"fused_attention", fused},    {"p", p}};
}

// The block's parameters in PyTorch's order (run_transformer.cpp): where each starts.
struct BlockParams {
  static constexpr std::size_t d = kWidth, H = kHidden;
  static constexpr std::size_t ln1 = 0, qkvW = 2 * d, qkvB = qkvW + 3 * d * d, projW = qkvB + 3 * d,
                               projB = projW + d * d, ln2 = projB + d, fc1W = ln2 + 2 * d, fc1B = fc1W + H * d,
                               fc2W = fc1B + H, fc2B = fc2W + d * H, count = fc2B + d;
};

double keptFraction(const std::vector<float>& y, const std::vector<float>& x) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < y.size(); ++i) kept += y[i] != x[i] ? 1 : 0;
  return static_cast<double>(kept) / static_cast<double>(y.size());
}

// Every weight zero and fc2's bias 1: the attention branch adds 0, the MLP branch adds its bias
// through the second residual dropout, so x(l) - x(l-1) is that dropout's mask times 1/(1-p).
TEST(TransformerDropout, ResidualDropoutKeepsOneMinusPScaledAndDroppedGetZeroGradient) {
  testing::LayerHarness h({kBatch, kSeq, kWidth}, block(true, true));
  ASSERT_EQ(h.error(), "");
  ASSERT_EQ(h.paramCount(), BlockParams::count);
  std::vector<float> params(BlockParams::count, 0.0f);
  std::fill_n(params.begin() + BlockParams::fc2B, kWidth, 1.0f);
  const std::vector<float> x = test::spread(h.inputCount(), 0.1, 2.0), pre = h.forward(x, params, false);
  const std::vector<float> y = h.forward(x, params);
  ASSERT_EQ(y, pre);  // a recompute (no E) draws the same mask
  std::size_t dropped = y.size(), kept = y.size();
  for (std::size_t i = 0; i < y.size(); ++i) {
    const float added = y[i] - x[i];
    ASSERT_TRUE(added == 0.0f || std::abs(added - kScale) < 1e-5f) << i << ": " << added;
    (added == 0.0f ? dropped : kept) = i;
  }
  EXPECT_NEAR(keptFraction(y, x), 1.0 - kP, 0.02);  // 5,120 draws: 5 standard deviations
  ASSERT_LT(dropped, y.size());
  ASSERT_LT(kept, y.size());
  // d(fc2's bias) = the column sum of mask * dy / (1 - p): one-hot dy on a dropped element gives 0.
  for (const auto& [at, want] : {std::pair{dropped, 0.0f}, std::pair{kept, kScale}}) {
    std::vector<float> dy(y.size(), 0.0f);
    dy[at] = 1.0f;
    (void)h.forward(x, params);
    const auto g = h.backward(dy);
    EXPECT_EQ(g.dparams[BlockParams::fc2B + at % kWidth], want) << at;
  }
}

// q = k = 0 (uniform probabilities), v = 1, the output projection the identity: each query's
// attention output is (its kept keys) / S / (1 - p) in every column of its head, under both rules
// alike; x(l) is that through the first residual dropout (x(l-1) = 0, the MLP adds 0).
TEST(TransformerDropout, AttentionDropsProbabilitiesAtRatePBothRulesAlike) {
  std::vector<float> params(BlockParams::count, 0.0f);
  std::fill_n(params.begin() + BlockParams::qkvB + 2 * kWidth, kWidth, 1.0f);
  for (std::int64_t c = 0; c < kWidth; ++c) params[BlockParams::projW + c * kWidth + c] = 1.0f;
  std::vector<std::vector<float>> outputs;
  for (bool fused : {false, true}) {
    testing::LayerHarness h({kBatch, kSeq, kWidth}, block(false, fused));
    ASSERT_EQ(h.error(), "");
    const std::vector<float> x(h.inputCount(), 0.0f);
    outputs.push_back(h.forward(x, params));
  }
  ASSERT_EQ(outputs[0].size(), outputs[1].size());
  double keptKeys = 0.0, queries = 0.0;
  for (std::size_t i = 0; i < outputs[0].size(); ++i) {
    ASSERT_NEAR(outputs[1][i], outputs[0][i], 1e-6) << i;
    if (outputs[0][i] == 0.0f) continue;  // dropped by the residual dropout
    const double keys = outputs[0][i] * kSeq / kScale / kScale;
    ASSERT_NEAR(keys, std::round(keys), 1e-3) << i;
    keptKeys += std::round(keys);
    queries += 1.0;
  }
  EXPECT_NEAR(keptFraction(outputs[0], std::vector<float>(outputs[0].size(), 0.0f)), 1.0 - kP, 0.02);
  // 25,600 distinct draws (each shows in the 16 columns of its head): 5 standard deviations
  EXPECT_NEAR(keptKeys / (queries * kSeq), 1.0 - kP, 0.01);
}

// Random parameters: math (mask and dropped probabilities in E) and fused (mask redrawn tile by
// tile in the backward) give the same values and gradients; another seed draws other masks.
TEST(TransformerDropout, FusedRedrawsMathsMaskInItsBackward) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "encoder");
    testing::LayerHarness math({kBatch, kSeq, kWidth}, block(causal, false)),
        fused({kBatch, kSeq, kWidth}, block(causal, true));
    ASSERT_EQ(math.error(), "");
    ASSERT_EQ(fused.error(), "");
    const std::vector<float> x = test::spread(math.inputCount(), 0.1, 2.0);
    const std::vector<float> params = test::spread(math.paramCount(), 0.4, 0.5);
    const std::vector<float> dy = test::spread(math.outputCount(), 0.7, 1.0);
    const std::vector<float> other = fused.forward(x, params, true, 6);
    const std::vector<float> y = fused.forward(x, params);
    EXPECT_NE(other, y);
    test::expectCloseToTorch(y, json(math.forward(x, params)), "y");
    const auto want = math.backward(dy), got = fused.backward(dy);
    test::expectCloseToTorch(got.dx, json(want.dx), "dx");
    test::expectCloseToTorch(got.dparams, json(want.dparams), "dparams");
  }
}

// ViT's patch embedding, batch 1: x(1) is the p = 0 output with elements dropped and the others
// scaled; the position table's gradient (dy = 1) is 0 exactly where x(1) was dropped.
TEST(TransformerDropout, PatchEmbeddingDropsAndZeroesTheDroppedGradients) {
  auto patch = [](double p) {
    return json{{"name", "patch"}, {"kind", "patch_embedding"}, {"patch", 4}, {"width", kWidth}, {"p", p}};
  };
  testing::LayerHarness plain({1, 3, 16, 16}, patch(0.0)), dropped({1, 3, 16, 16}, patch(kP));
  ASSERT_EQ(dropped.error(), "");
  const std::vector<float> x = test::spread(plain.inputCount(), 0.3, 1.0);
  const std::vector<float> params = test::spread(plain.paramCount(), 0.4, 0.5);
  const std::vector<float> y0 = plain.forward(x, params), y = dropped.forward(x, params);
  ASSERT_EQ(y.size(), y0.size());
  std::size_t kept = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    ASSERT_TRUE(y[i] == 0.0f || y[i] == y0[i] * kScale) << i;
    kept += y[i] != 0.0f ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(y.size()), 1.0 - kP, 0.05);  // 544 draws
  const auto g = dropped.backward(std::vector<float>(y.size(), 1.0f));
  const std::size_t positions = g.dparams.size() - y.size();  // the table is the last S x d
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_EQ(g.dparams[positions + i], y[i] != 0.0f ? kScale : 0.0f) << i;
}

}  // namespace
}  // namespace remat
