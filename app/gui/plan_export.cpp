#include "plan_export.hpp"

#include <nlohmann/json.hpp>

#include "remat/io/chain_file.hpp"
#include "remat/planners/planners.hpp"
#include "remat/io/results_json.hpp"

namespace remat::gui {

nlohmann::json planJson(const Simulation& simulation, const QString& planner, double planSeconds,
                        const std::string& chainName) {
  nlohmann::json json = planReportToJson(planReportOf(simulation, planner.toStdString(), planSeconds));
  json["chain"] = chainName;
  return json;
}

Status writePlanJson(const QString& path, const Simulation& simulation, const QString& planner, double planSeconds,
                     const std::string& chainName) {
  return writeFileAtomically(path.toStdString(), planJson(simulation, planner, planSeconds, chainName).dump(2) + "\n");
}

}  // namespace remat::gui
