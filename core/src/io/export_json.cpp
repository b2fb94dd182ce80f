// The JSON timeline ("remat-timeline/1") and back, the shared exporter helpers, and the
// extension-driven file entry points.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "export_common.hpp"
#include "remat/io/chain_file.hpp"
#include "remat/io/exporters.hpp"

namespace remat {

namespace detail {

std::string formatDouble(double value) {
  char buffer[64];
  const auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (ec != std::errc()) return "0";
  return std::string(buffer, ptr);
}

Result<OpKind> parseOpName(const std::string& name) {
  for (OpKind kind : {OpKind::F, OpKind::Seed, OpKind::R, OpKind::RE, OpKind::B})
    if (opName(kind) == name) return kind;
  return Status::invalid("unknown op '" + name + "' (expected F, SEED, R, RE or B)");
}

std::string layerName(const Timeline& timeline, const Op& op) {
  if (op.kind == OpKind::Seed || op.layer == 0 || op.layer > timeline.layerNames.size()) return "";
  return timeline.layerNames[op.layer - 1];
}

nlohmann::json timelineSummaryJson(const Timeline& timeline) {
  return {{"planner", timeline.planner},
          {"source", timeline.source},
          {"run", timeline.run},
          {"static_bytes", timeline.staticBytes},
          {"dynamic_peak_bytes", timeline.dynamicPeakBytes()}};
}

}  // namespace detail

using nlohmann::json;

std::string timelinesToJson(const std::vector<Timeline>& timelines) {
  json list = json::array();
  for (const Timeline& t : timelines) {
    json entries = json::array();
    for (const TimelineEntry& e : t.entries) {
      entries.push_back({{"op", opName(e.op.kind)},
                         {"layer", e.op.kind == OpKind::Seed ? json(nullptr) : json(e.op.layer)},
                         {"phase", phaseName(e.op.phase())},
                         {"time_us", e.timeUs},
                         {"footprint_bytes", e.footprintBytes},
                         {"live_after_bytes", e.liveAfterBytes}});
    }
    json timeline = detail::timelineSummaryJson(t);
    timeline["layer_names"] = t.layerNames;
    timeline["entries"] = std::move(entries);
    list.push_back(std::move(timeline));
  }
  return json{{"format", kTimelineFormat}, {"timelines", std::move(list)}}.dump(1) + "\n";
}

namespace {

template <typename T>
Result<T> get(const json& object, const char* field, const std::string& where) {
  if (!object.is_object() || !object.contains(field)) return Status::invalid(where + ": missing field '" + field + "'");
  const json& value = object.at(field);
  if constexpr (std::is_same_v<T, std::string>) {
    if (!value.is_string()) return Status::invalid(where + ", " + field + ": expected a string");
  } else if constexpr (std::is_same_v<T, double>) {
    if (!value.is_number()) return Status::invalid(where + ", " + field + ": expected a number");
  } else if constexpr (std::is_signed_v<T>) {
    if (!value.is_number_integer()) return Status::invalid(where + ", " + field + ": expected an integer");
  } else {
    if (!value.is_number_unsigned()) return Status::invalid(where + ", " + field + ": expected a non-negative integer");
  }
  return value.get<T>();
}

Result<TimelineEntry> readEntry(const json& je, const std::string& at, std::size_t layerCount) {
  auto op = get<std::string>(je, "op", at);
  if (!op) return op.status();
  auto kind = detail::parseOpName(*op);
  if (!kind) return kind.status().withContext(at);
  TimelineEntry e;
  e.op.kind = *kind;
  if (*kind != OpKind::Seed) {
    auto layer = get<std::size_t>(je, "layer", at);
    if (!layer) return layer.status();
    if (*layer == 0 || *layer > layerCount)
      return Status::invalid(at + ", layer: " + std::to_string(*layer) + " is outside 1.." +
                             std::to_string(layerCount));
    e.op.layer = *layer;
  }
  REMAT_RETURN_IF_ERROR(detail::readEntryNumbers(
      [&](const char* name, auto& value) -> Status {
        auto number = get<std::decay_t<decltype(value)>>(je, name, at);
        if (!number) return number.status();
        value = *number;
        return Status::ok();
      },
      e));
  return e;
}

// The fields of one timeline before its entries: planner, source, run, static bytes, layer names.
Status readTimelineHeader(const json& jt, const std::string& where, Timeline& t) {
  auto planner = get<std::string>(jt, "planner", where);
  auto src = get<std::string>(jt, "source", where);
  auto run = get<int>(jt, "run", where);
  auto staticBytes = get<std::uint64_t>(jt, "static_bytes", where);
  if (!planner) return planner.status();
  if (!src) return src.status();
  if (!run) return run.status();
  if (!staticBytes) return staticBytes.status();
  t.planner = *planner;
  t.source = *src;
  t.run = *run;
  t.staticBytes = *staticBytes;
  if (!jt.contains("layer_names") || !jt["layer_names"].is_array())
    return Status::invalid(where + ": missing array 'layer_names'");
  for (const json& name : jt["layer_names"]) {
    if (!name.is_string()) return Status::invalid(where + ", layer_names: expected strings");
    t.layerNames.push_back(name.get<std::string>());
  }
  return Status::ok();
}

Result<Timeline> readTimeline(const json& jt, const std::string& where) {
  Timeline t;
  REMAT_RETURN_IF_ERROR(readTimelineHeader(jt, where, t));
  if (!jt.contains("entries") || !jt["entries"].is_array()) return Status::invalid(where + ": missing array 'entries'");
  for (std::size_t k = 0; k < jt["entries"].size(); ++k) {
    auto entry = readEntry(jt["entries"][k], where + ", entries[" + std::to_string(k) + "]", t.layerNames.size());
    if (!entry) return entry.status();
    t.entries.push_back(*entry);
  }
  return t;
}

}  // namespace

Result<std::vector<Timeline>> parseTimelinesJson(const std::string& text, const std::string& source) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    return Status::invalid(source + ": not valid JSON: " + e.what());
  }
  auto format = get<std::string>(root, "format", source);
  if (!format) return format.status();
  if (*format != kTimelineFormat)
    return Status::invalid(source + ": format is '" + *format + "', expected '" + kTimelineFormat + "'");
  if (!root.contains("timelines") || !root["timelines"].is_array())
    return Status::invalid(source + ": missing array 'timelines'");
  std::vector<Timeline> out;
  for (std::size_t i = 0; i < root["timelines"].size(); ++i) {
    auto timeline = readTimeline(root["timelines"][i], source + ": timelines[" + std::to_string(i) + "]");
    if (!timeline) return timeline.status();
    out.push_back(std::move(timeline).value());
  }
  return out;
}

