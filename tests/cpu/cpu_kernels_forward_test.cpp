// The CPU forward kernels against naive NCHW references written here in double precision, through
// the device's canonical upload / download: checks the semantics (stride, padding, groups, ceil
// mode, PyTorch's divisor and bin rules, flatten order) and the layout conversions at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <limits>

#include "cpu_harness.hpp"

namespace remat {
namespace {

using nlohmann::json;
using testing::ConvCase;
using testing::LayerHarness;
using testing::randomFloats;
using Shape4 = std::array<std::int64_t, 4>;

void expectNear(const std::vector<float>& got, const std::vector<double>& want, double tolerance = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tolerance * (1.0 + std::abs(want[i]))) << "element " << i;
}

std::vector<double> referenceConv(const ConvCase& c, std::int64_t oh, std::int64_t ow, const std::vector<float>& x,
                                  const std::vector<float>& p) {
  const auto [N, C, H, W] = c.in;
  const std::int64_t cig = C / c.groups, cog = c.out / c.groups, k = c.kernel;
  std::vector<double> y(N * c.out * oh * ow);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t co = 0; co < c.out; ++co)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double acc = c.bias ? p[c.out * cig * k * k + co] : 0.0;
          const std::int64_t g = co / cog;
          for (std::int64_t ci = 0; ci < cig; ++ci)
            for (std::int64_t kh = 0; kh < k; ++kh)
              for (std::int64_t kw = 0; kw < k; ++kw) {
                const std::int64_t ih = i * c.stride - c.padding + kh, iw = j * c.stride - c.padding + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += double(p[((co * cig + ci) * k + kh) * k + kw]) * x[((n * C + g * cig + ci) * H + ih) * W + iw];
              }
          y[((n * c.out + co) * oh + i) * ow + j] = acc;
        }
  return y;
}

TEST(CpuForward, Conv2dMatchesTheNchwReference) {
  const ConvCase cases[] = {
      {{2, 3, 7, 6}, 8, 3, 1, 1, 1, true},   {{2, 5, 9, 9}, 12, 3, 2, 1, 1, false},
      {{1, 4, 6, 6}, 6, 1, 1, 0, 2, true},   {{2, 8, 5, 5}, 8, 3, 1, 1, 8, true},  // depthwise
      {{2, 6, 8, 7}, 6, 3, 2, 1, 6, false},  {{2, 4, 11, 11}, 9, 5, 3, 2, 1, true},
      {{2, 16, 4, 4}, 20, 3, 1, 1, 4, true}, {{1, 3, 2, 2}, 13, 3, 1, 1, 1, true},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "in " << c.in[1] << "x" << c.in[2] << "x" << c.in[3] << " out " << c.out
                                      << " k" << c.kernel << " s" << c.stride << " p" << c.padding << " g" << c.groups);
    LayerHarness h(c.inputShape(), c.layer());
    ASSERT_EQ(h.error(), "");
    const auto x = randomFloats(h.inputCount(), 1);
    const auto p = randomFloats(h.paramCount(), 2);
    const Shape& out = h.chain().layers[1].outputShape;
    expectNear(h.forward(x, p), referenceConv(c, out[2], out[3], x, p));
  }
}

std::vector<double> referencePool(const Shape4& in, std::int64_t oh, std::int64_t ow, std::int64_t k, std::int64_t s,
                                  std::int64_t pad, bool max, const std::vector<float>& x) {
  const auto [N, C, H, W] = in;
  std::vector<double> y(N * C * oh * ow);
  for (std::int64_t nc = 0; nc < N * C; ++nc)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        const std::int64_t hs = i * s - pad, ws = j * s - pad;
        const std::int64_t he = std::min(hs + k, H + pad), we = std::min(ws + k, W + pad);
        const double divisor = double((he - hs) * (we - ws));  // count_include_pad
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (std::int64_t ih = std::max<std::int64_t>(hs, 0); ih < std::min(he, H); ++ih)
          for (std::int64_t iw = std::max<std::int64_t>(ws, 0); iw < std::min(we, W); ++iw) {
            const double v = x[(nc * H + ih) * W + iw];
            acc = max ? std::max(acc, v) : acc + v;
          }
        y[(nc * oh + i) * ow + j] = max ? acc : acc / divisor;
      }
  return y;
}

TEST(CpuForward, PoolsMatchPyTorchsRules) {
  struct Case {
    Shape4 in;
    std::int64_t k, s, p;
    bool ceil;
  };
  const Case cases[] = {{{2, 3, 8, 8}, 2, 2, 0, false},
                        {{2, 4, 7, 9}, 3, 2, 1, false},
                        {{1, 5, 7, 7}, 3, 2, 0, true},
                        {{2, 2, 6, 5}, 3, 2, 1, true},
                        {{2, 6, 13, 13}, 3, 2, 0, false}};
  for (const Case& c : cases)
    for (const char* kind : {"maxpool", "avgpool"}) {
      SCOPED_TRACE(::testing::Message() << kind << " k" << c.k << " s" << c.s << " p" << c.p << " ceil " << c.ceil);
      LayerHarness h({c.in.begin(), c.in.end()}, testing::poolLayer(kind, c.k, c.s, c.p, c.ceil));
      ASSERT_EQ(h.error(), "");
      const auto x = randomFloats(h.inputCount(), 3);
      const Shape& out = h.chain().layers[1].outputShape;
      expectNear(h.forward(x, {}), referencePool(c.in, out[2], out[3], c.k, c.s, c.p, kind[0] == 'm', x));
    }
}

