#pragma once
// The work of planner jobs, run on a JobRunner thread: the use case "plan and score"
// (usecases/planning.hpp) with the liveness trace the views need, so the GUI thread accepts the
// results as they are (Document::applyPlan) instead of computing them again. Plain values in, plain
// values out.
#include <atomic>
#include <functional>
#include <string>

#include "remat/base/status.hpp"
#include "remat/memory/liveness.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/chain.hpp"
#include "remat/planners/planners.hpp"

namespace remat::gui {

struct PlanResults;  // document.hpp

// A planner's report and the simulation and liveness trace of its plan, for the views.
struct SimulatedPlan {
  PlanReport report;
  Simulation simulation;
  LivenessTrace liveness;
};

// progress (may be empty) hears the planner's fraction done, at most once per percent.
Result<SimulatedPlan> planAndSimulate(const Chain& chain, const std::string& planner, const std::atomic<bool>* cancel,
                                      const std::function<void(double fraction)>& progress = {});

// What the Document accepts of it for the chain of revision chainRevision (moved out of planned).
PlanResults planResultsOf(SimulatedPlan&& planned, std::uint64_t chainRevision);

}  // namespace remat::gui
