#pragma once
// Checkpoint planners (shared/spec/interfaces.md names): none, sqrt, greedy, uniform:K, dp, linear,
// optimal. Every planner is deterministic and reports its plan, the objective it minimises, E,
// the recompute cost and its own planning time.
#include <atomic>
#include <string>
#include <string_view>
#include <vector>

#include "remat/chain.hpp"
#include "remat/plan.hpp"
#include "remat/status.hpp"

namespace remat {

struct PlannerOptions {
  // Polled by long-running planners; when it becomes true they return Status::cancelled().
  const std::atomic<bool>* cancelFlag = nullptr;
};

struct PlannerResult {
  std::string planner;               // the name as given, e.g. "uniform:4"
  std::string objective;             // "A" (dp), "R" (linear), "E" (optimal), "-" (fixed rules)
  std::uint64_t objectiveBytes = 0;  // the objective's value for plan; E for fixed rules
  Plan plan;
  std::uint64_t dynamicPeakBytes = 0;  // E(plan)
  std::uint64_t staticBytes = 0;
  std::uint64_t aBytes = 0;
  std::uint64_t rBytes = 0;
  double recomputeCost = 0.0;  // forward cost of the R and RE ops
  double planSeconds = 0.0;    // wall time of the planning alone
  std::uint64_t peakBytes() const { return staticBytes + dynamicPeakBytes; }
};

// The planner names a user can pass ("uniform:K" is listed as "uniform:K").
std::vector<std::string> plannerNames();

// Runs one planner by name. Unknown names and bad parameters (uniform:0, uniform:x) are
// InvalidInput errors that list the valid names.
Result<PlannerResult> runPlanner(const Chain& chain, std::string_view name, const PlannerOptions& options = {});

}  // namespace remat
