// Exactness by brute force: over every one of the 2^(n-1) plans, dp attains the least A, linear the
// least R (both of its methods), optimal the least E (the simulator's dynamicPeak), and each
// planner's reported value is what its plan scores.
//
// Every other chain has parameters and one of the 20 step modes (optimizer x foreach x gradients,
// memory-model.md section 11), so every mode is covered at every size; dp and linear stay exact for
// A and R, which know nothing of the step.
//
// Chains: 2,700 seeded random abstract chains from mixedRandomChainOptions (CNN-like, equal sizes,
// general with random flags; extras and workspaces switched independently), n = 1..16:
// 200 chains for each n = 1..12, 100 for n = 13..14, 50 for n = 15..16 (about 11 million plans).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "chain_helpers.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/random_chain.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/planners.hpp"

namespace remat {
namespace {

struct Minima {
  std::uint64_t e = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t a = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t r = std::numeric_limits<std::uint64_t>::max();
};

Minima bruteForce(const Chain& chain) {
  const std::size_t n = chain.size();
  Minima m;
  Plan plan;
  for (std::uint64_t mask = 0; mask < (std::uint64_t{1} << (n - 1)); ++mask) {
    plan.checkpoints.clear();
    for (std::size_t c = 1; c < n; ++c)
      if (mask >> (c - 1) & 1) plan.checkpoints.push_back(c);
    m.e = std::min(m.e, dynamicPeak(chain, plan));
    m.a = std::min(m.a, objectiveA(chain, plan));
    m.r = std::min(m.r, objectiveR(chain, plan));
  }
  return m;
}

void expectExact(const Chain& chain) {
  SCOPED_TRACE(chain.name + " (" + std::to_string(chain.size()) + " layers)");
  const Minima m = bruteForce(chain);
  auto dp = planDp(chain);
  auto optimal = planOptimal(chain);
  auto linear = planLinear(chain, {}, LinearMethod::Heap);
  EXPECT_EQ(decomposedPeak(chain, optimal->plan), m.e);
  ASSERT_TRUE(dp.isOk() && optimal.isOk() && linear.isOk());
  EXPECT_EQ(dp->objectiveBytes, m.a);
  EXPECT_EQ(objectiveA(chain, dp->plan), m.a);
  EXPECT_EQ(optimal->objectiveBytes, m.e);
  EXPECT_EQ(dynamicPeak(chain, optimal->plan), m.e);
  EXPECT_EQ(linear->objectiveBytes, m.r);
  EXPECT_EQ(objectiveR(chain, linear->plan), m.r);
  if (segmentEndCostsNondecreasing(chain)) {
    auto deque = planLinear(chain, {}, LinearMethod::MonotoneDeque);
    ASSERT_TRUE(deque.isOk());
    EXPECT_EQ(deque->objectiveBytes, m.r);
    EXPECT_EQ(objectiveR(chain, deque->plan), m.r);
  }
}

std::size_t chainsFor(std::size_t n) {
  if (n <= 12) return 200;
  if (n <= 14) return 100;
  return 50;
}

class BruteForce : public ::testing::TestWithParam<std::size_t> {};

TEST_P(BruteForce, ExactPlannersAttainTheMinima) {
  const std::size_t n = GetParam();
  std::size_t monotone = 0;
  for (std::uint64_t i = 0; i < chainsFor(n); ++i) {
    Chain chain = makeRandomChain(mixedRandomChainOptions(n, 100000 * n + i));
    // Every other chain gets parameters and one of the 20 step modes (memory-model.md section 11).
    if (i % 2 == 1) chain = testing::withParameters(chain, 100000 * n + i, i / 2);
    monotone += segmentEndCostsNondecreasing(chain);
    expectExact(chain);
    if (::testing::Test::HasFailure()) return;
  }
  // Both linear methods get exercised at every size.
  EXPECT_GT(monotone, 0u);
  if (n >= 4) {
    EXPECT_LT(monotone, chainsFor(n));
  }
}

INSTANTIATE_TEST_SUITE_P(LayerCounts, BruteForce, ::testing::Range<std::size_t>(1, 17));

// Every zoo model (batch 64, 224x224) cut to its first 16 chain layers (all of them when shorter:
// resnet18 has 14).
TEST(BruteForceZoo, EveryModelCutToSixteenLayers) {
  const auto models = zooModels();
  ASSERT_FALSE(models.empty()) << "the zoo lists no models";
  for (const ZooEntry& entry : models) {
    auto spec = zooChain(entry.name, ZooOptions{});
    ASSERT_TRUE(spec.isOk()) << entry.name << ": " << spec.status().message();
    auto full = buildChain(*spec);
    ASSERT_TRUE(full.isOk()) << entry.name << ": " << full.status().message();
    std::vector<LayerNumbers> layers;
    for (std::size_t l = 1; l <= std::min<std::size_t>(16, full->size()); ++l) layers.push_back(full->at(l));
    ASSERT_GE(layers.size(), 2u) << entry.name;
    expectExact(makeAbstractChain(entry.name + "[1..16]", full->inputBytes, layers));
  }
}

// Every precision (memory-model.md section 11.7) on real layers: ResNet-18, MobileNetV2 and VGG-11
// at batch 4 under fp32, bf16, fp16, bf16-mixed and fp16-mixed (input casts saved instead of the
// input, weight copies in E, half weight gradients in wb), each in a step mode, cut to their first
// 12 layers.
TEST(BruteForceZoo, EveryPrecision) {
  std::size_t mode = 0;
  for (const char* name : {"resnet18", "mobilenet_v2", "vgg11"}) {
    ZooOptions options;
    options.batch = 4;
    const Chain base = testing::zooBuilt(name, options);
    for (Precision precision : precisions()) {
      StepOptions step = testing::stepMode(mode++ % testing::kStepModeCount);
      step.precision = precision;
      auto full = withStepOptions(base, step);
      ASSERT_TRUE(full.isOk()) << name << ": " << full.status().message();
      std::vector<LayerNumbers> layers;
      for (std::size_t l = 1; l <= std::min<std::size_t>(12, full->size()); ++l) layers.push_back(full->at(l));
      Chain cut = makeAbstractChain(std::string(name) + " " + std::string(precisionName(precision)) + "[1..12]",
                                    full->inputBytes, layers);
      cut.step = full->step;
      expectExact(cut);
    }
  }
}

// GPT-2's tied head (its weight is layer 1's table) under all 30 step modes, small and long
// sequences: under on-backward gradients the table's G(1) is made by the head's B(n) and alive from
// there (memory-model.md 11.2), which the planners' gradient terms must follow (the real chain, not
// an abstract copy: the tie is in its spec).
TEST(BruteForceZoo, TiedGpt2UnderEveryStepMode) {
  for (std::int64_t sequence : {16, 512}) {
    const Chain base = testing::zooBuilt("gpt2", ZooOptions{.batch = 1, .sequence = sequence});
    for (std::size_t mode = 0; mode < testing::kStepModeCount; ++mode) {
      auto chain = withStepOptions(base, testing::stepMode(mode));
      ASSERT_TRUE(chain.isOk()) << chain.status().message();
      chain->name = "gpt2 S=" + std::to_string(sequence) + " " + describeStepOptions(chain->step);
      expectExact(*chain);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(BruteForceTotals, AtLeastTwoThousandChains) {
  std::size_t total = 0;
  for (std::size_t n = 1; n <= 16; ++n) total += chainsFor(n);
  EXPECT_GE(total, 2000u);
}

}  // namespace
}  // namespace remat
