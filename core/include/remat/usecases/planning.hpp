#pragma once
// The use cases "plan and score" and "plan to fit a capacity", as every front end offers them: the
// command line's plan, run and tradeoff, the explorer's planner jobs and budget field, the GPU
// check's plans.
#include <cstdint>
#include <string>

#include "remat/base/status.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/chain.hpp"
#include "remat/planners/planners.hpp"

namespace remat {

// A planner's plan and the simulation that scores it (peak, A, R, recompute cost, the predicted
// timeline, named after the planner).
struct ScoredPlan {
  PlanReport report;
  Simulation simulation;
};

// Runs the planner, then simulates its plan; a set cancel flag after planning is Cancelled.
// liveness (may be null) receives the plan's liveness trace, from the simulation's own op sequence.
Result<ScoredPlan> planAndScore(const Chain& chain, const std::string& planner, const PlannerOptions& options = {},
                                LivenessTrace* liveness = nullptr);

// The simulation of a plan that did not come from a planner run here (a list of checkpoints, a plan
// from the front), its timeline named after `planner`.
Result<Simulation> scorePlan(const Chain& chain, const Plan& plan, const std::string& planner);

// What fits in a total capacity (static memory included): the dynamic budget left beside the static
// memory, and the budget planner's name for it.
struct CapacityBudget {
  std::uint64_t capacityBytes = 0;
  std::uint64_t budgetBytes = 0;  // capacity - static
  std::string planner;            // budgetPlannerName(budgetBytes): "budget:<budgetBytes>"
};

// InvalidInput when the static memory alone is over the capacity: "no plan fits in <capacityText>:
// static memory alone is ..." (capacityText empty: the capacity in bytes, formatBytes).
Result<CapacityBudget> budgetForCapacity(const Chain& chain, std::uint64_t capacityBytes,
                                         const std::string& capacityText = {});

// The budget planner's plan for it; its refusal starts with what the capacity and the static memory
// were: "<what> (minus 1.00 GiB static): ..." (what empty: the capacity, formatBytes).
Result<PlanReport> planToFit(const Chain& chain, const CapacityBudget& budget, const std::string& what = {});

}  // namespace remat
