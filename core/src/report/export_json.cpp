// The JSON timeline ("remat-timeline/1") and back, and the helpers the timeline formats share.
#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

#include "export_common.hpp"
#include "remat/base/text.hpp"
#include "remat/input/json_document.hpp"
#include "remat/input/json_fields.hpp"
#include "remat/report/exporters.hpp"
#include "remat/report/snapshot.hpp"

namespace remat {

namespace detail {

std::string formatDouble(double value) {
  char buffer[64];
  const auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (ec != std::errc()) return "0";
  return std::string(buffer, ptr);
}

Result<OpKind> parseOpName(const std::string& name) {
  for (OpKind kind : {OpKind::F, OpKind::Seed, OpKind::R, OpKind::RE, OpKind::B, OpKind::Step})
    if (opName(kind) == name) return kind;
  return Status::invalid("unknown op " + quoteText(name, 40) + " (expected F, SEED, R, RE or B)");
}

std::string layerName(const Timeline& timeline, const Op& op) {
  if (!op.hasLayer() || op.layer == 0 || op.layer > timeline.layerNames.size()) return "";
  return timeline.layerNames[op.layer - 1];
}

nlohmann::json timelineSummaryJson(const Timeline& timeline) {
  nlohmann::json j = {{"planner", timeline.planner},
                      {"source", timeline.source},
                      {"run", timeline.run},
                      {"static_bytes", timeline.staticBytes},
                      {"dynamic_peak_bytes", timeline.dynamicPeakBytes()}};
  if (timeline.step) j["step"] = stepOptionsJson(*timeline.step);
  return j;
}

nlohmann::json stepOptionsJson(const StepOptions& step) {
  return {{"optimizer", std::string(optimizerName(step.optimizer))},
          {"foreach", step.foreach},
          {"grads", std::string(gradModeName(step.grads))},
          {"precision", std::string(precisionName(step.precision))}};
}

}  // namespace detail

using nlohmann::json;

std::string timelinesToJson(const std::vector<Timeline>& timelines) {
  json list = json::array();
  for (const Timeline& t : timelines) {
    json entries = json::array();
    for (const TimelineEntry& e : t.entries) {
      entries.push_back({{"op", opName(e.op.kind)},
                         {"layer", !e.op.hasLayer() ? json(nullptr) : json(e.op.layer)},
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

using io::FieldReader;

// The format nests four containers deep (timelines, a timeline, its entries, an entry).
constexpr std::size_t kTimelineJsonDepth = 7;

Result<TimelineEntry> readEntry(const JsonDocument& doc, const json& je, const std::string& what,
                                std::size_t layerCount) {
  if (!je.is_object())
    return Status::invalid(doc.where(je) + ": " + what + ": must be an object, not " + doc.describe(je));
  FieldReader r(doc, je, what);
  std::string op;
  REMAT_RETURN_IF_ERROR(r.readString("op", op, true));
  auto kind = detail::parseOpName(op);
  if (!kind) return r.error("op", kind.status().message());
  TimelineEntry e;
  e.op.kind = *kind;
  if (e.op.hasLayer()) {
    std::uint64_t layer = 0;
    REMAT_RETURN_IF_ERROR(r.readBytes("layer", layer, true));
    if (layer == 0 || layer > layerCount)
      return r.error("layer", "is " + std::to_string(layer) + ", outside 1.." + std::to_string(layerCount) +
                                  " (the timeline's layer_names)");
    e.op.layer = static_cast<std::size_t>(layer);
  }
  REMAT_RETURN_IF_ERROR(r.readDouble("time_us", e.timeUs, 0.0, 1e300, true));
  REMAT_RETURN_IF_ERROR(r.readBytes("footprint_bytes", e.footprintBytes, true));
  REMAT_RETURN_IF_ERROR(r.readBytes("live_after_bytes", e.liveAfterBytes, true));
  return e;
}

// The optional "step" object: its four fields, each required once the object is there.
Status readStep(FieldReader& r, const std::string& what, Timeline& t) {
  const json* step = r.member("step");
  if (!step) return Status::ok();
  if (!step->is_object()) return r.error("step", "must be an object, not " + r.document().describe(*step));
  FieldReader s(r.document(), *step, what + ", step");
  std::string optimizer, grads, precision;
  bool foreach = true;
  REMAT_RETURN_IF_ERROR(s.readString("optimizer", optimizer, true));
  REMAT_RETURN_IF_ERROR(s.readBool("foreach", foreach, true));
  REMAT_RETURN_IF_ERROR(s.readString("grads", grads, true));
  REMAT_RETURN_IF_ERROR(s.readString("precision", precision, true));
  auto options = detail::stepOptionsFromNames(
      optimizer, foreach ? "on" : "off", grads, precision,
      [&](const char* field, const std::string& message) -> Status { return s.error(field, message); });
  if (!options) return options.status();
  t.step = *options;
  return Status::ok();
}

// The fields of one timeline before its entries: planner, source, run, static bytes, step, layer names.
Status readTimelineHeader(FieldReader& r, const std::string& what, Timeline& t) {
  REMAT_RETURN_IF_ERROR(r.readString("planner", t.planner, true));
  REMAT_RETURN_IF_ERROR(r.readString("source", t.source, true));
  std::int64_t run = 0;
  REMAT_RETURN_IF_ERROR(r.readInt("run", run, true, 0, std::numeric_limits<int>::max()));
  t.run = static_cast<int>(run);
  REMAT_RETURN_IF_ERROR(r.readBytes("static_bytes", t.staticBytes, true));
  REMAT_RETURN_IF_ERROR(readStep(r, what, t));
  const json* names = r.member("layer_names");
  if (!names) return r.error("layer_names", "is missing");
  if (!names->is_array())
    return r.error("layer_names", "must be an array of strings, not " + r.document().describe(*names));
  for (std::size_t i = 0; i < names->size(); ++i) {
    const json& name = (*names)[i];
    if (!name.is_string())
      return r.error("layer_names",
                     "element " + std::to_string(i) + " must be a string, not " + r.document().describe(name));
    t.layerNames.push_back(name.get<std::string>());
  }
  return Status::ok();
}

Result<Timeline> readTimeline(const JsonDocument& doc, const json& jt, const std::string& what) {
  if (!jt.is_object())
    return Status::invalid(doc.where(jt) + ": " + what + ": must be an object, not " + doc.describe(jt));
  FieldReader r(doc, jt, what);
  Timeline t;
  REMAT_RETURN_IF_ERROR(readTimelineHeader(r, what, t));
  const json* entries = r.member("entries");
  if (!entries) return r.error("entries", "is missing");
  if (!entries->is_array()) return r.error("entries", "must be an array, not " + doc.describe(*entries));
  t.entries.reserve(entries->size());
  for (std::size_t k = 0; k < entries->size(); ++k) {
    auto entry = readEntry(doc, (*entries)[k], what + ", entries[" + std::to_string(k) + "]", t.layerNames.size());
    if (!entry) return entry.status();
    t.entries.push_back(*entry);
  }
  return t;
}

}  // namespace

Result<std::vector<Timeline>> parseTimelinesJson(const std::string& text, const std::string& source) {
  auto doc = JsonDocument::parse(text, source, kTimelineJsonDepth);
  if (!doc) return doc.status();
  const json& root = doc->root();
  if (!root.is_object())
    return Status::invalid(doc->where(root) + ": the top level must be a JSON object, not " + doc->describe(root));
  FieldReader r(*doc, root, "");
  std::string format;
  REMAT_RETURN_IF_ERROR(r.readString("format", format, true));
  if (format != kTimelineFormat)
    return r.error("format", "is " + quoteText(format, 40) + ", expected '" + std::string(kTimelineFormat) + "'");
  const json* timelines = r.member("timelines");
  if (!timelines) return r.error("timelines", "is missing");
  if (!timelines->is_array()) return r.error("timelines", "must be an array, not " + doc->describe(*timelines));
  std::vector<Timeline> out;
  for (std::size_t i = 0; i < timelines->size(); ++i) {
    auto timeline = readTimeline(*doc, (*timelines)[i], "timelines[" + std::to_string(i) + "]");
    if (!timeline) return timeline.status();
    out.push_back(std::move(timeline).value());
  }
  return out;
}

}  // namespace remat
