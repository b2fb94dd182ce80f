#pragma once
// The exact simulator of docs/memory-model.md: the op sequence of a plan, the liveness rule, the
// per-op footprint, and the paper's two estimates A and R.
#include <cstdint>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"
#include "remat/model/costs.hpp"

namespace remat {

// The op sequence of section 2, in order (RE only where the segment's end layer has extras).
// The plan must be valid.
std::vector<Op> buildOpSequence(const Chain& chain, const Plan& plan);

struct Simulation {
  Plan plan;
  Timeline timeline;                   // predicted; timeUs modelled by op_times.hpp (an estimate)
  std::uint64_t dynamicPeakBytes = 0;  // E(C)
  std::size_t peakOpIndex = 0;
  std::uint64_t staticBytes = 0;
  std::uint64_t aBytes = 0;    // objective A
  std::uint64_t rBytes = 0;    // objective R
  double recomputeCost = 0.0;  // forward cost of the R and RE ops, in recomputeCostUnit
  CostUnit recomputeCostUnit = CostUnit::Abstract;
  double recomputeShare = 0.0;  // recomputeCost / the cost of one forward pass
  std::uint64_t peakBytes() const { return staticBytes + dynamicPeakBytes; }
};

Result<Simulation> simulate(const Chain& chain, const Plan& plan);

// E(C) alone, for planners and brute force: no timeline is kept. The plan must be valid.
std::uint64_t dynamicPeak(const Chain& chain, const Plan& plan);

// The paper's objectives (section 4). The plan must be valid.
std::uint64_t objectiveA(const Chain& chain, const Plan& plan);
std::uint64_t objectiveR(const Chain& chain, const Plan& plan);
double recomputeCost(const Chain& chain, const Plan& plan);

// w(l) of section 4: what layer l keeps when its segment is recomputed.
std::uint64_t keptBytes(const Chain& chain, std::size_t l);

}  // namespace remat
