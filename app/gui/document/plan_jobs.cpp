#include "document/plan_jobs.hpp"

#include "document/document.hpp"
#include "remat/usecases/planning.hpp"

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
  SimulatedPlan out;
  Result<ScoredPlan> scored = planAndScore(chain, planner, options, &out.liveness);
  if (!scored) return scored.status();
  out.report = std::move(scored->report);
  out.simulation = std::move(scored->simulation);
  return out;
}

PlanResults planResultsOf(SimulatedPlan&& planned, std::uint64_t chainRevision) {
  return PlanResults{std::move(planned.simulation), std::move(planned.liveness), chainRevision};
}

}  // namespace remat::gui
