#pragma once
// The JSON objects of `remat plan --json`, `compare --json` and `simulate --json`
// (docs/formats.md section 3), built from the plain value types the planners and the simulator
// return. Field names carry their units (`_bytes`, `_seconds`).
#include <nlohmann/json_fwd.hpp>

#include "remat/memory/simulator.hpp"
#include "remat/planners/planners.hpp"

namespace remat {

// The plan object: planner, objective, objective_bytes, checkpoints, dynamic_peak_bytes,
// static_bytes, peak_bytes, plan_seconds, A_bytes, R_bytes, recompute_cost.
nlohmann::json planReportToJson(const PlanReport& report);
// The same, plus checkpoint_names: the chain's name of each checkpoint layer, beside checkpoints.
nlohmann::json planReportToJson(const PlanReport& report, const Chain& chain);

// The simulation object: checkpoints, dynamic_peak_bytes, static_bytes, peak_bytes, A_bytes,
// R_bytes, recompute_cost, peak_op_index and the ops with their footprints.
nlohmann::json simulationToJson(const Simulation& simulation);

}  // namespace remat
