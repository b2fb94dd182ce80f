#include "document/plan_export.hpp"

#include <nlohmann/json.hpp>

#include "remat/input/atomic_file.hpp"
#include "remat/planners/planners.hpp"
#include "remat/report/results_json.hpp"

namespace remat::gui {

nlohmann::json planJson(const Simulation& simulation, const QString& planner, double planSeconds, const Chain& chain) {
  nlohmann::json json = planReportToJson(planReportOf(simulation, planner.toStdString(), planSeconds), chain);
  json["chain"] = chain.name;
  return json;
}

Status writePlanJson(const QString& path, const Simulation& simulation, const QString& planner, double planSeconds,
                     const Chain& chain, const WriteOptions& options) {
  return writeFileAtomically(path.toStdString(), planJson(simulation, planner, planSeconds, chain).dump(2) + "\n",
                             options);
}

}  // namespace remat::gui
