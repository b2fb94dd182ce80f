#pragma once
// The work of planner jobs, run on a JobRunner thread: plan, then simulate the plan. Plain values
// in, plain values out.
#include <atomic>
#include <functional>
#include <string>

#include "remat/base/status.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/chain.hpp"
#include "remat/planners/planners.hpp"

namespace remat::gui {

// A planner's report and the simulation of its plan (timeline, liveness) for the views.
struct SimulatedPlan {
  PlanReport report;
  Simulation simulation;
};

// progress (may be empty) hears the planner's fraction done, at most once per percent.
Result<SimulatedPlan> planAndSimulate(const Chain& chain, const std::string& planner, const std::atomic<bool>* cancel,
                                      const std::function<void(double fraction)>& progress = {});

}  // namespace remat::gui
