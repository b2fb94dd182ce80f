#pragma once
// Checkpoint planners (docs/formats.md names): none, sqrt, greedy, uniform:K, dp, linear,
// optimal, budget:SIZE, each a row of the registry (registry.hpp) that the by-name functions below read. Every
// planner is deterministic and reports its plan, the objective it minimises, E, the recompute cost
// and its own planning time. docs/planners.md has the algorithms and proofs.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/memory/plan.hpp"
#include "remat/model/chain.hpp"
#include "remat/model/costs.hpp"

namespace remat {

struct Simulation;  // simulator.hpp

struct PlannerOptions {
  // Polled by long-running planners; when it becomes true they return Status::cancelled() saying
  // which planner stopped and how far it had got ("planner dp cancelled at 37% of its work").
  const std::atomic<bool>* cancelFlag = nullptr;
  // Called now and then from the planning thread, where the planners poll cancelFlag, with the
  // fraction of the work done in [0, 1]: exact for linear, greedy and optimal (whose work is
  // quadratic, counted as such), an estimate for dp (how far its bound has fallen from the
  // largest segment cost towards the least possible one); the budget planner and the front report
  // theirs too, at most about a hundred times a run. May be called often: keep it cheap.
  std::function<void(double fraction)> progress;
};

// What a planner minimises: the one spelling of the objective for the registry, plan reports, the
// JSON, the command line's words and the explorer's comparison.
enum class Objective {
  A,              // "A": dp, all checkpoints alive at the peak
  R,              // "R": linear, checkpoints up to the segment alive
  E,              // "E": optimal, the simulated dynamic peak
  RecomputeCost,  // "C": budget, the least recompute cost of the plans whose E fits a bound
  None,           // "-": the fixed rules and heuristics
};
// "A", "R", "E", "C", "-": what plan reports print and the JSON's "objective" holds.
std::string_view objectiveSymbol(Objective objective);
// "minimises objective A (all checkpoints alive at the peak)": what `remat plan` says of it.
std::string_view objectiveMeaning(Objective objective);

struct PlanReport {
  std::string planner;  // the name as given, e.g. "uniform:4"
  Objective objective = Objective::None;
  std::uint64_t objectiveBytes = 0;  // the objective's value for plan; E for fixed rules and budget
  Plan plan;
  std::uint64_t dynamicPeakBytes = 0;  // E(plan)
  std::uint64_t staticBytes = 0;
  std::uint64_t aBytes = 0;
  std::uint64_t rBytes = 0;
  double recomputeCost = 0.0;  // forward cost of the R and RE ops, in recomputeCostUnit
  CostUnit recomputeCostUnit = CostUnit::Abstract;
  double recomputeShare = 0.0;  // recomputeCost / the cost of one forward pass
  double planSeconds = 0.0;     // wall time of the planning alone
  std::uint64_t peakBytes() const { return staticBytes + dynamicPeakBytes; }
};

// The registry's names in its order, parametrised ones with their symbol: "uniform:K".
std::vector<std::string> plannerNames();

// Ok when runPlanner would accept the name; else the error runPlanner would give.
Status checkPlannerName(std::string_view name);

// Runs one planner by name. Unknown names and bad parameters (uniform:0, uniform:x) are
// InvalidInput errors that list the valid names; so is uniform:K with K > n (planUniform itself
// clamps, the name a user typed does not). A chain without layers is InvalidInput.
Result<PlanReport> runPlanner(const Chain& chain, std::string_view name, const PlannerOptions& options = {});

// The plan result of a plan simulated without runPlanner (the explorer's edited plans): the
// objective is the one `planner` minimises when it names a planner ("-" otherwise), scored on the
// simulation.
PlanReport planReportOf(const Simulation& simulation, std::string_view planner, double planSeconds);

// The planners' default list for `remat compare`, the registry's rows marked for it with their
// parameters for n layers: none, sqrt, greedy, uniform:K (K = ceil(sqrt n)), dp, linear, optimal.
std::vector<std::string> defaultComparePlanners(std::size_t layerCount);

// ---- The planners themselves, without the simulation runPlanner adds (benchmarks, GUI) ----------

// A plan and the value of the planner's objective that the planner itself computed for it.
struct PlannerOutput {
  Plan plan;
  std::uint64_t objectiveBytes = 0;
  std::uint64_t boundsSolved = 0;  // dp only: how many segment-cost bounds M it solved (<= n(n+1)/2)
  std::uint64_t labels = 0;        // budget only: Pareto labels its dynamic program kept
};

// dp: exact minimum of objective A. O(n^3 alpha(n)) time worst case, O(n) memory.
Result<PlannerOutput> planDp(const Chain& chain, const PlannerOptions& options = {});

// linear: exact minimum of objective R. O(n) when u(k) = T(k-1) + a(k) is nondecreasing
// (monotone deque), O(n log n) otherwise (two heaps). MonotoneDeque on a chain whose u is not
// nondecreasing is InvalidInput.
enum class LinearMethod { Automatic, MonotoneDeque, Heap };
Result<PlannerOutput> planLinear(const Chain& chain, const PlannerOptions& options = {},
                                 LinearMethod method = LinearMethod::Automatic);
// Whether u(k) = T(k-1) + a(k) is nondecreasing in k (the O(n) case of linear).
bool segmentEndCostsNondecreasing(const Chain& chain);

// optimal: exact minimum of E, the simulator's dynamic peak. O(n^2) time, O(n) memory.
Result<PlannerOutput> planOptimal(const Chain& chain, const PlannerOptions& options = {});

// The fixed rules and the greedy heuristic (objectiveBytes is E for these).
Plan planSqrt(std::size_t layerCount);
Plan planUniform(std::size_t layerCount, std::size_t segments);
// Chen et al. 2016's greedy for one budget: walk the layers adding kept bytes w(l); when the
// running sum exceeds budgetBytes, layer l becomes a checkpoint and the sum restarts.
Plan planGreedyForBudget(const Chain& chain, std::uint64_t budgetBytes);
// The budget search of MXNet's memonger around sqrt(x * y), keeping the plan with the least E.
Result<PlannerOutput> planGreedy(const Chain& chain, const PlannerOptions& options = {});

// ---- The decomposition of E (docs/memory-model.md section 3, with its dead-checkpoint case) ----
// E(C) = max over segments j of ( sum_{1 <= m < j} h(c_m, c_(m+1)) + seg(c_j, c_(j+1)) ),
// where h(i, k) = a(i) when x(i) is read by some backward op given that its segment is (i, k],
// else 0 (such a checkpoint is freed during the forward pass).

// seg(start, k) for k = start+1..n, in that order (index k - start - 1). start < n.
std::vector<std::uint64_t> segmentPeaks(const Chain& chain, std::size_t start);
// h(start, end): what checkpoint x(start) holds while the segments right of (start, end] run.
std::uint64_t heldCheckpointBytes(const Chain& chain, std::size_t start, std::size_t end);
// E(C) by the decomposition, in O(n); equals dynamicPeak(chain, plan). The plan must be valid.
std::uint64_t decomposedPeak(const Chain& chain, const Plan& plan);

}  // namespace remat
