#pragma once
// The plan as JSON, with the fields of `remat plan --json` (docs/formats.md) plus A, R,
// the recompute cost and the chain's name.
#include <QString>
#include <nlohmann/json.hpp>

#include "remat/base/status.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/memory/simulator.hpp"

namespace remat::gui {

// planner: the plan's source ("dp", "manual", ...); objective follows from it (A for dp, R for
// linear, E for optimal, "-" otherwise, where objective_bytes is E).
nlohmann::json planJson(const Simulation& simulation, const QString& planner, double planSeconds,
                        const std::string& chainName);
Status writePlanJson(const QString& path, const Simulation& simulation, const QString& planner, double planSeconds,
                     const std::string& chainName, const WriteOptions& options = {});

}  // namespace remat::gui
