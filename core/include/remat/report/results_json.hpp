#pragma once
// The JSON objects of `remat plan --json`, `compare --json` and `simulate --json`
// (docs/formats.md section 3), built from the plain value types the planners and the simulator
// return. Field names carry their units (`_bytes`, `_seconds`).
#include <nlohmann/json_fwd.hpp>

#include "remat/memory/simulator.hpp"
#include "remat/planners/planners.hpp"
#include "remat/planners/tradeoff.hpp"

namespace remat {

// The plan object: planner, objective, objective_bytes, checkpoints, dynamic_peak_bytes,
// static_bytes, peak_bytes, plan_seconds, A_bytes, R_bytes, recompute_cost, recompute_cost_unit
// ("GFLOP", "ms", "units", "mixed": costUnitName) and recompute_share (of one forward pass).
nlohmann::json planReportToJson(const PlanReport& report);
// The same, plus checkpoint_names: the chain's name of each checkpoint layer, beside checkpoints.
nlohmann::json planReportToJson(const PlanReport& report, const Chain& chain);

// The simulation object: checkpoints, dynamic_peak_bytes, static_bytes, peak_bytes, A_bytes,
// R_bytes, recompute_cost, recompute_cost_unit, recompute_share, peak_op_index and the ops with
// their footprints.
nlohmann::json simulationToJson(const Simulation& simulation);

// The object of `remat tradeoff --json`: {"chain", "recompute_cost_unit", "forward_cost", "front":
// [{"dynamic_peak_bytes", "peak_bytes", "recompute_cost", "recompute_share", "checkpoints"}, ...]
// (rising peak), "planners": [plan object + "on_front", "extra_peak_bytes",
// "extra_recompute_cost"]}.
nlohmann::json tradeoffToJson(const Chain& chain, const TradeoffFront& front, const std::vector<PlanReport>& planners);

}  // namespace remat