TEST(CpuForward, AdaptiveAvgPoolUsesPyTorchsBins) {
  const Shape4 in = {2, 3, 5, 7};
  LayerHarness h({in.begin(), in.end()},
                 json{{"name", "gap"}, {"kind", "adaptive_avgpool"}, {"output_height", 3}, {"output_width", 4}});
  ASSERT_EQ(h.error(), "");
  const auto x = randomFloats(h.inputCount(), 4);
  std::vector<double> want(2 * 3 * 3 * 4);
  for (std::int64_t nc = 0; nc < 6; ++nc)
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 4; ++j) {
        const std::int64_t h0 = i * 5 / 3, h1 = ((i + 1) * 5 + 2) / 3, w0 = j * 7 / 4, w1 = ((j + 1) * 7 + 3) / 4;
        double acc = 0;
        for (std::int64_t a = h0; a < h1; ++a)
          for (std::int64_t b = w0; b < w1; ++b) acc += x[(nc * 5 + a) * 7 + b];
        want[(nc * 3 + i) * 4 + j] = acc / double((h1 - h0) * (w1 - w0));
      }
  expectNear(h.forward(x, {}), want);
}

TEST(CpuForward, LinearAfterFlattenUsesNchwOrder) {
  const Shape4 in = {3, 4, 3, 2};
  LayerHarness h({in.begin(), in.end()}, json{{"name", "fc"}, {"kind", "linear"}, {"out_features", 5}}, true);
  ASSERT_EQ(h.error(), "");
  const auto x = randomFloats(h.inputCount(), 5);
  const auto p = randomFloats(h.paramCount(), 6);
  std::vector<double> want(3 * 5);
  for (int n = 0; n < 3; ++n)
    for (int o = 0; o < 5; ++o) {
      double acc = p[5 * 24 + o];
      for (int i = 0; i < 24; ++i) acc += double(p[o * 24 + i]) * x[n * 24 + i];
      want[n * 5 + o] = acc;
    }
  expectNear(h.forward(x, p), want);
}

TEST(CpuForward, BatchNormNormalisesWithBatchStatistics) {
  for (bool flatten : {false, true}) {
    const Shape4 in = {3, 4, 2, 3};
    LayerHarness h({in.begin(), in.end()}, json{{"name", "bn"}, {"kind", "batchnorm"}}, flatten);
    ASSERT_EQ(h.error(), "");
    const std::int64_t channels = flatten ? 24 : 4, spatial = flatten ? 1 : 6;
    const auto x = randomFloats(h.inputCount(), 7, 3.0f);
    const auto p = randomFloats(h.paramCount(), 8);
    std::vector<double> want(x.size());
    for (std::int64_t c = 0; c < channels; ++c) {
      auto at = [&](std::int64_t n, std::int64_t s) { return (n * channels + c) * spatial + s; };
      double mean = 0, var = 0;
      for (std::int64_t n = 0; n < 3; ++n)
        for (std::int64_t s = 0; s < spatial; ++s) mean += x[at(n, s)];
      mean /= double(3 * spatial);
      for (std::int64_t n = 0; n < 3; ++n)
        for (std::int64_t s = 0; s < spatial; ++s) var += (x[at(n, s)] - mean) * (x[at(n, s)] - mean);
      var /= double(3 * spatial);
      for (std::int64_t n = 0; n < 3; ++n)
        for (std::int64_t s = 0; s < spatial; ++s)
          want[at(n, s)] = (x[at(n, s)] - mean) / std::sqrt(var + 1e-5) * p[c] + p[channels + c];
    }
    expectNear(h.forward(x, p), want, 1e-4);
    EXPECT_EQ(h.forward(x, p, false), h.forward(x, p, true)) << "discard and keep mode differ";
  }
}

TEST(CpuForward, DropoutMaskIsKeyedByCanonicalIndex) {
  for (bool flatten : {false, true}) {
    const Shape4 in = {2, 3, 4, 5};
    LayerHarness h({in.begin(), in.end()}, json{{"name", "drop"}, {"kind", "dropout"}, {"p", 0.3}}, flatten);
    ASSERT_EQ(h.error(), "");
    const auto x = randomFloats(h.inputCount(), 9);
    const std::uint64_t seed = 1234;
    const std::uint64_t key = rng::streamKey(seed, rng::Purpose::Dropout, 2);
    std::vector<double> want(x.size());
    std::size_t kept = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const bool keep = rng::uniform01(rng::at(key, i)) >= 0.3f;
      kept += keep;
      want[i] = keep ? double(x[i] * static_cast<float>(1.0 / 0.7)) : 0.0;
    }
    EXPECT_GT(kept, x.size() / 2);
    EXPECT_LT(kept, x.size());
    expectNear(h.forward(x, {}, true, seed), want, 0.0);
    EXPECT_EQ(h.forward(x, {}, false, seed), h.forward(x, {}, true, seed));
  }
}

TEST(CpuForward, ReluAndRelu6Clamp) {
  const Shape4 in = {2, 3, 2, 2};
  for (const char* kind : {"relu", "relu6"}) {
    LayerHarness h({in.begin(), in.end()}, json{{"name", "act"}, {"kind", kind}});
    ASSERT_EQ(h.error(), "");
    const auto x = randomFloats(h.inputCount(), 10, 9.0f);
    std::vector<double> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      want[i] = kind[4] == '6' ? std::clamp<double>(x[i], 0.0, 6.0) : std::max<double>(x[i], 0.0);
    expectNear(h.forward(x, {}), want, 0.0);
  }
}

}  // namespace
}  // namespace remat
