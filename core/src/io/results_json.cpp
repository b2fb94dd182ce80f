#include "remat/io/results_json.hpp"

#include <nlohmann/json.hpp>

namespace remat {
namespace {

// The scores a plan object and a simulation object share (PlanReport and Simulation name them alike).
template <typename Scored>
nlohmann::json scoresToJson(const Scored& s) {
  return {{"checkpoints", s.plan.checkpoints},
          {"dynamic_peak_bytes", s.dynamicPeakBytes},
          {"static_bytes", s.staticBytes},
          {"peak_bytes", s.peakBytes()},
          {"A_bytes", s.aBytes},
          {"R_bytes", s.rBytes},
          {"recompute_cost", s.recomputeCost}};
}

}  // namespace

nlohmann::json planReportToJson(const PlanReport& report) {
  nlohmann::json j = scoresToJson(report);
  j["planner"] = report.planner;
  j["objective"] = report.objective;
  j["objective_bytes"] = report.objectiveBytes;
  j["plan_seconds"] = report.planSeconds;
  return j;
}

nlohmann::json planReportToJson(const PlanReport& report, const Chain& chain) {
  nlohmann::json j = planReportToJson(report);
  nlohmann::json names = nlohmann::json::array();
  for (std::size_t l : report.plan.checkpoints)
    names.push_back(l >= 1 && l <= chain.size() ? nlohmann::json(chain.layers[l - 1].name) : nlohmann::json(nullptr));
  j["checkpoint_names"] = std::move(names);
  return j;
}

nlohmann::json simulationToJson(const Simulation& simulation) {
  nlohmann::json ops = nlohmann::json::array();
  for (const TimelineEntry& e : simulation.timeline.entries) {
    nlohmann::json op = {{"op", std::string(opName(e.op.kind))}};
    op["layer"] = e.op.kind == OpKind::Seed ? nlohmann::json(nullptr) : nlohmann::json(e.op.layer);
    op["footprint_bytes"] = e.footprintBytes;
    op["live_after_bytes"] = e.liveAfterBytes;
    ops.push_back(std::move(op));
  }
  nlohmann::json j = scoresToJson(simulation);
  j["peak_op_index"] = simulation.peakOpIndex;
  j["ops"] = std::move(ops);
  return j;
}

}  // namespace remat
