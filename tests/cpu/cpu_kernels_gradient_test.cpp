// Finite-difference checks of every CPU backward kernel on tiny shapes: for L = sum(y * r) with a
// fixed random r, the input and parameter gradients the backward returns for d(2) = r match central
// differences of L. Tolerance: the forward runs in float32, so L carries rounding of about
// 1e-7 * sqrt(outputs); divided by 2 * step that stays well under the 2e-3 * scale allowed, while a
// wrong gradient (a missing term, a transposed index) is off by O(scale).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "cpu_harness.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::LayerHarness;
using testing::randomFloats;

std::vector<std::size_t> sampleIndices(std::size_t count, std::size_t most = 48) {
  std::vector<std::size_t> out;
  if (count == 0) return out;
  const std::size_t stride = std::max<std::size_t>(1, count / most);
  for (std::size_t i = 0; i < count; i += stride) out.push_back(i);
  if (out.back() != count - 1) out.push_back(count - 1);
  return out;
}

double loss(LayerHarness& h, const std::vector<float>& x, const std::vector<float>& p, const std::vector<float>& r) {
  const std::vector<float> y = h.forward(x, p, /*keep=*/false);
  double sum = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) sum += double(y[i]) * r[i];
  return sum;
}

void checkGradients(LayerHarness& h, std::vector<float> x, std::vector<float> p, float step = 1e-2f) {
  ASSERT_EQ(h.error(), "");
  const std::vector<float> r = randomFloats(h.outputCount(), 77);
  h.forward(x, p, /*keep=*/true);
  const LayerHarness::Gradients g = h.backward(r);
  ASSERT_EQ(g.dx.size(), x.size());
  ASSERT_EQ(g.dparams.size(), p.size());
  auto check = [&](std::vector<float>& values, const std::vector<float>& analytic, const char* what) {
    double scale = 1.0;
    for (float a : analytic) scale = std::max(scale, double(std::abs(a)));
    std::size_t checked = 0;
    for (std::size_t i : sampleIndices(values.size())) {
      const float saved = values[i];
      values[i] = saved + step;
      const double plus = loss(h, x, p, r);
      values[i] = saved - step;
      const double minus = loss(h, x, p, r);
      values[i] = saved;
      const double numeric = (plus - minus) / (2.0 * double(step));
      EXPECT_NEAR(analytic[i], numeric, 2e-3 * scale + 1e-2 * std::abs(numeric)) << what << "[" << i << "]";
      ++checked;
    }
    EXPECT_EQ(checked > 0, !values.empty());
  };
  check(x, g.dx, "dx");
  check(p, g.dparams, "dparams");
}

// Values at least `gap` apart and at least gap / 2 from the kinks at 0 and 6: finite differences
// never cross a kink or change a max-pool winner.
std::vector<float> spreadValues(std::size_t count, std::uint64_t seed, float gap) {
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  const std::uint64_t key = rng::streamKey(seed, rng::Purpose::Input, 7);
  for (std::size_t i = count; i > 1; --i) std::swap(order[i - 1], order[rng::at(key, i) % i]);
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = (float(order[i]) - float(count) / 2.0f + 0.5f) * gap;
  return v;
}

TEST(CpuGradient, Conv2d) {
  const testing::ConvCase cases[] = {{{2, 3, 5, 5}, 4, 3, 1, 1, 1, true},  {{2, 4, 6, 5}, 6, 3, 2, 1, 2, false},
                                     {{2, 5, 4, 4}, 5, 3, 1, 1, 5, true},  {{1, 8, 5, 5}, 12, 1, 1, 0, 1, true},
                                     {{2, 6, 7, 7}, 6, 3, 2, 1, 6, false}, {{1, 3, 7, 7}, 9, 5, 2, 2, 1, true}};
  for (const testing::ConvCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "C" << c.in[1] << " K" << c.out << " k" << c.kernel << " s" << c.stride << " g"
                                      << c.groups);
    LayerHarness h(c.inputShape(), c.layer());
    checkGradients(h, randomFloats(h.inputCount(), 1), randomFloats(h.paramCount(), 2));
  }
}

// Depthwise 5x5 and 7x7 (EfficientNet's, MobileNetV3's): oneDNN 2.6 has no depthwise weight-gradient
// kernel for them, so ours runs (kernels_depthwise.cpp): channels in blocks of 16 with a partial
// block (20, 18, 35), stride 2, padding wider than the input's edge, with and without bias.
TEST(CpuGradient, DepthwiseConv2dWithOwnWeightGradient) {
  const testing::ConvCase cases[] = {{{2, 20, 6, 6}, 20, 5, 1, 2, 20, true},
                                     {{1, 18, 7, 7}, 18, 5, 2, 2, 18, false},
                                     {{1, 35, 5, 4}, 35, 7, 1, 3, 35, true},
                                     {{2, 16, 3, 3}, 16, 5, 2, 2, 16, false}};
  for (const testing::ConvCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "C" << c.in[1] << " k" << c.kernel << " s" << c.stride);
    LayerHarness h(c.inputShape(), c.layer());
    checkGradients(h, randomFloats(h.inputCount(), 3), randomFloats(h.paramCount(), 4));
  }
}

