// The planner table and what reads it: name parsing, the listed names, runPlanner (timing and
// the simulation of the chosen plan) and planReportOf.
#include "remat/planners/registry.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <initializer_list>

#include "remat/base/text.hpp"
#include "remat/base/units.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/planners/tradeoff.hpp"

namespace remat {
namespace {

// K = ceil(sqrt n): as many segments as a segment has layers.
std::uint64_t sqrtSegments(std::size_t layerCount) {
  const double n = static_cast<double>(std::max<std::size_t>(1, layerCount));
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(std::sqrt(n))));
}

// The planners in the registry's signature; only uniform reads the parameter.
Result<PlannerOutput> storeEverything(const Chain&, std::uint64_t, const PlannerOptions&) { return PlannerOutput{}; }
Result<PlannerOutput> sqrtRule(const Chain& chain, std::uint64_t, const PlannerOptions&) {
  return PlannerOutput{planSqrt(chain.size()), 0, 0};
}
Result<PlannerOutput> uniformRule(const Chain& chain, std::uint64_t segments, const PlannerOptions&) {
  // planUniform clamps K to n; a name the user typed is refused instead, so no plan silently
  // differs from what was asked.
  if (segments > chain.size())
    return Status::invalid("planner 'uniform:" + std::to_string(segments) + "': K = " + std::to_string(segments) +
                           " segments, but the chain has " + std::to_string(chain.size()) +
                           " layers (uniform:K needs 1 <= K <= n)");
  return PlannerOutput{planUniform(chain.size(), static_cast<std::size_t>(segments)), 0, 0};
}
Result<PlannerOutput> greedy(const Chain& chain, std::uint64_t, const PlannerOptions& options) {
  return planGreedy(chain, options);
}
Result<PlannerOutput> dp(const Chain& chain, std::uint64_t, const PlannerOptions& options) {
  return planDp(chain, options);
}
Result<PlannerOutput> linear(const Chain& chain, std::uint64_t, const PlannerOptions& options) {
  return planLinear(chain, options);
}
Result<PlannerOutput> optimal(const Chain& chain, std::uint64_t, const PlannerOptions& options) {
  return planOptimal(chain, options);
}
Result<PlannerOutput> budget(const Chain& chain, std::uint64_t budgetBytes, const PlannerOptions& options) {
  return planBudget(chain, budgetBytes, options);
}

constexpr PlannerParameter kNoParameter{};
constexpr CompareDefault kInCompare{true, nullptr, {}};

// The registry. Order is the listing order (plannerNames, the picker, compare's defaults).
constexpr PlannerEntry kPlanners[] = {
    {"none", kNoParameter, Objective::None, "No checkpoints: store every activation", kInCompare, storeEverything},
    {"sqrt", kNoParameter, Objective::None, "Chen et al.'s sqrt(n) rule", kInCompare, sqrtRule},
    {"greedy", kNoParameter, Objective::None, "A greedy rule on the activation sizes", kInCompare, greedy},
    {"uniform",
     {PlannerParameterKind::Count, "K", "splits the chain into K segments"},
     Objective::None,
     "PyTorch checkpoint_sequential with K segments",
     {true, sqrtSegments, "ceil(sqrt n)"},
     uniformRule},
    {"dp", kNoParameter, Objective::A, "The paper's O(n^3) dynamic program, minimising A", kInCompare, dp},
    {"linear", kNoParameter, Objective::R, "The paper's linear-time planner, minimising R", kInCompare, linear},
    {"optimal", kNoParameter, Objective::E, "Exact minimum of the true peak E (slower)", kInCompare, optimal},
    {"budget",
     {PlannerParameterKind::ByteSize, "SIZE", "keeps the dynamic peak E within SIZE"},
     Objective::RecomputeCost,
     "The least recompute cost of any plan whose peak E fits in SIZE (exact)",
     {},
     budget},
};

// Joins message parts. (GCC 12 at -O3 warns falsely, -Wrestrict, on "literal" + std::string.)
std::string join(std::initializer_list<std::string_view> parts) {
  std::string text;
  for (std::string_view part : parts) text.append(part);
  return text;
}

