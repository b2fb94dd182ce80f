#pragma once
// The work of planner jobs, run on a JobRunner thread: plan, then simulate the plan. Plain values
// in, plain values out.
#include <atomic>
#include <string>

#include "remat/model/chain.hpp"
#include "remat/planners/planners.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/base/status.hpp"

namespace remat::gui {

struct PlanJobResult {
  PlanReport result;
  Simulation simulation;
};

Result<PlanJobResult> planAndSimulate(const Chain& chain, const std::string& planner, const std::atomic<bool>* cancel);

}  // namespace remat::gui
