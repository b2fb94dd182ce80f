// The simulator against the spec: golden.json test vectors and hand-computed examples of each rule
// of docs/memory-model.md (keep and discard mode, RE with extras, workspaces, in/out flags, the seed).
#include "remat/memory/simulator.hpp"

#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "golden.hpp"

namespace remat {
namespace {

using testing::numbers;

Plan plan(std::vector<std::size_t> c) { return Plan{std::move(c)}; }

struct Expected {
  std::string op;
  std::size_t layer;
  std::uint64_t footprint;
  std::uint64_t liveAfter;
};

void expectTimeline(const Simulation& sim, const std::vector<Expected>& expected) {
  ASSERT_EQ(sim.timeline.entries.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const TimelineEntry& e = sim.timeline.entries[i];
    EXPECT_EQ(std::string(opName(e.op.kind)), expected[i].op) << "op " << i;
    EXPECT_EQ(e.op.layer, expected[i].layer) << "op " << i;
    EXPECT_EQ(e.footprintBytes, expected[i].footprint) << "op " << i << " " << expected[i].op << expected[i].layer;
    EXPECT_EQ(e.liveAfterBytes, expected[i].liveAfter) << "op " << i << " " << expected[i].op << expected[i].layer;
  }
}

TEST(Golden, EveryPlanMatchesOpByOp) {
  std::size_t plansChecked = 0;
  for (const auto& example : testing::goldenExamples()) {
    const Chain chain = testing::chainFromJson(example["chain"]);
    for (const auto& p : example["plans"]) {
      Plan c{p["checkpoints"].get<std::vector<std::size_t>>()};
      auto sim = simulate(chain, c);
      ASSERT_TRUE(sim.isOk()) << sim.status().message();
      SCOPED_TRACE(chain.name + " plan " + p["checkpoints"].dump());
      EXPECT_EQ(sim->dynamicPeakBytes, p["dynamic_peak_bytes"].get<std::uint64_t>());
      EXPECT_EQ(sim->aBytes, p["A_bytes"].get<std::uint64_t>());
      EXPECT_EQ(sim->rBytes, p["R_bytes"].get<std::uint64_t>());
      EXPECT_EQ(dynamicPeak(chain, c), sim->dynamicPeakBytes);
      const auto& ops = p["ops"];
      ASSERT_EQ(sim->timeline.entries.size(), ops.size());
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const TimelineEntry& e = sim->timeline.entries[i];
        EXPECT_EQ(std::string(opName(e.op.kind)), ops[i]["op"].get<std::string>()) << "op " << i;
        const std::size_t layer = ops[i]["layer"].is_null() ? 0 : ops[i]["layer"].get<std::size_t>();
        EXPECT_EQ(e.op.layer, layer) << "op " << i;
        EXPECT_EQ(e.footprintBytes, ops[i]["footprint_bytes"].get<std::uint64_t>()) << "op " << i;
        EXPECT_EQ(e.liveAfterBytes, ops[i]["live_after_bytes"].get<std::uint64_t>()) << "op " << i;
      }
      ++plansChecked;
    }
  }
  EXPECT_GE(plansChecked, 20u);
}

// Discard mode: a non-checkpoint activation of a recomputed segment dies after the next forward op.
TEST(Rules, DiscardModeFreesAfterNextForward) {
  const Chain chain = makeAbstractChain("t", 100, {numbers(10), numbers(20), numbers(30)});
  auto sim = simulate(chain, plan({2}));
  ASSERT_TRUE(sim.isOk());
  // F1 writes 10 (x1 kept only until F2: discard mode), F2 writes x2 = checkpoint, x1 freed after F2.
  // F3 (keep mode, last segment) writes 30; SEED writes d3 = 30; x3 is not read by B3 (out = no) -> freed.
  // B3 reads d3 and x2 (in), writes d2 = 20. Segment 0: R1 writes x1 = 10, then B2 reads d2, x1; writes d1 = 10;
  // B1 reads d1 (x0 is static), writes nothing.
  expectTimeline(*sim, {{"F", 1, 10, 10},
                        {"F", 2, 30, 20},
                        {"F", 3, 50, 50},
                        {"SEED", 0, 80, 50},
                        {"B", 3, 70, 20},
                        {"R", 1, 30, 30},
                        {"B", 2, 40, 10},
                        {"B", 1, 10, 0}});
  EXPECT_EQ(sim->dynamicPeakBytes, 80u);
  EXPECT_DOUBLE_EQ(sim->recomputeCost, 1.0);
}

// Keep mode writes extras in the last segment; R writes fresh x and E; RE adds the transient copy.
TEST(Rules, ExtrasKeepModeAndRecomputeExtras) {
  const Chain chain = makeAbstractChain(
      "t", 8, {numbers(10, true, false, 3), numbers(20, true, false, 5), numbers(30, true, false, 7)});
  auto sim = simulate(chain, plan({2}));
  ASSERT_TRUE(sim.isOk());
  // F1, F2 discard (no extras). F3 keep: writes x3 + E3.
  // Segment 0 backward: R1 writes x1 + E1; RE2 reads x1, writes E2 (5) with a transient 20 during the op.
  expectTimeline(*sim, {{"F", 1, 10, 10},
                        {"F", 2, 30, 20},
                        {"F", 3, 57, 57},
                        {"SEED", 0, 87, 57},
                        {"B", 3, 77, 20},  // its last readers free d3, E3 and the checkpoint x2: d2 stays
                        {"R", 1, 33, 33},
                        {"RE", 2, 58, 38},
                        {"B", 2, 48, 13},
                        {"B", 1, 13, 0}});
}

// A recomputed segment's end c with out(c) and extras: RE(c) writes the x(c) that B(c) reads (PyTorch's
// checkpoint recomputes every saved tensor, the output too), so the checkpoint x(c) is freed after
// its last reader right of it (here B(3)) and RE(c) has no transient copy (memory-model.md 2.3).
TEST(Rules, RecomputeExtrasWritesTheOutputBackwardReads) {
  const Chain chain =
      makeAbstractChain("t", 8, {numbers(10, true, false, 0), numbers(20, true, true, 5), numbers(30, true, false, 0)});
  auto sim = simulate(chain, plan({2}));
  ASSERT_TRUE(sim.isOk());
  expectTimeline(*sim, {{"F", 1, 10, 10},
                        {"F", 2, 30, 20},
                        {"F", 3, 50, 50},
                        {"SEED", 0, 80, 50},
                        {"B", 3, 70, 20},  // frees d3 and the checkpoint x2: B2 reads RE2's x2
                        {"R", 1, 30, 30},
                        {"RE", 2, 55, 55},  // E2 (5) and x2 (20), no transient
                        {"B", 2, 65, 10},
                        {"B", 1, 10, 0}});
}

// Workspaces count only during their op; `out` keeps x(l) alive until B(l).
TEST(Rules, WorkspacesAndOutFlag) {
  const Chain chain =
      makeAbstractChain("t", 8, {numbers(10, false, true, 0, 100, 200), numbers(20, false, false, 0, 50, 60)});
  auto sim = simulate(chain, plan({}));
  ASSERT_TRUE(sim.isOk());
  // x1 is read by B1 (out): alive to the end. x2 is read by nobody's backward: freed after SEED.
  expectTimeline(*sim, {{"F", 1, 110, 10}, {"F", 2, 80, 30}, {"SEED", 0, 50, 30}, {"B", 2, 100, 20}, {"B", 1, 220, 0}});
}

// A channel slice inside a block is a view (memory-model.md section 6): the conv that reads it keeps
// the whole block input alive, as PyTorch's chunk does, where the old copy rule kept the half in E.
// x0 [1, 8, 4, 4] (512 bytes); conv 1x1 -> x1 (512); block: slice channels [4, 8) of x1 (a view),
// conv 1x1 4 -> 4 reading it -> x2 (256); conv 1x1 4 -> 2 -> x3 (128).
TEST(Rules, ASliceViewKeepsItsSourceAlive) {
  const nlohmann::json conv1x1 = {{"kind", "conv2d"}, {"kernel", 1}, {"bias", false}};
  nlohmann::json c1 = conv1x1, c3 = conv1x1, inner = conv1x1;
  c1["name"] = "c1", c1["out_channels"] = 8;
  c3["name"] = "c3", c3["out_channels"] = 2;
  inner["name"] = "conv", inner["out_channels"] = 4, inner["inputs"] = {1};
  const nlohmann::json slice = {
      {"name", "half"}, {"kind", "slice"}, {"begin", 4}, {"out_channels", 4}, {"inputs", {0}}};
  const nlohmann::json block = {{"name", "split"}, {"kind", "block"}, {"ops", {slice, inner}}};
  const Chain chain = testing::chainFromJson({{"format", "remat-chain/1"},
                                              {"name", "view"},
                                              {"input", {{"shape", {1, 8, 4, 4}}, {"dtype", "float32"}}},
                                              {"layers", {c1, block, c3}}});
  ASSERT_EQ(chain.layers.size(), 3u);
  const LayerNumbers& b = chain.layers[1].numbers;
  EXPECT_TRUE(b.needsInput);             // the inner conv saves the view, so the block keeps x1: all 8 channels
  EXPECT_EQ(b.extraBytes, 0u);           // no copy of the half in E (the copy rule: 256)
  EXPECT_EQ(b.fwdWorkspaceBytes, 256u);  // the conv's contiguous copy of the view, during its forward
  EXPECT_EQ(b.bwdWorkspaceBytes, 512u);  // d(view) + the same copy during its backward
  auto sim = simulate(chain, plan({}));
  ASSERT_TRUE(sim.isOk());
  // F2: x1 + x2 + wf; x1 stays (B2 reads it). B2: x1 + d2 + d1 + wb. (The copy rule: E = 1280.)
  expectTimeline(*sim, {{"F", 1, 512, 512},
                        {"F", 2, 1024, 768},
                        {"F", 3, 896, 896},
                        {"SEED", 0, 1024, 896},
                        {"B", 3, 1152, 768},
                        {"B", 2, 1792, 512},
                        {"B", 1, 512, 0}});
  EXPECT_EQ(sim->dynamicPeakBytes, 1792u);
}

TEST(Rules, SingleLayerChain) {
  const Chain chain = makeAbstractChain("one", 4, {numbers(16)});
  auto sim = simulate(chain, plan({}));
  ASSERT_TRUE(sim.isOk());
  expectTimeline(*sim, {{"F", 1, 16, 16}, {"SEED", 0, 32, 16}, {"B", 1, 16, 0}});
  EXPECT_EQ(sim->aBytes, 16u);
  EXPECT_EQ(sim->rBytes, 16u);
}

TEST(Rules, StaticBytesAreInputAndTwiceTheParameters) {
  LayerNumbers m = numbers(16);
  m.paramBytes = 100;
  const Chain chain = makeAbstractChain("p", 4, {m, m});
  auto sim = simulate(chain, plan({}));
  ASSERT_TRUE(sim.isOk());
  EXPECT_EQ(sim->staticBytes, 4u + 400u);
  EXPECT_EQ(sim->peakBytes(), sim->staticBytes + sim->dynamicPeakBytes);
}

TEST(Plans, InvalidPlansAreRejectedWithTheReason) {
  const Chain chain = makeAbstractChain("t", 8, {numbers(1), numbers(2), numbers(3), numbers(4)});
  auto outOfRange = simulate(chain, plan({4}));
  ASSERT_FALSE(outOfRange.isOk());
  EXPECT_NE(outOfRange.status().message().find("checkpoint 4"), std::string::npos) << outOfRange.status().message();
  EXPECT_NE(outOfRange.status().message().find("1..3"), std::string::npos);
  auto zero = simulate(chain, plan({0}));
  ASSERT_FALSE(zero.isOk());
  auto unsorted = simulate(chain, plan({3, 1}));
  ASSERT_FALSE(unsorted.isOk());
  EXPECT_NE(unsorted.status().message().find("sorted"), std::string::npos);
  auto duplicate = simulate(chain, plan({2, 2}));
  ASSERT_FALSE(duplicate.isOk());
  EXPECT_TRUE(simulate(chain, plan({1, 2, 3})).isOk());
}

TEST(Plans, CheckpointListParsing) {
  auto p = parseCheckpointList("3, 7,12");
  ASSERT_TRUE(p.isOk());
  EXPECT_EQ(p->checkpoints, (std::vector<std::size_t>{3, 7, 12}));
  EXPECT_TRUE(parseCheckpointList("")->checkpoints.empty());
  EXPECT_FALSE(parseCheckpointList("3,,4").isOk());
  EXPECT_FALSE(parseCheckpointList("-1").isOk());
  EXPECT_FALSE(parseCheckpointList("a").isOk());
  EXPECT_EQ(formatCheckpointList(*p), "3,7,12");
}

TEST(OpSequence, FollowsSectionTwo) {
  const Chain chain =
      makeAbstractChain("t", 8, {numbers(1), numbers(1, true, false, 1), numbers(1), numbers(1), numbers(1)});
  const auto ops = buildOpSequence(chain, plan({2, 4}));
  std::string text;
  for (const Op& op : ops) text += std::string(opName(op.kind)) + (op.layer ? std::to_string(op.layer) : "") + " ";
  EXPECT_EQ(text, "F1 F2 F3 F4 F5 SEED B5 R3 B4 B3 R1 RE2 B2 B1 ");
}

}  // namespace
}  // namespace remat
