#pragma once
// Peak against recompute: the exact Pareto front of (E, recompute cost) over all 2^(n-1) plans of a
// chain, and the budget planner (`budget:SIZE`): among the plans whose dynamic peak E is at most
// SIZE, the one with the least recompute cost; ties go to the lower E, then to fewer checkpoints.
// docs/planners.md ("budget and the front") has the algorithm, its proof and its complexity.
//
// Costs. The recompute cost of a plan is the sum of fwdCost over its R and RE ops (the
// simulator's recomputeCost). The planner adds costs as integers on a grid of F * 2^-61, F the sum
// of the chain's forward costs, so that its sums are exact and associative: two plans that
// recompute the same costs tie exactly, whatever the order. A grid sum is within n * F * 2^-62 of
// the exact sum, far below the rounding of a double sum of n terms (about n * F * 2^-53). Reported
// costs are the simulator's. Forward costs must be finite and >= 0 (InvalidInput otherwise).
#include <cstdint>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/memory/plan.hpp"
#include "remat/model/chain.hpp"
#include "remat/planners/planners.hpp"

namespace remat {

// One point of the front: a plan, its E and its recompute cost (the simulator's double).
struct FrontPoint {
  Plan plan;
  std::uint64_t dynamicPeakBytes = 0;
  double recomputeCost = 0.0;
};

// How much work the dynamic program did, for the documentation and the benchmarks.
struct FrontStatistics {
  std::uint64_t labels = 0;           // Pareto labels kept, over all checkpoint positions
  std::uint64_t largestLabelSet = 0;  // the most labels kept at one position
  std::uint64_t transitions = 0;      // labels extended by one segment
  std::uint64_t positions = 0;        // checkpoint positions solved (n when done)
};

// The front, sorted by rising E and strictly falling recompute cost; point 0 has the least E of
// any plan (what `optimal` finds), the last one costs nothing (store all, when costs are >= 0).
// For each (E, cost) on the front the plan has the fewest checkpoints of all plans with that E and
// cost.
struct TradeoffFront {
  std::vector<FrontPoint> points;
  FrontStatistics statistics;
};

// The whole front. Cancellable (options.cancelFlag: Cancelled); reports progress (options.progress).
Result<TradeoffFront> paretoFront(const Chain& chain, const PlannerOptions& options = {});

// budget:SIZE with SIZE = budgetBytes, as a dynamic program pruned to E <= budgetBytes (faster
// than the whole front for tight budgets). objectiveBytes is the plan's E. Nothing fits:
// InvalidInput "no plan fits in SIZE: the least dynamic peak of any plan is X (planner optimal)".
Result<PlannerOutput> planBudget(const Chain& chain, std::uint64_t budgetBytes, const PlannerOptions& options = {},
                                 FrontStatistics* statistics = nullptr);

// The point budget:SIZE chooses, read off a front: the last point with E <= budgetBytes; null
// when none fits.
const FrontPoint* cheapestWithin(const TradeoffFront& front, std::uint64_t budgetBytes);

// Recompute costs closer than this are the same cost in reports and comparisons: twice the
// rounding error bound of a double sum of the chain's n forward costs (2 n eps F).
double recomputeCostTolerance(const Chain& chain);

// Where a plan with dynamic peak E and recompute cost `cost` stands against the front.
struct FrontPlacement {
  bool onFront = false;  // some front point has its E and (within the tolerance) its cost
  // What the plan gives away: E minus the least E of a front point that costs no more, and its
  // cost minus the least cost of a front point whose E is no larger (both 0 on the front).
  std::uint64_t extraPeakBytes = 0;
  double extraRecomputeCost = 0.0;
  std::size_t samePeakPoint = 0;  // the front point the extra recompute is measured against
  std::size_t sameCostPoint = 0;  // the front point the extra peak is measured against
};
FrontPlacement placeAgainstFront(const TradeoffFront& front, std::uint64_t dynamicPeakBytes, double cost,
                                 double tolerance);

}  // namespace remat
