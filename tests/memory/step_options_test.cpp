// The whole step (docs/memory-model.md section 11): weight gradients allocated by their layer's B
// or static, the optimizer's state in static memory, and the STEP op with its temporaries, on a
// chain small enough to check by hand; the options' names and their errors.
#include "remat/model/step_options.hpp"

#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/simulator.hpp"

namespace remat {
namespace {

using testing::numbers;

// a = 100, 200, 50 (conv-like: in, not out), p = 40, 0, 12; a(0) = 10.
Chain handChain(StepOptions step) {
  std::vector<LayerNumbers> layers = {numbers(100), numbers(200), numbers(50)};
  layers[0].paramBytes = 40;
  layers[2].paramBytes = 12;
  Chain chain = makeAbstractChain("hand", 10, layers);
  chain.step = step;
  return chain;
}

struct Row {
  OpKind kind;
  std::size_t layer;
  std::uint64_t footprint;
  std::uint64_t liveAfter;
};

void expectTimeline(const Chain& chain, const std::vector<Row>& rows) {
  auto sim = simulate(chain, Plan{});
  ASSERT_TRUE(sim.isOk()) << sim.status().message();
  ASSERT_EQ(sim->timeline.entries.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const TimelineEntry& e = sim->timeline.entries[i];
    SCOPED_TRACE("op " + std::to_string(i) + " " + opLabel(e.op));
    EXPECT_EQ(e.op, (Op{rows[i].kind, rows[i].layer}));
    EXPECT_EQ(e.footprintBytes, rows[i].footprint);
    EXPECT_EQ(e.liveAfterBytes, rows[i].liveAfter);
  }
}

TEST(StepOptions, AdamWForeachGradientsOnBackward) {
  const Chain chain = handChain({OptimizerKind::AdamW, true, GradMode::OnBackward});
  // G(3) (12) appears at B(3), G(1) (40) at B(1); STEP holds both plus the square roots of every
  // parameter (52) and frees everything.
  expectTimeline(chain, {{OpKind::F, 1, 100, 100},
                         {OpKind::F, 2, 300, 300},
                         {OpKind::F, 3, 350, 350},
                         {OpKind::Seed, 0, 400, 350},
                         {OpKind::B, 3, 562, 312},
                         {OpKind::B, 2, 412, 112},
                         {OpKind::B, 1, 152, 52},
                         {OpKind::Step, 0, 104, 0}});
  const StaticBreakdown b = staticBreakdown(chain);
  EXPECT_EQ(b.inputBytes, 10u);
  EXPECT_EQ(b.weightBytes, 52u);
  EXPECT_EQ(b.gradientBytes, 0u);
  EXPECT_EQ(b.optimizerStateBytes, 104u);  // exp_avg and exp_avg_sq
  EXPECT_EQ(b.labelBytes, 0u);             // an abstract last layer: no loss, no labels
  EXPECT_EQ(chain.staticBytes(), 166u);
  EXPECT_EQ(dynamicPeak(chain, Plan{}), 562u);
}

TEST(StepOptions, SingleTensorAdamHoldsThePreviousDenominator) {
  // max(0 + 2*40, 40 + 2*12) = 80 of scratch on top of the 52 gradient bytes.
  const Chain chain = handChain({OptimizerKind::Adam, false, GradMode::OnBackward});
  EXPECT_EQ(optimizerScratchBytes(chain), 80u);
  EXPECT_EQ(optimizerStepFootprint(chain), 132u);
  auto sim = simulate(chain, Plan{});
  ASSERT_TRUE(sim.isOk());
  EXPECT_EQ(sim->timeline.entries.back().footprintBytes, 132u);
}

TEST(StepOptions, InPlaceGradientsAndMomentum) {
  const Chain chain = handChain({OptimizerKind::Momentum, true, GradMode::InPlace});
  expectTimeline(chain, {{OpKind::F, 1, 100, 100},
                         {OpKind::F, 2, 300, 300},
                         {OpKind::F, 3, 350, 350},
                         {OpKind::Seed, 0, 400, 350},
                         {OpKind::B, 3, 550, 300},
                         {OpKind::B, 2, 400, 100},
                         {OpKind::B, 1, 100, 0},
                         {OpKind::Step, 0, 0, 0}});
  EXPECT_EQ(chain.staticBytes(), 10u + 52u + 52u + 52u);  // input, weights, gradients, momentum_buffer
}

// zero_grad(set_to_none=False): the same static block; each B(l) also holds its fresh gradient,
// p(3) = 12 and p(1) = 40 bytes, for the op only (memory-model.md 11.2).
TEST(StepOptions, StaticGradientsAndMomentum) {
  const Chain chain = handChain({OptimizerKind::Momentum, true, GradMode::Static});
  expectTimeline(chain, {{OpKind::F, 1, 100, 100},
                         {OpKind::F, 2, 300, 300},
                         {OpKind::F, 3, 350, 350},
                         {OpKind::Seed, 0, 400, 350},
                         {OpKind::B, 3, 562, 300},
                         {OpKind::B, 2, 400, 100},
                         {OpKind::B, 1, 140, 0},
                         {OpKind::Step, 0, 0, 0}});
  EXPECT_EQ(chain.staticBytes(), 10u + 52u + 52u + 52u);
}

TEST(StepOptions, NoOptimizerIsTheModelBeforeSection11) {
  const Chain plain = handChain({});
  EXPECT_EQ(plain.staticBytes(), 10u + 2 * 52u);
  auto sim = simulate(plain, Plan{});
  ASSERT_TRUE(sim.isOk());
  EXPECT_EQ(sim->timeline.entries.size(), 7u);  // no STEP
  // Without an optimizer, gradients made on backward live to the last op, B(1).
  const Chain onBackward = handChain({OptimizerKind::None, true, GradMode::OnBackward});
  expectTimeline(onBackward, {{OpKind::F, 1, 100, 100},
                              {OpKind::F, 2, 300, 300},
                              {OpKind::F, 3, 350, 350},
                              {OpKind::Seed, 0, 400, 350},
                              {OpKind::B, 3, 562, 312},
                              {OpKind::B, 2, 412, 112},
                              {OpKind::B, 1, 152, 0}});
}

TEST(StepOptions, LivenessNamesTheWeightGradients) {
  const Chain chain = handChain({OptimizerKind::Sgd, true, GradMode::OnBackward});
  LivenessTrace trace;
  auto sim = simulateWithLiveness(chain, Plan{}, trace);
  ASSERT_TRUE(sim.isOk());
  std::vector<std::string> names;
  for (std::size_t t : trace.aliveDuring(trace.ops.size() - 1)) names.push_back(tensorName(trace.tensors[t]));
  EXPECT_EQ(names, (std::vector<std::string>{"dW3", "dW1"}));
  for (std::size_t i = 0; i < trace.ops.size(); ++i)
    EXPECT_EQ(trace.footprint(i), sim->timeline.entries[i].footprintBytes);
  // The gradients' growth the explorer draws: none in forward, G(3) from B(3), G(1) from B(1).
  EXPECT_EQ(trace.bytesAlivePerOp(TensorLife::Kind::WeightGradient),
            (std::vector<std::uint64_t>{0, 0, 0, 0, 12, 12, 52, 52}));
  EXPECT_EQ(sim->timeline.entries.back().op.phase(), Phase::Step);
  EXPECT_EQ(phaseName(Phase::Step), "step");
}

TEST(StepOptions, NamesRoundTripAndBadValuesSayWhatIsValid) {
  for (OptimizerKind kind : optimizerKinds()) {
    auto parsed = parseOptimizer(optimizerName(kind));
    ASSERT_TRUE(parsed.isOk());
    EXPECT_EQ(*parsed, kind);
  }
  auto bad = parseOptimizer("rmsprop");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(), "unknown optimizer 'rmsprop' (valid: none, sgd, momentum, adam, adamw)");
  EXPECT_EQ(*parseGradMode("on-backward"), GradMode::OnBackward);
  EXPECT_FALSE(parseGradMode("lazy").isOk());
  EXPECT_FALSE(*parseForeach("off"));
  EXPECT_FALSE(parseForeach("yes").isOk());
  EXPECT_EQ(describeStepOptions({OptimizerKind::AdamW, true, GradMode::OnBackward}),
            "adamw, foreach on, gradients on backward");
}

}  // namespace
}  // namespace remat