// What the valid-names message says after a parametrised name: "(K >= 1)".
std::string parameterRule(const PlannerParameter& parameter) {
  switch (parameter.kind) {
    case PlannerParameterKind::None: return "";
    case PlannerParameterKind::Count: return join({" (", parameter.symbol, " >= 1)"});
    case PlannerParameterKind::ByteSize: return join({" (", parameter.symbol, " a byte size such as 4GiB)"});
  }
  return "";
}

Result<std::uint64_t> parseCount(const PlannerEntry& entry, std::string_view name, std::string_view text) {
  std::uint64_t count = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || count == 0)
    return Status::invalid(
        join({"planner ", quoteText(name, 40), ": ", entry.parameter.symbol, " must be a whole number >= 1 (",
              entry.listedName(), " ", entry.parameter.explanation, ")"}));
  return count;
}

Result<std::uint64_t> parseSize(const PlannerEntry& entry, std::string_view name, std::string_view text) {
  Result<std::uint64_t> bytes = parseByteSize(text);
  if (!bytes)
    return Status::invalid(
        join({"planner ", quoteText(name, 40), ": ", entry.parameter.symbol, " must be a byte size (",
              entry.listedName(), " ", entry.parameter.explanation, "): ", bytes.status().message()}));
  return bytes;
}

// The value of the result's objective for its plan (E for the fixed rules and for budget, whose
// objective, the recompute cost, is not in bytes).
std::uint64_t objectiveScore(const PlanReport& result) {
  if (result.objective == Objective::A) return result.aBytes;
  if (result.objective == Objective::R) return result.rBytes;
  return result.dynamicPeakBytes;
}

// Fills the fields of the simulated plan (E, static, A, R, recompute cost).
void scorePlan(const Chain& chain, PlanReport& result) {
  result.dynamicPeakBytes = dynamicPeak(chain, result.plan);
  result.staticBytes = chain.staticBytes();
  result.aBytes = objectiveA(chain, result.plan);
  result.rBytes = objectiveR(chain, result.plan);
  result.recomputeCost = recomputeCost(chain, result.plan);
  result.recomputeCostUnit = chainCostUnit(chain);
  result.recomputeShare = recomputeShare(chain, result.recomputeCost);
}

}  // namespace

std::string_view objectiveSymbol(Objective objective) {
  switch (objective) {
    case Objective::A: return "A";
    case Objective::R: return "R";
    case Objective::E: return "E";
    case Objective::RecomputeCost: return "C";
    case Objective::None: return "-";
  }
  return "-";
}

std::string_view objectiveMeaning(Objective objective) {
  switch (objective) {
    case Objective::A: return "minimises objective A (all checkpoints alive at the peak)";
    case Objective::R: return "minimises objective R (checkpoints up to the segment alive)";
    case Objective::E: return "minimises E, the simulated dynamic peak";
    case Objective::RecomputeCost: return "the least recompute cost of the plans whose E fits the budget";
    case Objective::None: return "a fixed rule or heuristic";
  }
  return "a fixed rule or heuristic";
}

std::string budgetPlannerName(std::uint64_t budgetBytes) {
  constexpr std::string_view kBudget = "budget";  // the row of planBudget above
  return join({kBudget, ":", std::to_string(budgetBytes)});
}

std::string readablePlannerName(std::string_view name) {
  Result<ParsedPlannerName> parsed = parsePlannerName(name);
  if (!parsed || parsed->entry->plan != budget) return std::string(name);
  return join({"budget (dynamic \u2264 ", formatBytes(parsed->parameter), ")"});
}

std::string PlannerEntry::listedName() const {
  return hasParameter() ? join({name, ":", parameter.symbol}) : std::string(name);
}

std::span<const PlannerEntry> plannerRegistry() { return kPlanners; }

Result<std::uint64_t> parsePlannerParameter(const PlannerEntry& entry, std::string_view name, std::string_view text) {
  switch (entry.parameter.kind) {
    case PlannerParameterKind::None: break;
    case PlannerParameterKind::Count: return parseCount(entry, name, text);
    case PlannerParameterKind::ByteSize: return parseSize(entry, name, text);
  }
  return Status::invalid(join({"planner ", quoteText(name, 40), " takes no parameter"}));
}

