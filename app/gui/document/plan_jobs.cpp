#include "document/plan_jobs.hpp"

namespace remat::gui {

Result<SimulatedPlan> planAndSimulate(const Chain& chain, const std::string& planner, const std::atomic<bool>* cancel,
                                      const std::function<void(double fraction)>& progress) {
  PlannerOptions options;
  options.cancelFlag = cancel;
  if (progress) {
    // The planners report often; the GUI thread hears a change of a percent or more.
    options.progress = [&progress, reported = -1.0](double fraction) mutable {
      if (fraction < reported + 0.01) return;
      reported = fraction;
      progress(fraction);
    };
  }
  Result<PlanReport> planned = runPlanner(chain, planner, options);
  if (!planned) return planned.status();
  if (cancel && cancel->load()) return Status::cancelled();
  Result<Simulation> simulation = simulate(chain, planned->plan);
  if (!simulation) return simulation.status().withContext("planner '" + planner + "'");
  simulation->timeline.planner = planner;
  return SimulatedPlan{std::move(planned).value(), std::move(simulation).value()};
}

}  // namespace remat::gui
