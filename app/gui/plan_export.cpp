#include "plan_export.hpp"

#include "remat/chain_file.hpp"

namespace remat::gui {

nlohmann::json planJson(const Simulation& simulation, const QString& planner, double planSeconds,
                        const std::string& chainName) {
  std::string objective = "-";
  std::uint64_t objectiveBytes = simulation.dynamicPeakBytes;
  if (planner == QLatin1String("dp")) {
    objective = "A";
    objectiveBytes = simulation.aBytes;
  } else if (planner == QLatin1String("linear")) {
    objective = "R";
    objectiveBytes = simulation.rBytes;
  } else if (planner == QLatin1String("optimal")) {
    objective = "E";
  }
  return nlohmann::json{{"planner", planner.toStdString()},
                        {"objective", objective},
                        {"objective_bytes", objectiveBytes},
                        {"checkpoints", simulation.plan.checkpoints},
                        {"dynamic_peak_bytes", simulation.dynamicPeakBytes},
                        {"static_bytes", simulation.staticBytes},
                        {"peak_bytes", simulation.peakBytes()},
                        {"plan_seconds", planSeconds},
                        {"A_bytes", simulation.aBytes},
                        {"R_bytes", simulation.rBytes},
                        {"recompute_cost", simulation.recomputeCost},
                        {"chain", chainName}};
}

Status writePlanJson(const QString& path, const Simulation& simulation, const QString& planner, double planSeconds,
                     const std::string& chainName) {
  return writeFileAtomically(path.toStdString(), planJson(simulation, planner, planSeconds, chainName).dump(2) + "\n");
}

}  // namespace remat::gui
