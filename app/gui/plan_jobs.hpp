#pragma once
// The work of planner jobs, run on a JobRunner thread: plan, then simulate the plan. Plain values
// in, plain values out.
#include <atomic>
#include <string>

#include "remat/chain.hpp"
#include "remat/planners.hpp"
#include "remat/simulator.hpp"
#include "remat/status.hpp"

namespace remat::gui {

struct PlannedResult {
  PlannerResult result;
  Simulation simulation;
};

Result<PlannedResult> planAndSimulate(const Chain& chain, const std::string& planner, const std::atomic<bool>* cancel);

}  // namespace remat::gui
