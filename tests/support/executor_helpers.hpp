#pragma once
// Shared checks of the executor tests (CPU and CUDA): a measured timeline against the simulator's
// prediction, and bitwise comparisons of runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "remat/exec/interpreter.hpp"
#include "remat/exec/profiler.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/planners/planners.hpp"

namespace remat::testing {

// Interpreter options with only the seed set (the labels are drawn from it).
inline InterpreterOptions seeded(std::uint64_t seed) {
  InterpreterOptions options;
  options.seed = seed;
  return options;
}

// The chain with the device's workspaces written in (fitWorkspacesToDevice): what a run on it is
// measured against. On failure the test fails and the chain comes back unchanged.
inline Chain fittedTo(const Chain& chain, Device& device) {
  auto fit = fitWorkspacesToDevice(chain, device);
  EXPECT_TRUE(fit.isOk()) << fit.status().message();
  return fit.isOk() ? std::move(fit->chain) : chain;
}

// Every op's measured footprint and live-after equal the simulator's, byte for byte.
inline void expectMatchesSimulation(const Chain& chain, const Plan& plan, const Timeline& measured) {
  auto sim = simulate(chain, plan);
  ASSERT_TRUE(sim.isOk()) << sim.status().message();
  const Timeline& predicted = sim->timeline;
  ASSERT_EQ(measured.entries.size(), predicted.entries.size());
  for (std::size_t i = 0; i < predicted.entries.size(); ++i) {
    const TimelineEntry& m = measured.entries[i];
    const TimelineEntry& p = predicted.entries[i];
    ASSERT_EQ(m.op, p.op) << "op " << i;
    EXPECT_EQ(m.footprintBytes, p.footprintBytes) << chain.name << " plan [" << formatCheckpointList(plan) << "] op "
                                                  << i << " " << opName(p.op.kind) << "(" << p.op.layer << ")";
    EXPECT_EQ(m.liveAfterBytes, p.liveAfterBytes) << chain.name << " plan [" << formatCheckpointList(plan) << "] op "
                                                  << i << " " << opName(p.op.kind) << "(" << p.op.layer << ")";
  }
  EXPECT_EQ(measured.dynamicPeakBytes(), sim->dynamicPeakBytes);
}

// The digest of d(l-1) written by each B(l), by layer: what a plan's backward computed.
inline std::map<std::size_t, std::uint64_t> gradientDigests(const RunResult& run) {
  std::map<std::size_t, std::uint64_t> out;
  for (const TensorDigest& d : run.digests)
    if (d.op.kind == OpKind::B || d.op.kind == OpKind::Seed) out[d.layer] = d.digest;
  return out;
}

// Recomputed tensors equal the originals: every R(l)'s x(l) equals F(l)'s, and every E(l) written
// by R or RE equals the E(l) that store-all's keep-mode F(l) wrote (reference).
inline void expectRecomputeReproduces(const RunResult& run, const RunResult& storeAll) {
  std::map<std::size_t, std::uint64_t> forward, extras;
  for (const TensorDigest& d : run.digests)
    if (d.op.kind == OpKind::F && d.tensor == 'x') forward[d.layer] = d.digest;
  for (const TensorDigest& d : storeAll.digests)
    if (d.op.kind == OpKind::F && d.tensor == 'E') extras[d.layer] = d.digest;
  for (const TensorDigest& d : run.digests) {
    if (d.op.kind == OpKind::R && d.tensor == 'x') {
      EXPECT_EQ(d.digest, forward.at(d.layer)) << "x(" << d.layer << ")";
    }
    if ((d.op.kind == OpKind::R || d.op.kind == OpKind::RE || d.op.kind == OpKind::F) && d.tensor == 'E') {
      EXPECT_EQ(d.digest, extras.at(d.layer)) << "E(" << d.layer << ") written by " << opName(d.op.kind);
    }
  }
}

// A plan's run against store-all's run on the same interpreter (the reference): every step's
// footprints match the simulator, the parameter gradients (captured or digested, as the run options
// asked) and every d(l-1) are bitwise store-all's, and recomputes reproduce the originals.
inline void expectReproducesStoreAll(const Chain& chain, const Plan& plan, const RunResult& run,
                                     const RunResult& reference) {
  for (const Timeline& t : run.timelines) expectMatchesSimulation(chain, plan, t);
  EXPECT_EQ(run.parameterGradients, reference.parameterGradients) << "parameter gradients differ";
  EXPECT_EQ(run.parameterGradientDigests, reference.parameterGradientDigests) << "parameter gradients differ";
  EXPECT_EQ(gradientDigests(run), gradientDigests(reference));
  expectRecomputeReproduces(run, reference);
}

// The distinct plans of the planners (none first), with the planner names that produced them.
inline std::vector<std::pair<std::string, Plan>> plannerPlans(const Chain& chain,
                                                              const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, Plan>> plans;
  for (const std::string& name : names) {
    auto r = runPlanner(chain, name);
    EXPECT_TRUE(r.isOk()) << name << ": " << r.status().message();
    if (!r) continue;
    auto same = std::find_if(plans.begin(), plans.end(), [&](const auto& p) { return p.second == r->plan; });
    if (same == plans.end())
      plans.emplace_back(name, r->plan);
    else
      same->first += "," + name;
  }
  return plans;
}

inline const std::vector<std::string>& allPlanners() {
  static const std::vector<std::string> names = {"none", "sqrt", "greedy", "uniform:2", "dp", "linear", "optimal"};
  return names;
}

// Runs store-all and every planner's plan of `chain` on `device` (`planners`: the named ones only,
// for a model too large for all of them): each run's footprint equals the prediction op by op, and
// every plan reproduces store-all's gradients.
inline void expectEveryPlanReproducesStoreAll(const Chain& chain, Device& device, std::uint64_t seed,
                                              const std::vector<std::string>& planners = allPlanners()) {
  auto interp = Interpreter::create(chain, device, seeded(seed));
  ASSERT_TRUE(interp.isOk()) << interp.status().message();
  const RunOptions options{.digestGradients = true, .captureDigests = true};
  auto reference = (*interp)->run(Plan{}, options);
  ASSERT_TRUE(reference.isOk()) << reference.status().message();
  expectMatchesSimulation(chain, Plan{}, reference->timelines[0]);
  for (const auto& [name, plan] : plannerPlans(chain, planners)) {
    SCOPED_TRACE(name + " [" + formatCheckpointList(plan) + "]");
    auto run = (*interp)->run(plan, options);
    ASSERT_TRUE(run.isOk()) << run.status().message();
    expectReproducesStoreAll(chain, plan, *run, *reference);
  }
}

}  // namespace remat::testing
