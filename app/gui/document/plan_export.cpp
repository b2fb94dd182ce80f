#include "document/plan_export.hpp"

#include <nlohmann/json.hpp>

#include "remat/input/atomic_file.hpp"
#include "remat/planners/planners.hpp"
#include "remat/report/results_json.hpp"

namespace remat::gui {

nlohmann::json planJson(const Simulation& simulation, const QString& planner, double planSeconds,
                        const std::string& chainName) {
  nlohmann::json json = planReportToJson(planReportOf(simulation, planner.toStdString(), planSeconds));
  json["chain"] = chainName;
  return json;
}

Status writePlanJson(const QString& path, const Simulation& simulation, const QString& planner, double planSeconds,
                     const std::string& chainName, const WriteOptions& options) {
  return writeFileAtomically(path.toStdString(), planJson(simulation, planner, planSeconds, chainName).dump(2) + "\n",
                             options);
}

}  // namespace remat::gui
