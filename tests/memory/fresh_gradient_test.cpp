// GradMode::Static against GradMode::InPlace in the model (docs/memory-model.md 11.2): the same
// static block and op sequence, and each B(l) holds its fresh gradient, p(l) bytes, for the op only
// (PyTorch's backward makes it, AccumulateGrad adds it into .grad and frees it).
#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/random_chain.hpp"

namespace remat {
namespace {

Chain withGrads(const Chain& chain, GradMode grads, OptimizerKind optimizer = OptimizerKind::Sgd) {
  StepOptions step = chain.step;
  step.optimizer = optimizer;
  step.grads = grads;
  auto stepped = withStepOptions(chain, step);
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped.isOk() ? std::move(stepped).value() : chain;
}

// Op by op: B(l) is its fresh gradient larger under static, everything else (live-after included)
// is the same.
void expectFreshGradientOnly(const Chain& base, const Plan& plan) {
  const Chain inPlace = withGrads(base, GradMode::InPlace);
  const Chain fresh = withGrads(base, GradMode::Static);
  EXPECT_EQ(fresh.staticBytes(), inPlace.staticBytes());
  auto a = simulate(inPlace, plan);
  auto b = simulate(fresh, plan);
  ASSERT_TRUE(a.isOk() && b.isOk());
  ASSERT_EQ(a->timeline.entries.size(), b->timeline.entries.size());
  for (std::size_t i = 0; i < a->timeline.entries.size(); ++i) {
    const TimelineEntry& x = a->timeline.entries[i];
    const TimelineEntry& y = b->timeline.entries[i];
    ASSERT_EQ(x.op, y.op);
    const std::uint64_t extra = x.op.kind == OpKind::B ? freshGradientBytes(fresh, x.op.layer) : 0;
    EXPECT_EQ(y.footprintBytes, x.footprintBytes + extra) << base.name << " op " << i;
    EXPECT_EQ(y.liveAfterBytes, x.liveAfterBytes) << base.name << " op " << i;
  }
  EXPECT_EQ(b->dynamicPeakBytes, dynamicPeak(fresh, plan));
}

TEST(FreshGradient, ZooModelsHoldEachLayersGradientDuringItsBackward) {
  for (const char* name : {"resnet18", "vgg11", "mobilenet_v2"}) {
    const Chain chain = testing::zooBuilt(name, ZooOptions{.batch = 2, .resolution = 32, .numClasses = 10});
    ASSERT_GT(chain.size(), 4u);
    expectFreshGradientOnly(chain, Plan{});
    expectFreshGradientOnly(chain, Plan{{2, chain.size() / 2}});
  }
}

// A block's fresh gradient is its largest inner op's parameters (PyTorch adds and frees each
// inner op's before the next op's backward); a one-op layer's is all of p(l); none in other modes.
TEST(FreshGradient, ABlockHoldsItsLargestInnerOpsGradient) {
  const Chain base = testing::zooBuilt("resnet18", ZooOptions{.batch = 2, .resolution = 32, .numClasses = 10});
  const Chain fresh = withGrads(base, GradMode::Static);
  std::size_t blocks = 0;
  for (std::size_t l = 1; l <= fresh.size(); ++l) {
    const ChainLayer& layer = fresh.layers[l - 1];
    if (layer.kind != LayerKind::BasicBlock) {
      EXPECT_EQ(freshGradientBytes(fresh, l), layer.numbers.paramBytes) << layer.name;
      continue;
    }
    ++blocks;
    EXPECT_LT(freshGradientBytes(fresh, l), layer.numbers.paramBytes) << layer.name;
  }
  EXPECT_EQ(blocks, 8u);
  // layer4.1: two 3x3 convolutions of 512 x 512 x 9 weights and two batch norms; the largest op is a conv.
  const std::size_t layer41 = fresh.size() - 2;
  ASSERT_EQ(fresh.layers[layer41 - 1].name, "layer4.1");
  EXPECT_EQ(freshGradientBytes(fresh, layer41), 512ull * 512 * 9 * 4);
  EXPECT_EQ(freshGradientBytes(withGrads(base, GradMode::OnBackward), layer41), 0u);
  EXPECT_EQ(freshGradientBytes(withGrads(base, GradMode::InPlace), layer41), 0u);
  // Under bf16-mixed the fresh gradient is the float32 master's.
  auto mixed = withStepOptions(
      fresh, {.optimizer = OptimizerKind::Sgd, .grads = GradMode::Static, .precision = Precision::Bf16Mixed});
  ASSERT_TRUE(mixed.isOk()) << mixed.status().message();
  EXPECT_EQ(freshGradientBytes(*mixed, layer41), 512ull * 512 * 9 * 4);
  auto pure = withStepOptions(
      fresh, {.optimizer = OptimizerKind::Sgd, .grads = GradMode::Static, .precision = Precision::Bf16});
  ASSERT_TRUE(pure.isOk()) << pure.status().message();
  EXPECT_EQ(freshGradientBytes(*pure, layer41), 512ull * 512 * 9 * 2);
}

TEST(FreshGradient, RandomAbstractChains) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Chain plain = makeRandomChain(mixedRandomChainOptions(4 + seed % 7, 900 + seed));
    const Chain chain = testing::withParameters(plain, seed, 0);
    expectFreshGradientOnly(chain, Plan{});
    if (chain.size() > 2) expectFreshGradientOnly(chain, Plan{{chain.size() / 2}});
  }
}