Result<ParsedPlannerName> parsePlannerName(std::string_view name) {
  const std::size_t colon = name.find(':');
  const std::string_view base = name.substr(0, colon);
  for (const PlannerEntry& entry : kPlanners) {
    if (entry.name != base || entry.hasParameter() != (colon != std::string_view::npos)) continue;
    if (!entry.hasParameter()) return ParsedPlannerName{&entry, 0};
    auto parameter = parsePlannerParameter(entry, name, name.substr(colon + 1));
    if (!parameter) return parameter.status();
    return ParsedPlannerName{&entry, *parameter};
  }
  return Status::invalid(join({"unknown planner ", quoteText(name, 40), "; valid names: ", validPlannerNames()}));
}

std::string validPlannerNames() {
  std::string text;
  for (const PlannerEntry& entry : kPlanners)
    text += join({text.empty() ? "" : ", ", entry.listedName(), parameterRule(entry.parameter)});
  return text;
}

std::string defaultComparePlannersText() {
  std::string text;
  for (const PlannerEntry& entry : kPlanners) {
    if (!entry.compare.listed) continue;
    text += join({text.empty() ? "" : ",", entry.listedName()});
    if (entry.hasParameter()) text += join({" with ", entry.parameter.symbol, " = ", entry.compare.parameterRule});
  }
  return text;
}

Status checkPlannerName(std::string_view name) { return parsePlannerName(name).status(); }

std::vector<std::string> plannerNames() {
  std::vector<std::string> names;
  for (const PlannerEntry& entry : kPlanners) names.push_back(entry.listedName());
  return names;
}

std::vector<std::string> defaultComparePlanners(std::size_t layerCount) {
  std::vector<std::string> names;
  for (const PlannerEntry& entry : kPlanners) {
    if (!entry.compare.listed) continue;
    names.push_back(entry.hasParameter() ? join({entry.name, ":", std::to_string(entry.compare.parameter(layerCount))})
                                         : std::string(entry.name));
  }
  return names;
}

Result<PlanReport> runPlanner(const Chain& chain, std::string_view name, const PlannerOptions& options) {
  auto parsed = parsePlannerName(name);
  if (!parsed) return parsed.status();
  if (chain.size() == 0) return Status::invalid(join({"chain '", chain.name, "' has no layers: nothing to plan"}));
  const auto start = std::chrono::steady_clock::now();
  auto planned = parsed->entry->plan(chain, parsed->parameter, options);
  const auto stop = std::chrono::steady_clock::now();
  if (!planned) return planned.status();
  if (options.progress) options.progress(1.0);  // the rules and an early-stopping dp report nothing more
  PlanReport result;
  result.planner = std::string(name);
  result.objective = parsed->entry->objective;
  result.plan = std::move(planned->plan);
  result.planSeconds = std::chrono::duration<double>(stop - start).count();
  const Status valid = validatePlan(result.plan, chain.size());
  if (!valid)
    return Status::internal(join({"planner ", result.planner, " returned an invalid plan: ", valid.message()}));
  scorePlan(chain, result);
  // The exact planners report the value they computed; it must be what their plan scores.
  const std::uint64_t recomputed = objectiveScore(result);
  result.objectiveBytes = result.objective == Objective::None ? result.dynamicPeakBytes : planned->objectiveBytes;
  if (result.objectiveBytes != recomputed)
    return Status::internal(
        join({"planner ", result.planner, " computed ", objectiveSymbol(result.objective), " = ",
              std::to_string(result.objectiveBytes), " bytes but its plan scores ", std::to_string(recomputed)}));
  return result;
}

PlanReport planReportOf(const Simulation& simulation, std::string_view planner, double planSeconds) {
  PlanReport result;
  result.planner = std::string(planner);
  auto parsed = parsePlannerName(planner);
  result.objective = parsed ? parsed->entry->objective : Objective::None;
  result.plan = simulation.plan;
  result.dynamicPeakBytes = simulation.dynamicPeakBytes;
  result.staticBytes = simulation.staticBytes;
  result.aBytes = simulation.aBytes;
  result.rBytes = simulation.rBytes;
  result.recomputeCost = simulation.recomputeCost;
  result.recomputeCostUnit = simulation.recomputeCostUnit;
  result.recomputeShare = simulation.recomputeShare;
  result.planSeconds = planSeconds;
  result.objectiveBytes = objectiveScore(result);
  return result;
}

}  // namespace remat