TEST(CpuGradient, ReluRelu6) {
  for (const char* kind : {"relu", "relu6"}) {
    LayerHarness h({2, 3, 4, 4}, json{{"name", "act"}, {"kind", kind}});
    std::vector<float> x = spreadValues(h.inputCount(), 3, 0.125f);  // -6 .. 6, away from 0 and 6
    for (float& v : x) v *= 1.3f;                                    // some above 6
    checkGradients(h, x, {});
  }
}

TEST(CpuGradient, Pools) {
  for (const char* kind : {"maxpool", "avgpool"})
    for (int padding : {0, 1})
      for (bool ceil : {false, true}) {
        SCOPED_TRACE(::testing::Message() << kind << " p" << padding << " ceil " << ceil);
        LayerHarness h({2, 3, 7, 6}, testing::poolLayer(kind, 3, 2, padding, ceil));
        checkGradients(h, spreadValues(h.inputCount(), 4, 0.05f), {});
      }
  LayerHarness h({2, 3, 5, 7},
                 json{{"name", "gap"}, {"kind", "adaptive_avgpool"}, {"output_height", 2}, {"output_width", 3}});
  checkGradients(h, randomFloats(h.inputCount(), 5), {});
}

TEST(CpuGradient, BatchNorm) {
  for (bool flatten : {false, true}) {
    LayerHarness h({4, 3, 3, 2}, json{{"name", "bn"}, {"kind", "batchnorm"}}, flatten);
    checkGradients(h, randomFloats(h.inputCount(), 6, 2.0f), randomFloats(h.paramCount(), 7), 1e-2f);
  }
}

TEST(CpuGradient, LinearAndDropout) {
  LayerHarness linear({3, 2, 3, 2}, json{{"name", "fc"}, {"kind", "linear"}, {"out_features", 5}}, true);
  checkGradients(linear, randomFloats(linear.inputCount(), 8), randomFloats(linear.paramCount(), 9));
  LayerHarness noBias({3, 7}, json{{"name", "fc"}, {"kind", "linear"}, {"out_features", 4}, {"bias", false}});
  checkGradients(noBias, randomFloats(noBias.inputCount(), 10), randomFloats(noBias.paramCount(), 11));
  for (bool flatten : {false, true}) {
    LayerHarness drop({2, 3, 3, 3}, json{{"name", "drop"}, {"kind", "dropout"}, {"p", 0.4}}, flatten);
    checkGradients(drop, randomFloats(drop.inputCount(), 12), {});
  }
}

TEST(CpuGradient, ResidualBlocks) {
  const json blocks[] = {
      {{"name", "b"}, {"kind", "basic_block"}, {"out_channels", 4}, {"stride", 1}},
      {{"name", "b"}, {"kind", "basic_block"}, {"out_channels", 6}, {"stride", 2}},
      {{"name", "b"}, {"kind", "bottleneck"}, {"out_channels", 8}, {"width", 2}, {"stride", 1}},
      {{"name", "b"}, {"kind", "bottleneck"}, {"out_channels", 8}, {"width", 3}, {"stride", 2}},
      {{"name", "b"}, {"kind", "inverted_residual"}, {"out_channels", 4}, {"expand_ratio", 1}, {"stride", 1}},
      {{"name", "b"}, {"kind", "inverted_residual"}, {"out_channels", 4}, {"expand_ratio", 3}, {"stride", 1}},
      {{"name", "b"}, {"kind", "inverted_residual"}, {"out_channels", 5}, {"expand_ratio", 2}, {"stride", 2}},
  };
  for (const json& block : blocks) {
    SCOPED_TRACE(block.dump());
    LayerHarness h({2, 4, 5, 5}, block);
    ASSERT_EQ(h.error(), "");
    EXPECT_GT(h.numbers().fwdWorkspaceBytes, 0u);
    EXPECT_GT(h.numbers().extraBytes, 0u);
    checkGradients(h, randomFloats(h.inputCount(), 13), randomFloats(h.paramCount(), 14, 0.7f), 1e-3f);
  }
}

