#pragma once
// The plan as JSON, with the fields of `remat plan --json` (docs/formats.md, checkpoint_names
// included) plus A, R, the recompute cost and the chain's name: a plan file that File > Open plan,
// `remat simulate --plan` and `remat run --plan` read back (remat/input/plan_file.hpp).
#include <QString>
#include <nlohmann/json.hpp>

#include "remat/base/status.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/chain.hpp"

namespace remat::gui {

// planner: the plan's source ("dp", "manual", ...); objective follows from it (A for dp, R for
// linear, E for optimal, "-" otherwise, where objective_bytes is E).
nlohmann::json planJson(const Simulation& simulation, const QString& planner, double planSeconds, const Chain& chain);
Status writePlanJson(const QString& path, const Simulation& simulation, const QString& planner, double planSeconds,
                     const Chain& chain, const WriteOptions& options = {});

}  // namespace remat::gui