Result<TimelineFileFormat> timelineFormatForPath(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto endsWith = [&](const std::string& suffix) {
    return lower.size() >= suffix.size() && lower.compare(lower.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (endsWith(".csv")) return TimelineFileFormat::Csv;
  if (endsWith(".trace.json")) return TimelineFileFormat::ChromeTrace;
  if (endsWith(".json")) return TimelineFileFormat::Json;
  return Status::invalid(path + ": unknown timeline format; use a name ending in .csv, .trace.json or .json");
}

Status writeTimelines(const std::string& path, const std::vector<Timeline>& timelines) {
  auto format = timelineFormatForPath(path);
  if (!format) return format.status();
  switch (*format) {
    case TimelineFileFormat::Csv: return writeFileAtomically(path, timelinesToCsv(timelines));
    case TimelineFileFormat::ChromeTrace: return writeFileAtomically(path, timelinesToChromeTrace(timelines));
    case TimelineFileFormat::Json: return writeFileAtomically(path, timelinesToJson(timelines));
  }
  return Status::internal(path + ": unhandled timeline format");
}

Result<std::vector<Timeline>> readTimelines(const std::string& path) {
  auto format = timelineFormatForPath(path);
  if (!format) return format.status();
  if (*format == TimelineFileFormat::ChromeTrace)
    return Status::invalid(path + ": Chrome traces are export-only; read the .csv or .json timeline instead");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io(path + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::io(path + ": read failed");
  return *format == TimelineFileFormat::Csv ? parseTimelinesCsv(text.str(), path)
                                            : parseTimelinesJson(text.str(), path);
}

}  // namespace remat
