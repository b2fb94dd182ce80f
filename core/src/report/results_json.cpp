#include "remat/report/results_json.hpp"

#include <nlohmann/json.hpp>

#include "export_common.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/token_input.hpp"

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
          {"recompute_cost", s.recomputeCost},
          {"recompute_cost_unit", std::string(costUnitName(s.recomputeCostUnit))},
          {"recompute_share", s.recomputeShare}};
}

}  // namespace

nlohmann::json planReportToJson(const PlanReport& report) {
  nlohmann::json j = scoresToJson(report);
  j["planner"] = report.planner;
  j["objective"] = objectiveSymbol(report.objective);
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
  // The static block by part and the step that makes it (memory-model.md section 11).
  const StaticBreakdown parts = staticBreakdown(chain);
  j["static"] = {{"input_bytes", parts.inputBytes},
                 {"input_dtype", std::string(inputDTypeName(chain))},  // int64 for token ids
                 {"label_bytes", parts.labelBytes},                    // int64, beside the input
                 {"weight_bytes", parts.weightBytes},
                 {"gradient_bytes", parts.gradientBytes},
                 {"optimizer_state_bytes", parts.optimizerStateBytes}};
  j["step"] = detail::stepOptionsJson(chain.step);
  // Not static: under a mixed precision each conv and linear layer's saved half weight copy is
  // part of its E (memory-model.md section 11.7); the sum, for reading the peak.
  j["autocast_weight_copy_bytes"] = autocastWeightCopyBytes(chain);
  return j;
}

nlohmann::json simulationToJson(const Simulation& simulation) {
  nlohmann::json ops = nlohmann::json::array();
  for (const TimelineEntry& e : simulation.timeline.entries) {
    nlohmann::json op = {{"op", std::string(opName(e.op.kind))}};
    op["layer"] = !e.op.hasLayer() ? nlohmann::json(nullptr) : nlohmann::json(e.op.layer);
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

namespace remat {

nlohmann::json tradeoffToJson(const Chain& chain, const TradeoffFront& front, const std::vector<PlanReport>& planners) {
  nlohmann::json points = nlohmann::json::array();
  for (const FrontPoint& p : front.points)
    points.push_back({{"dynamic_peak_bytes", p.dynamicPeakBytes},
                      {"peak_bytes", chain.staticBytes() + p.dynamicPeakBytes},
                      {"recompute_cost", p.recomputeCost},
                      {"recompute_share", recomputeShare(chain, p.recomputeCost)},
                      {"checkpoints", p.plan.checkpoints}});
  nlohmann::json placed = nlohmann::json::array();
  const double tolerance = recomputeCostTolerance(chain);
  for (const PlanReport& r : planners) {
    const FrontPlacement placement = placeAgainstFront(front, r.dynamicPeakBytes, r.recomputeCost, tolerance);
    nlohmann::json j = planReportToJson(r, chain);
    j["on_front"] = placement.onFront;
    j["extra_peak_bytes"] = placement.extraPeakBytes;
    j["extra_recompute_cost"] = placement.extraRecomputeCost;
    placed.push_back(std::move(j));
  }
  return {{"chain", chain.name},
          {"static_bytes", chain.staticBytes()},
          {"recompute_cost_unit", std::string(costUnitName(chainCostUnit(chain)))},
          {"forward_cost", forwardCost(chain)},
          {"front", std::move(points)},
          {"planners", std::move(placed)}};
}

}  // namespace remat
