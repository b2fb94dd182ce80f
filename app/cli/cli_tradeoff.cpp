// `remat tradeoff CHAIN [--planners LIST] [--batch N] [--json] [--timeout SECONDS] [--progress]`:
// the exact Pareto front of the dynamic peak E against the recompute cost over all plans, and
// where the named planners fall against it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli.hpp"
#include "cli_args.hpp"
#include "remat/model/precision.hpp"
#include "remat/planners/registry.hpp"
#include "remat/planners/tradeoff.hpp"
#include "remat/report/results_json.hpp"

namespace remat::cli {
namespace {

struct TradeoffOptions {
  std::string chainPath;
  std::int64_t batch = 0;
  std::string input;  // --input: an ONNX model's data input by name (empty: its only one)
  StepArguments step;
  std::string planners;  // empty: compare's defaults
  bool json = false;
  PlanningArgs planning;
};

// "3,7,12" cut to about `width` characters, with the count: "3,7,12,... (40)".
std::string shortCheckpoints(const Plan& plan, std::size_t width) {
  if (plan.checkpoints.empty()) return "(none: store all)";
  std::string text = formatCheckpointList(plan);
  if (text.size() > width) {
    text.resize(text.rfind(',', width));
    text += ",...";
  }
  return text + " (" + std::to_string(plan.checkpoints.size()) + ")";
}

void printFront(const Chain& chain, const TradeoffFront& front, double seconds, std::ostream& out) {
  char line[320];
  std::snprintf(line, sizeof line, "%zu plans on the Pareto front of E against the recompute cost (exact, %.3f ms)\n\n",
                front.points.size(), 1e3 * seconds);
  out << line;
  std::snprintf(line, sizeof line, "%5s  %12s  %12s  %22s  %8s  %s\n", "point", "peak (E)", "total peak", "recompute",
                "share", "checkpoints");
  out << line;
  for (std::size_t i = 0; i < front.points.size(); ++i) {
    const FrontPoint& p = front.points[i];
    std::snprintf(line, sizeof line, "%5zu  %12s  %12s  %22s  %8s  %s\n", i + 1,
                  formatBytes(p.dynamicPeakBytes).c_str(),
                  formatBytes(chain.staticBytes() + p.dynamicPeakBytes).c_str(),
                  formatRecomputeCost(chain, p.recomputeCost).c_str(),
                  formatRecomputeShare(chain, p.recomputeCost).c_str(), shortCheckpoints(p.plan, 60).c_str());
    out << line;
  }
}

// "on the front (point 4)" or what the plan gives away against the front, with the points.
std::string placementText(const Chain& chain, const FrontPlacement& placement) {
  if (placement.onFront) return "on the front (point " + std::to_string(placement.samePeakPoint + 1) + ")";
  std::string text = "dominated:";
  if (placement.extraRecomputeCost > 0.0)
    text += " point " + std::to_string(placement.samePeakPoint + 1) + " peaks no higher for " +
            formatRecomputeCost(chain, placement.extraRecomputeCost) + " less;";
  if (placement.extraPeakBytes > 0)
    text += " point " + std::to_string(placement.sameCostPoint + 1) + " costs no more with " +
            formatBytes(placement.extraPeakBytes) + " less peak;";
  text.pop_back();
  return text;
}

void printPlanners(const Chain& chain, const TradeoffFront& front, const std::vector<PlanReport>& planners,
                   std::ostream& out) {
  char line[512];
  out << "\nThe planners against the front:\n\n";
  std::snprintf(line, sizeof line, "%-14s  %12s  %22s  %s\n", "planner", "peak (E)", "recompute", "where");
  out << line;
  const double tolerance = recomputeCostTolerance(chain);
  for (const PlanReport& r : planners) {
    const FrontPlacement placement = placeAgainstFront(front, r.dynamicPeakBytes, r.recomputeCost, tolerance);
    std::snprintf(line, sizeof line, "%-14s  %12s  %22s  %s\n", r.planner.c_str(),
                  formatBytes(r.dynamicPeakBytes).c_str(), formatRecomputeCost(chain, r.recomputeCost).c_str(),
                  placementText(chain, placement).c_str());
    out << line;
  }
}

Status runTradeoff(const TradeoffOptions& options, Io& io) {
  auto chain = loadChainArgument(options.chainPath, options.batch, options.step, options.input);
  if (!chain) return chain.status();
  auto names = parsePlannerList(options.planners, chain->size());
  if (!names) return names.status();
  PlanningMonitor monitor(options.planning, io.err);
  const auto start = std::chrono::steady_clock::now();
  auto front = monitor.front(*chain);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!front) return front.status();
  std::vector<PlanReport> planners;
  for (const std::string& name : *names) {
    auto result = monitor.plan(*chain, name);
    if (!result) return result.status();
    planners.push_back(std::move(result).value());
  }
  if (options.json) {
    io.out << tradeoffToJson(*chain, *front, planners).dump() << "\n";
    return Status::ok();
  }
  io.out << "chain " << chain->name << " (" << chain->size() << " layers, " << describeChainDTypes(*chain)
         << "), static " << formatBytes(chain->staticBytes()) << " " << describeStaticParts(*chain) << "\n";
  io.out << describeCostUnit(*chain) << "\n";
  printFront(*chain, *front, seconds, io.out);
  printPlanners(*chain, *front, planners, io.out);
  return Status::ok();
}

}  // namespace

void addTradeoffCommand(CLI::App& app, Action& action) {
  auto options = std::make_shared<TradeoffOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tradeoff", "The exact Pareto front of peak memory against recompute cost, and the planners placed on it");
  addChainArgument(cmd, options->chainPath, options->batch, options->input);
  addStepOptions(cmd, options->step);
  cmd->add_option(
      "--planners", options->planners,
      "Comma-separated planners to place against the front (default: " + defaultComparePlannersText() + ")");
  cmd->add_flag("--json", options->json, "Print {\"front\": [...], \"planners\": [...]} (docs/formats.md)");
  addPlanningOptions(*cmd, options->planning);
  cmd->callback([options, &action] { action = [options](Io& io) { return runTradeoff(*options, io); }; });
}

}  // namespace remat::cli
