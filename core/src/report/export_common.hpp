#pragma once
// Helpers shared by the timeline exporters. Internal to core.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "remat/base/status.hpp"
#include "remat/memory/timeline.hpp"

namespace remat::detail {

// Shortest text that reads back to the same double (std::to_chars), never locale-dependent.
std::string formatDouble(double value);

Result<OpKind> parseOpName(const std::string& name);

// The op's layer name, or "" for SEED and layers without a name.
std::string layerName(const Timeline& timeline, const Op& op);

// What identifies and sums up a timeline in the JSON exports: planner, source, run, static_bytes,
// dynamic_peak_bytes, and its step options when known.
nlohmann::json timelineSummaryJson(const Timeline& timeline);

// The step options as every JSON output writes them (plan --json's `step`, the timelines'):
// optimizer, foreach, grads, precision.
nlohmann::json stepOptionsJson(const StepOptions& step);
// The step options from their four names (the CSV columns, the JSON object's fields); `fail(field,
// message)` makes the located error of the field whose value is not a valid name.
template <typename Fail>
Result<StepOptions> stepOptionsFromNames(const std::string& optimizer, const std::string& foreach,
                                         const std::string& grads, const std::string& precision, Fail&& fail) {
  StepOptions step;
  auto kind = parseOptimizer(optimizer);
  if (!kind) return fail("optimizer", kind.status().message());
  step.optimizer = *kind;
  auto each = parseForeach(foreach);
  if (!each) return fail("foreach", each.status().message());
  step.foreach = *each;
  auto mode = parseGradMode(grads);
  if (!mode) return fail("grads", mode.status().message());
  step.grads = *mode;
  auto dtypes = parsePrecision(precision);
  if (!dtypes) return fail("precision", dtypes.status().message());
  step.precision = *dtypes;
  return step;
}

// The numbers each timeline reader takes from an entry's fields, in this order: time_us,
// footprint_bytes, live_after_bytes. read(name, value) parses one field into value (a double or a
// std::uint64_t) and names the field in its error.
template <typename ReadField>
Status readEntryNumbers(ReadField&& read, TimelineEntry& entry) {
  REMAT_RETURN_IF_ERROR(read("time_us", entry.timeUs));
  REMAT_RETURN_IF_ERROR(read("footprint_bytes", entry.footprintBytes));
  return read("live_after_bytes", entry.liveAfterBytes);
}

}  // namespace remat::detail
