#pragma once
// The planner registry: one row per planner, read by name parsing, the valid-names message,
// plannerNames(), defaultComparePlanners(), runPlanner(), planReportOf(), the CLI's help and the
// explorer's planner picker. Adding a planner is adding one row to the table in registry.cpp.
//
// A planner takes at most one parameter, written after a colon: "uniform:4". The parameter's kind
// says how its text is read: a Count is a whole number >= 1 (std::from_chars, no sign, no spaces);
// a ByteSize is what remat::parseByteSize reads ("4096", "1.5GiB"). The planner function receives
// the value (0 for planners without a parameter) and judges its range beyond that itself.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"
#include "remat/planners/planners.hpp"

namespace remat {

enum class PlannerParameterKind { None, Count, ByteSize };

struct PlannerParameter {
  PlannerParameterKind kind = PlannerParameterKind::None;
  std::string_view symbol;       // "K" of "uniform:K"; empty without a parameter
  std::string_view explanation;  // completes "uniform:K ...": "splits the chain into K segments"
};

// Plans `chain`; `parameter` is the parsed parameter (0 when the planner takes none).
using PlannerFunction = Result<PlannerOutput> (*)(const Chain& chain, std::uint64_t parameter,
                                                  const PlannerOptions& options);

// Whether `remat compare` runs a planner by default; a parametrised planner runs with the value
// parameter(layer count), which the help describes as parameterRule ("ceil(sqrt n)").
struct CompareDefault {
  bool listed = false;
  std::uint64_t (*parameter)(std::size_t layerCount) = nullptr;
  std::string_view parameterRule;
};

struct PlannerEntry {
  std::string_view name;  // what precedes the colon of a parametrised name: "uniform"
  PlannerParameter parameter;
  Objective objective = Objective::None;  // what the planner minimises
  std::string_view description;           // one line, for tooltips
  CompareDefault compare;
  PlannerFunction plan = nullptr;

  bool hasParameter() const { return parameter.kind != PlannerParameterKind::None; }
  // The name as listed: "dp", "uniform:K".
  std::string listedName() const;
};

// Every planner, in the order the names are listed.
std::span<const PlannerEntry> plannerRegistry();

struct ParsedPlannerName {
  const PlannerEntry* entry = nullptr;  // a row of plannerRegistry(); never null in a result
  std::uint64_t parameter = 0;
};

// "dp" -> dp; "uniform:4" -> uniform with 4. An unknown name, or a parametrised planner's name
// without its colon, is InvalidInput listing validPlannerNames(); a bad parameter is InvalidInput
// naming the planner and the parameter.
Result<ParsedPlannerName> parsePlannerName(std::string_view name);

// The parameter text of `name` ("4" of "uniform:4") read as entry's parameter kind requires.
Result<std::uint64_t> parsePlannerParameter(const PlannerEntry& entry, std::string_view name, std::string_view text);

// "budget:<budgetBytes>": the budget planner's name for a bound on the dynamic peak E, the one
// spelling the command line's --fit, the explorer's budget field and the trade-off front use.
std::string budgetPlannerName(std::uint64_t budgetBytes);

// A planner's name as people read it: "budget:54951085" is "budget (dynamic ≤ 52.40 MiB)" (the
// budget planner bounds the dynamic peak E, not the total); every other name, and a name that does
// not parse, as it is.
std::string readablePlannerName(std::string_view name);

// "none, sqrt, greedy, uniform:K (K >= 1), dp, linear, optimal": the valid-names message.
std::string validPlannerNames();

// "none,sqrt,greedy,uniform:K with K = ceil(sqrt n),dp,linear,optimal": compare's default list.
std::string defaultComparePlannersText();

}  // namespace remat
