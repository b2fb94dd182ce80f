// The liveness trace must agree with the simulator op by op (it names what the simulator sums), and
// checkpoints must be stored by their forward op and freed after their last reader.
#include "remat/memory/liveness.hpp"

#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "golden.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/random_chain.hpp"
#include "remat/model/zoo.hpp"

namespace remat {
namespace {

Chain zooChainBuilt(const std::string& name) {
  ZooOptions options;
  options.batch = 8;
  options.resolution = 64;
  Result<ChainSpec> spec = zooChain(name, options);
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  Result<Chain> chain = buildChain(*spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return *chain;
}

void expectTraceMatchesSimulator(const Chain& chain, const Plan& plan) {
  Result<Simulation> sim = simulate(chain, plan);
  ASSERT_TRUE(sim.isOk()) << sim.status().message();
  const LivenessTrace trace = traceLiveness(chain, plan);
  ASSERT_EQ(trace.ops.size(), sim->timeline.entries.size());
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    ASSERT_EQ(trace.ops[i], sim->timeline.entries[i].op);
    ASSERT_EQ(trace.footprint(i), sim->timeline.entries[i].footprintBytes) << chain.name << " op " << i;
    std::uint64_t liveAfter = 0;
    for (const TensorLife& t : trace.tensors)
      if (t.writer <= i && t.freedAfter() > i) liveAfter += t.bytes;
    ASSERT_EQ(liveAfter, sim->timeline.entries[i].liveAfterBytes) << chain.name << " op " << i;
  }
  for (const CheckpointLife& life : checkpointLives(trace, plan)) {
    EXPECT_EQ(trace.ops[life.storedOp], (Op{OpKind::F, life.layer}));
    EXPECT_GT(life.freedOp, life.storedOp);
  }
  EXPECT_EQ(checkpointLives(trace, plan).size(), plan.checkpoints.size());
}

TEST(Liveness, AgreesWithTheSimulatorOnTheGoldenExamples) {
  const nlohmann::json golden = remat::testing::loadGolden();
  std::size_t plans = 0;
  for (const auto& example : golden.at("examples")) {
    const Chain chain = remat::testing::chainFromJson(example.at("chain"));
    for (const auto& p : example.at("plans")) {
      Plan plan;
      plan.checkpoints = p.at("checkpoints").get<std::vector<std::size_t>>();
      expectTraceMatchesSimulator(chain, plan);
      // And directly against the worked example, not only through the simulator.
      const LivenessTrace trace = traceLiveness(chain, plan);
      const auto& ops = p.at("ops");
      ASSERT_EQ(trace.ops.size(), ops.size());
      for (std::size_t i = 0; i < ops.size(); ++i)
        EXPECT_EQ(trace.footprint(i), ops[i].at("footprint_bytes").get<std::uint64_t>()) << "op " << i;
      ++plans;
    }
  }
  EXPECT_GT(plans, 10u);
}

TEST(Liveness, AgreesWithTheSimulatorOnRandomChainsAndZooModels) {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const Chain chain = makeRandomChain(mixedRandomChainOptions(12, seed));
    Plan plan;
    for (std::size_t c = 1 + seed % 3; c < chain.size(); c += 2 + seed % 4) plan.checkpoints.push_back(c);
    expectTraceMatchesSimulator(chain, plan);
  }
  const Chain resnet = zooChainBuilt("resnet18");
  expectTraceMatchesSimulator(resnet, Plan{{2, 5, 7}});
  expectTraceMatchesSimulator(resnet, Plan{});
}

TEST(Liveness, ACheckpointIsFreedAfterTheLastOpThatReadsIt) {
  // Layer 3 reads its input: x(2) is read by B(3); with checkpoint 2 nothing reads it later.
  std::vector<LayerNumbers> layers(4);
  for (auto& m : layers) m.outBytes = 100;
  const Chain chain = makeAbstractChain("four", 10, layers);
  const Plan plan{{2}};
  const LivenessTrace trace = traceLiveness(chain, plan);
  const auto lives = checkpointLives(trace, plan);
  ASSERT_EQ(lives.size(), 1u);
  EXPECT_EQ(trace.ops[lives[0].storedOp], (Op{OpKind::F, 2}));
  // Sequence: F1..F4 SEED B4 B3 R1 B2 B1: B3 is the last reader of x2 (R1 reads x0).
  EXPECT_EQ(trace.ops[lives[0].freedOp], (Op{OpKind::B, 3}));
  EXPECT_EQ(tensorName(trace.tensors[0]), "x1");
}

TEST(Liveness, SimulatingWithTheTraceBuildsOneOpSequenceAndGivesBothResults) {
  RandomChainOptions options;
  options.layers = 60;
  options.seed = 5;
  const Chain chain = makeRandomChain(options);
  const Plan plan{{7, 19, 33, 48}};
  LivenessTrace trace;
  const std::uint64_t before = opSequenceBuildCount();
  Result<Simulation> sim = simulateWithLiveness(chain, plan, trace);
  EXPECT_EQ(opSequenceBuildCount() - before, 1u);
  ASSERT_TRUE(sim.isOk()) << sim.status().message();
  Result<Simulation> alone = simulate(chain, plan);
  ASSERT_TRUE(alone.isOk());
  EXPECT_EQ(sim->timeline.entries.size(), alone->timeline.entries.size());
  EXPECT_EQ(sim->dynamicPeakBytes, alone->dynamicPeakBytes);
  EXPECT_EQ(sim->peakOpIndex, alone->peakOpIndex);
  const LivenessTrace separate = traceLiveness(chain, plan);
  ASSERT_EQ(trace.ops, separate.ops);
  ASSERT_EQ(trace.tensors.size(), separate.tensors.size());
  for (std::size_t t = 0; t < trace.tensors.size(); ++t) {
    EXPECT_EQ(tensorName(trace.tensors[t]), tensorName(separate.tensors[t]));
    EXPECT_EQ(trace.tensors[t].bytes, separate.tensors[t].bytes);
    EXPECT_EQ(trace.tensors[t].writer, separate.tensors[t].writer);
    EXPECT_EQ(trace.tensors[t].lastReader, separate.tensors[t].lastReader);
  }
  EXPECT_EQ(trace.scratchBytes, separate.scratchBytes);
  for (std::size_t i = 0; i < trace.ops.size(); ++i)
    ASSERT_EQ(trace.footprint(i), sim->timeline.entries[i].footprintBytes);

  // A plan the chain cannot take leaves no trace of an earlier plan behind.
  EXPECT_FALSE(simulateWithLiveness(chain, Plan{{60}}, trace).isOk());
  EXPECT_TRUE(trace.ops.empty());
  EXPECT_TRUE(trace.tensors.empty());
}

}  // namespace
}  // namespace remat
