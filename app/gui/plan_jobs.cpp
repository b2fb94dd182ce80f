#include "plan_jobs.hpp"

namespace remat::gui {

Result<SimulatedPlan> planAndSimulate(const Chain& chain, const std::string& planner, const std::atomic<bool>* cancel) {
  PlannerOptions options;
  options.cancelFlag = cancel;
  Result<PlanReport> planned = runPlanner(chain, planner, options);
  if (!planned) return planned.status();
  if (cancel && cancel->load()) return Status::cancelled();
  Result<Simulation> simulation = simulate(chain, planned->plan);
  if (!simulation) return simulation.status().withContext("planner '" + planner + "'");
  simulation->timeline.planner = planner;
  return SimulatedPlan{std::move(planned).value(), std::move(simulation).value()};
}

}  // namespace remat::gui
