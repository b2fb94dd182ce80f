// `remat plan CHAIN (--planner NAME | --fit CAPACITY [--device NAME]) [--batch N] [--json]` and
// `remat compare CHAIN [--planners LIST] [--batch N] [--json]`
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "cli.hpp"
#include "cli_args.hpp"
#include "remat/base/device_names.hpp"
#include "remat/base/duration.hpp"
#include "remat/base/text.hpp"
#include "remat/model/precision.hpp"
#include "remat/planners/planners.hpp"
#include "remat/planners/registry.hpp"
#include "remat/report/results_json.hpp"

namespace remat::cli {
namespace {

struct PlanOptions {
  std::string chainPath;
  std::int64_t batch = 0;
  std::string input;  // --input: an ONNX model's data input by name (empty: its only one)
  StepArguments step;
  std::string planner;
  std::string fit;                     // --fit CAPACITY: the budget planner for CAPACITY - static
  std::string device{kGpuDeviceName};  // whose available memory --fit device means
  bool json = false;
  PlanningArgs planning;
};

struct CompareOptions {
  std::string chainPath;
  std::int64_t batch = 0;
  std::string input;  // --input: an ONNX model's data input by name (empty: its only one)
  StepArguments step;
  std::string planners;  // empty: defaultComparePlanners
  bool json = false;
  PlanningArgs planning;
};

void printPlan(const Chain& chain, const PlanReport& r, std::ostream& out) {
  out << "chain        " << chain.name << " (" << chain.size() << " layers, " << describeChainDTypes(chain) << ")\n";
  out << "planner      " << r.planner << " (" << objectiveMeaning(r.objective) << ")\n";
  out << "checkpoints  "
      << (r.plan.checkpoints.empty()
              ? std::string("(none: store all)")
              : formatCheckpointList(r.plan) + " (" + std::to_string(r.plan.checkpoints.size()) + " checkpoints)")
      << "\n";
  out << "peak (E)     " << formatBytes(r.dynamicPeakBytes) << " dynamic\n";
  out << "static       " << formatBytes(r.staticBytes) << " " << describeStaticParts(chain) << "\n";
  if (chain.step != defaultStepOptions(chain.dtype)) out << "step         " << describeStepOptions(chain.step) << "\n";
  out << "total peak   " << formatBytes(r.peakBytes()) << "\n";
  out << "objective A  " << formatBytes(r.aBytes) << "\n";
  out << "objective R  " << formatBytes(r.rBytes) << "\n";
  out << "recompute    " << describeRecomputeCost(chain, r.recomputeCost) << ": forward cost of the R and RE ops, "
      << costUnitDescription(chain) << "\n";
  out << "plan time    " << formatDuration(r.planSeconds) << "\n";
}

void printComparison(const Chain& chain, const std::vector<PlanReport>& results, std::ostream& out) {
  out << "chain " << chain.name << " (" << chain.size() << " layers, " << describeChainDTypes(chain) << "), static "
      << formatBytes(chain.staticBytes()) << " " << describeStaticParts(chain) << "\n";
  out << describeCostUnit(chain) << "\n\n";
  char line[320];
  std::snprintf(line, sizeof line, "%-14s  %-3s  %12s  %12s  %12s  %11s  %22s  %8s  %10s\n", "planner", "obj",
                "peak (E)", "A", "R", "checkpoints", "recompute", "share", "plan time");
  out << line;
  for (const PlanReport& r : results) {
    std::snprintf(line, sizeof line, "%-14s  %-3s  %12s  %12s  %12s  %11zu  %22s  %8s  %10s\n", r.planner.c_str(),
                  std::string(objectiveSymbol(r.objective)).c_str(), formatBytes(r.dynamicPeakBytes).c_str(),
                  formatBytes(r.aBytes).c_str(), formatBytes(r.rBytes).c_str(), r.plan.checkpoints.size(),
                  formatRecomputeCost(chain, r.recomputeCost).c_str(),
                  formatRecomputeShare(chain, r.recomputeCost).c_str(), formatDuration(r.planSeconds).c_str());
    out << line;
  }
}

Status runPlan(const PlanOptions& options, Io& io) {
  if (options.planner.empty() == options.fit.empty())
    return Status::invalid("give exactly one of --planner NAME and --fit CAPACITY");
  // Check the name first so a bad name is reported without loading a big chain.
  if (!options.planner.empty()) REMAT_RETURN_IF_ERROR(checkPlannerName(options.planner).withContext("--planner"));
  auto chain = loadChainArgument(options.chainPath, options.batch, options.step, options.input);
  if (!chain) return chain.status();
  std::optional<FitBudget> fit;
  Result<PlanReport> result = Status::internal("no planner ran");
  if (options.fit.empty()) {
    PlanningMonitor monitor(options.planning, io.err);
    result = monitor.plan(*chain, options.planner);
  } else {
    auto budget = fitBudget(*chain, options.fit, options.device);
    if (!budget) return budget.status();
    fit = *budget;
    result = planToFit(*chain, *fit);
  }
  if (!result) return result.status();
  if (options.json) {
    nlohmann::json j = planReportToJson(*result, *chain);
    if (fit) j["capacity_bytes"] = fit->budget.capacityBytes;
    io.out << j.dump() << "\n";
  } else {
    if (fit)
      io.out << "fit          " << fit->capacityText << ": " << formatBytes(fit->budget.budgetBytes)
             << " for the dynamic peak after " << formatBytes(chain->staticBytes()) << " static\n";
    printPlan(*chain, *result, io.out);
  }
  return Status::ok();
}

Status runCompare(const CompareOptions& options, Io& io) {
  if (!options.planners.empty()) {
    auto names = parsePlannerList(options.planners, 1);
    if (!names) return names.status();
  }
  auto chain = loadChainArgument(options.chainPath, options.batch, options.step, options.input);
  if (!chain) return chain.status();
  auto names = parsePlannerList(options.planners, chain->size());
  if (!names) return names.status();
  std::vector<PlanReport> results;
  PlanningMonitor monitor(options.planning, io.err);
  for (const std::string& name : *names) {
    auto result = monitor.plan(*chain, name);
    if (!result) return result.status();
    results.push_back(std::move(*result));
  }
  if (options.json) {
    nlohmann::json plans = nlohmann::json::array();
    for (const PlanReport& r : results) plans.push_back(planReportToJson(r, *chain));
    io.out << nlohmann::json{{"chain", chain->name}, {"plans", std::move(plans)}}.dump() << "\n";
  } else {
    printComparison(*chain, results, io.out);
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<std::string>> parsePlannerList(const std::string& text, std::size_t layerCount) {
  if (text.empty()) return defaultComparePlanners(layerCount);
  std::vector<std::string> names;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty())
      return Status::invalid("--planners " + quoteText(text) + ": item " + std::to_string(names.size() + 1) +
                             " is empty");
    const Status valid = checkPlannerName(item);
    if (!valid) return valid.withContext("--planners");
    names.push_back(item);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return names;
}

void addPlanCommands(CLI::App& app, Action& action) {
  auto plan = std::make_shared<PlanOptions>();
  CLI::App* planCmd = app.add_subcommand("plan", "Choose checkpoints with one planner");
  addChainArgument(planCmd, plan->chainPath, plan->batch, plan->input);
  addStepOptions(planCmd, plan->step);
  planCmd->add_option("--planner", plan->planner, "One of " + validPlannerNames());
  planCmd->add_option("--fit", plan->fit,
                      "The least recompute that fits in CAPACITY (a byte size such as 80GiB, static memory included), "
                      "or 'device' for what --device has available");
  planCmd->add_option("--device", plan->device, "The device whose available memory --fit device means: cpu or gpu")
      ->capture_default_str();
  planCmd->add_flag("--json", plan->json, "Print the plan object of docs/formats.md");
  addPlanningOptions(*planCmd, plan->planning);
  planCmd->callback([plan, &action] { action = [plan](Io& io) { return runPlan(*plan, io); }; });

  auto compare = std::make_shared<CompareOptions>();
  CLI::App* compareCmd = app.add_subcommand("compare", "Run several planners on one chain and compare their plans");
  addChainArgument(compareCmd, compare->chainPath, compare->batch, compare->input);
  addStepOptions(compareCmd, compare->step);
  compareCmd->add_option("--planners", compare->planners,
                         "Comma-separated planner names (default: " + defaultComparePlannersText() + ")");
  compareCmd->add_flag("--json", compare->json, "Print {\"plans\": [plan objects]}");
  addPlanningOptions(*compareCmd, compare->planning);
  compareCmd->callback([compare, &action] { action = [compare](Io& io) { return runCompare(*compare, io); }; });
}

}  // namespace remat::cli
