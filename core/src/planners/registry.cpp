// runPlanner: name parsing, timing, and the simulation of the chosen plan.
#include "remat/planners/planners.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <initializer_list>

#include "remat/memory/simulator.hpp"

namespace remat {
namespace {

constexpr const char* kValidNames = "none, sqrt, greedy, uniform:K (K >= 1), dp, linear, optimal";

// Joins message parts. (GCC 12 at -O3 warns falsely, -Wrestrict, on "literal" + std::string.)
std::string join(std::initializer_list<std::string_view> parts) {
  std::string text;
  for (std::string_view part : parts) text.append(part);
  return text;
}

enum class Kind { None, Sqrt, Greedy, Uniform, Dp, Linear, Optimal };

struct ParsedName {
  Kind kind = Kind::None;
  std::size_t segments = 0;  // uniform:K
};

Result<ParsedName> parseName(std::string_view name) {
  static const std::pair<std::string_view, Kind> fixed[] = {{"none", Kind::None},     {"sqrt", Kind::Sqrt},
                                                            {"greedy", Kind::Greedy}, {"dp", Kind::Dp},
                                                            {"linear", Kind::Linear}, {"optimal", Kind::Optimal}};
  for (const auto& [text, kind] : fixed)
    if (name == text) return ParsedName{kind, 0};
  constexpr std::string_view kUniform = "uniform:";
  if (name.substr(0, kUniform.size()) == kUniform) {
    const std::string_view digits = name.substr(kUniform.size());
    std::size_t k = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || k == 0)
      return Status::invalid(
          join({"planner '", name, "': K must be a whole number >= 1 (uniform:K splits the chain into K segments)"}));
    return ParsedName{Kind::Uniform, k};
  }
  return Status::invalid(join({"unknown planner '", name, "'; valid names: ", kValidNames}));
}

char objectiveOf(Kind kind) {
  switch (kind) {
    case Kind::Dp: return 'A';
    case Kind::Linear: return 'R';
    case Kind::Optimal: return 'E';
    default: return '-';
  }
}

// The value of the result's objective for its plan (E for the fixed rules).
std::uint64_t objectiveScore(const PlanReport& result) {
  if (result.objective == "A") return result.aBytes;
  if (result.objective == "R") return result.rBytes;
  return result.dynamicPeakBytes;
}

Result<PlannerOutput> plan(const Chain& chain, const ParsedName& parsed, const PlannerOptions& options) {
  switch (parsed.kind) {
    case Kind::None: return PlannerOutput{};
    case Kind::Sqrt: return PlannerOutput{planSqrt(chain.size()), 0, 0};
    case Kind::Uniform: return PlannerOutput{planUniform(chain.size(), parsed.segments), 0, 0};
    case Kind::Greedy: return planGreedy(chain, options);
    case Kind::Dp: return planDp(chain, options);
    case Kind::Linear: return planLinear(chain, options);
    case Kind::Optimal: return planOptimal(chain, options);
  }
  return Status::internal("unhandled planner kind");
}

}  // namespace

Status checkPlannerName(std::string_view name) { return parseName(name).status(); }

std::vector<std::string> plannerNames() { return {"none", "sqrt", "greedy", "uniform:K", "dp", "linear", "optimal"}; }

std::vector<std::string> defaultComparePlanners(std::size_t layerCount) {
  std::size_t k =
      static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(std::max<std::size_t>(1, layerCount)))));
  k = std::max<std::size_t>(1, k);
  return {"none", "sqrt", "greedy", join({"uniform:", std::to_string(k)}), "dp", "linear", "optimal"};
}

Result<PlanReport> runPlanner(const Chain& chain, std::string_view name, const PlannerOptions& options) {
  auto parsed = parseName(name);
  if (!parsed) return parsed.status();
  if (chain.size() == 0) return Status::invalid(join({"chain '", chain.name, "' has no layers: nothing to plan"}));
  const auto start = std::chrono::steady_clock::now();
  auto planned = plan(chain, *parsed, options);
  const auto stop = std::chrono::steady_clock::now();
  if (!planned) return planned.status();
  PlanReport result;
  result.planner = std::string(name);
  result.objective = std::string(1, objectiveOf(parsed->kind));
  result.plan = std::move(planned->plan);
  result.planSeconds = std::chrono::duration<double>(stop - start).count();
  const Status valid = validatePlan(result.plan, chain.size());
  if (!valid)
    return Status::internal(join({"planner ", result.planner, " returned an invalid plan: ", valid.message()}));
  result.dynamicPeakBytes = dynamicPeak(chain, result.plan);
  result.staticBytes = chain.staticBytes();
  result.aBytes = objectiveA(chain, result.plan);
  result.rBytes = objectiveR(chain, result.plan);
  result.recomputeCost = recomputeCost(chain, result.plan);
  // The exact planners report the value they computed; it must be what their plan scores.
  const std::uint64_t recomputed = objectiveScore(result);
  result.objectiveBytes = result.objective == "-" ? result.dynamicPeakBytes : planned->objectiveBytes;
  if (result.objectiveBytes != recomputed)
    return Status::internal(
        join({"planner ", result.planner, " computed ", result.objective, " = ", std::to_string(result.objectiveBytes),
              " bytes but its plan scores ", std::to_string(recomputed)}));
  return result;
}

PlanReport planReportOf(const Simulation& simulation, std::string_view planner, double planSeconds) {
  PlanReport result;
  result.planner = std::string(planner);
  auto parsed = parseName(planner);
  result.objective = std::string(1, parsed ? objectiveOf(parsed->kind) : '-');
  result.plan = simulation.plan;
  result.dynamicPeakBytes = simulation.dynamicPeakBytes;
  result.staticBytes = simulation.staticBytes;
  result.aBytes = simulation.aBytes;
  result.rBytes = simulation.rBytes;
  result.recomputeCost = simulation.recomputeCost;
  result.planSeconds = planSeconds;
  result.objectiveBytes = objectiveScore(result);
  return result;
}

}  // namespace remat
