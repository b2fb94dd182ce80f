#include "remat/usecases/planning.hpp"

#include "remat/base/units.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/planners/registry.hpp"

namespace remat {

Result<Simulation> scorePlan(const Chain& chain, const Plan& plan, const std::string& planner) {
  Result<Simulation> simulation = simulate(chain, plan);
  if (!simulation) return simulation.status();
  simulation->timeline.planner = planner;
  return simulation;
}

Result<ScoredPlan> planAndScore(const Chain& chain, const std::string& planner, const PlannerOptions& options,
                                LivenessTrace* liveness) {
  Result<PlanReport> planned = runPlanner(chain, planner, options);
  if (!planned) return planned.status();
  if (options.cancelFlag && options.cancelFlag->load()) return Status::cancelled();
  Result<Simulation> simulation =
      liveness ? simulateWithLiveness(chain, planned->plan, *liveness) : simulate(chain, planned->plan);
  if (!simulation) return simulation.status().withContext("planner '" + planner + "'");
  simulation->timeline.planner = planner;
  return ScoredPlan{std::move(planned).value(), std::move(simulation).value()};
}

Result<CapacityBudget> budgetForCapacity(const Chain& chain, std::uint64_t capacityBytes,
                                         const std::string& capacityText) {
  const std::uint64_t staticBytes = chain.staticBytes();
  if (staticBytes > capacityBytes)
    return Status::invalid("no plan fits in " + (capacityText.empty() ? formatBytes(capacityBytes) : capacityText) +
                           ": static memory alone is " + formatBytes(staticBytes) + " " + describeStaticParts(chain));
  const std::uint64_t budgetBytes = capacityBytes - staticBytes;
  return CapacityBudget{capacityBytes, budgetBytes, budgetPlannerName(budgetBytes)};
}

Result<PlanReport> planToFit(const Chain& chain, const CapacityBudget& budget, const std::string& what) {
  Result<PlanReport> report = runPlanner(chain, budget.planner);
  if (!report)
    return report.status().withContext((what.empty() ? formatBytes(budget.capacityBytes) : what) + " (minus " +
                                       formatBytes(chain.staticBytes()) + " static)");
  return report;
}

}  // namespace remat