// VGG-11's classifier.0 (392 MiB of float32 weights) dwarfs its activations at batch 2: under
// static its backward is the step's peak, which the in-place model puts elsewhere.
TEST(FreshGradient, MovesVggsPeakToTheClassifiersBackward) {
  const Chain base = testing::zooBuilt("vgg11", ZooOptions{.batch = 2, .numClasses = 1000});
  const Chain fresh = withGrads(base, GradMode::Static, OptimizerKind::None);
  auto sim = simulate(fresh, Plan{});
  ASSERT_TRUE(sim.isOk());
  const Op peakOp = sim->timeline.entries[sim->peakOpIndex].op;
  EXPECT_EQ(peakOp.kind, OpKind::B);
  EXPECT_EQ(fresh.layers[peakOp.layer - 1].name, "classifier.0");
}

// The liveness trace names the fresh gradient dW(l), written and freed by B(l); under in-place
// there is no weight-gradient tensor at all.
TEST(FreshGradient, TraceNamesItAndFreesItAfterTheBackward) {
  const Chain base = testing::zooBuilt("resnet18", ZooOptions{.batch = 2, .resolution = 32, .numClasses = 10});
  const LivenessTrace inPlace = traceLiveness(withGrads(base, GradMode::InPlace), Plan{});
  for (const TensorLife& t : inPlace.tensors) EXPECT_NE(t.kind, TensorLife::Kind::WeightGradient);
  const Chain fresh = withGrads(base, GradMode::Static);
  const LivenessTrace trace = traceLiveness(fresh, Plan{});
  std::size_t count = 0;
  for (const TensorLife& t : trace.tensors) {
    if (t.kind != TensorLife::Kind::WeightGradient) continue;
    ++count;
    EXPECT_EQ(trace.ops[t.writer], (Op{OpKind::B, t.layer}));
    EXPECT_EQ(t.freedAfter(), t.writer) << tensorName(t);
    EXPECT_EQ(t.bytes, freshGradientBytes(fresh, t.layer));
  }
  std::size_t withParams = 0;
  for (std::size_t l = 1; l <= fresh.size(); ++l) withParams += fresh.at(l).paramBytes > 0;
  EXPECT_EQ(count, withParams);
}

TEST(FreshGradient, NamesAndParsesTheThreeModes) {
  for (GradMode mode : gradModes()) EXPECT_EQ(parseGradMode(gradModeName(mode)).value(), mode);
  EXPECT_EQ(gradModeName(StepOptions{}.grads), "in-place");  // core's default: the paper's model
  EXPECT_TRUE(hasStaticGradients(GradMode::Static));
  EXPECT_TRUE(hasStaticGradients(GradMode::InPlace));
  EXPECT_FALSE(hasStaticGradients(GradMode::OnBackward));
  auto bad = parseGradMode("fresh");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "unknown gradient mode 'fresh' (valid: in-place, on-backward, static)");
}

}  // namespace
}  // namespace remat