// Blocks with listed inner ops (imported models): concatenations (SqueezeNet's Fire, DenseNet's
// dense layers, an input concatenated with itself), convs with a bias, an add that reads its
// inputs the other way round. (No activation right after a batch norm: its outputs crowd the kink
// at 0, where a finite difference is not the gradient.)
TEST(CpuGradient, ListedBlocks) {
  const json conv = {{"kind", "conv2d"}, {"out_channels", 3}, {"kernel", 3}, {"padding", 1}};
  auto with = [](json op, std::string name, json inputs) {
    op["name"] = std::move(name);
    op["inputs"] = std::move(inputs);
    return op;
  };
  const json blocks[] = {
      {{"name", "fire"},
       {"kind", "block"},
       {"ops",
        {with(conv, "e1", {0}),
         {{"name", "r1"}, {"kind", "relu"}},
         with(conv, "e3", {0}),
         {{"name", "r3"}, {"kind", "relu"}},
         {{"name", "cat"}, {"kind", "concat"}, {"inputs", {2, 4}}}}}},
      {{"name", "dense"},
       {"kind", "block"},
       {"ops",
        {{{"name", "n1"}, {"kind", "batchnorm"}},
         with(conv, "c1", {1}),
         {{"name", "cat"}, {"kind", "concat"}, {"inputs", {0, 2, 0}}},
         {{"name", "n2"}, {"kind", "batchnorm"}},
         {{"name", "cat2"}, {"kind", "concat"}, {"inputs", {4, 2}}}}}},
      {{"name", "res"},
       {"kind", "block"},
       {"ops",
        {with(conv, "c1", {0}),
         {{"name", "r"}, {"kind", "relu"}},
         with(conv, "c2", {2}),
         {{"name", "add"}, {"kind", "add"}, {"inputs", {0, 3}}},
         {{"name", "r2"}, {"kind", "relu"}}}}},
  };
  for (const json& block : blocks) {
    SCOPED_TRACE(block.dump());
    LayerHarness h({2, 3, 4, 4}, block);
    ASSERT_EQ(h.error(), "");
    checkGradients(h, randomFloats(h.inputCount(), 15), randomFloats(h.paramCount(), 16, 0.7f), 1e-3f);
  }
}

// The SEED op: softmax cross-entropy's gradient against a double-precision host computation, for
// 2-D logits and for 4-D (channels-last inside the device) logits with canonical class labels.
TEST(CpuGradient, SoftmaxCrossEntropySeed) {
  const json lasts[] = {json{{"name", "fc"}, {"kind", "linear"}, {"out_features", 7}},
                        json{{"name", "conv"}, {"kind", "conv2d"}, {"out_channels", 3}, {"kernel", 1}}};
  for (const json& last : lasts) {
    LayerHarness h({3, 4, 2, 2}, last, last["kind"] == "linear");
    ASSERT_EQ(h.error(), "");
    cpu::CpuDevice& d = h.device();
    const std::size_t k = h.outputCount() / 3;
    const std::vector<float> logits = randomFloats(h.outputCount(), 15, 3.0f);
    const std::vector<LabelIndex> labels = {1, static_cast<LabelIndex>(k - 1), 4};  // int64, as PyTorch's
    auto logitsBuffer = d.allocator().allocate(logits.size() * 4);
    auto gradBuffer = d.allocator().allocate(logits.size() * 4);
    auto labelBuffer = d.allocator().allocate(3 * sizeof(LabelIndex));
    ASSERT_TRUE(logitsBuffer && gradBuffer && labelBuffer);
    ASSERT_TRUE(d.upload(*logitsBuffer, TensorRole::Activation, 2, testing::toBytes(logits)).isOk());
    std::vector<std::byte> labelBytes(3 * sizeof(LabelIndex));
    std::memcpy(labelBytes.data(), labels.data(), labelBytes.size());
    ASSERT_TRUE(d.upload(*labelBuffer, TensorRole::Labels, 0, labelBytes).isOk());
    Status st = d.lossSeed({*logitsBuffer, *labelBuffer, *gradBuffer, 0});
    ASSERT_TRUE(st.isOk()) << st.message();
    std::vector<std::byte> gradBytes(logits.size() * 4);
    ASSERT_TRUE(d.download(*gradBuffer, TensorRole::Activation, 2, gradBytes).isOk());
    const std::vector<float> grad = testing::toFloats(gradBytes);
    for (std::size_t n = 0; n < 3; ++n) {
      double maxLogit = -1e30, sum = 0;
      for (std::size_t i = 0; i < k; ++i) maxLogit = std::max<double>(maxLogit, logits[n * k + i]);
      for (std::size_t i = 0; i < k; ++i) sum += std::exp(logits[n * k + i] - maxLogit);
      for (std::size_t i = 0; i < k; ++i) {
        const double want = (std::exp(logits[n * k + i] - maxLogit) / sum - (int(i) == labels[n] ? 1.0 : 0.0)) / 3.0;
        EXPECT_NEAR(grad[n * k + i], want, 1e-6) << "sample " << n << " class " << i;
      }
    }
    // A label outside the classes is an error, not a wild write.
    std::vector<LabelIndex> bad = {0, static_cast<LabelIndex>(k), 0};
    std::memcpy(labelBytes.data(), bad.data(), labelBytes.size());
    ASSERT_TRUE(d.upload(*labelBuffer, TensorRole::Labels, 0, labelBytes).isOk());
    EXPECT_EQ(d.lossSeed({*logitsBuffer, *labelBuffer, *gradBuffer, 0}).code(), ErrorCode::InvalidInput);
    for (auto* b : {&logitsBuffer, &gradBuffer, &labelBuffer}) ASSERT_TRUE(d.allocator().release(**b).isOk());
  }
}

}  // namespace
}  // namespace remat
