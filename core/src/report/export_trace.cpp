// Chrome's trace event format (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
// which Perfetto and chrome://tracing open. One process per timeline; ops are complete events
// laid end to end on one thread; memory is a counter track.
#include <nlohmann/json.hpp>

#include "export_common.hpp"
#include "remat/report/exporters.hpp"

namespace remat {

using nlohmann::json;

namespace {

// The process of one timeline: its name, its place in the list, and the thread of its ops.
void appendProcessEvents(const Timeline& t, int pid, json& events) {
  const std::string label = t.source + " " + t.planner + " run " + std::to_string(t.run);
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", label}}}});
  events.push_back(
      {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 1}, {"args", {{"name", "ops"}}}});
}

// Two series: the footprint while the op runs and the bytes alive after it.
json counterEvent(const std::string& counter, double ts, int pid, std::uint64_t footprintBytes,
                  std::uint64_t liveAfterBytes) {
  return {{"name", counter},
          {"ph", "C"},
          {"ts", ts},
          {"pid", pid},
          {"args", {{"footprint_bytes", footprintBytes}, {"live_after_bytes", liveAfterBytes}}}};
}

json opEvent(const Timeline& t, std::size_t k, double ts, double dur, int pid) {
  const TimelineEntry& e = t.entries[k];
  return {{"name", opLabel(e.op, t.layerNames)},
          {"cat", phaseName(e.op.phase())},
          {"ph", "X"},
          {"ts", ts},
          {"dur", dur},
          {"pid", pid},
          {"tid", 1},
          {"args",
           {{"op_index", k},
            {"op", opName(e.op.kind)},
            {"layer", !e.op.hasLayer() ? json(nullptr) : json(e.op.layer)},
            {"layer_name", detail::layerName(t, e.op)},
            {"phase", phaseName(e.op.phase())},
            {"footprint_bytes", e.footprintBytes},
            {"live_after_bytes", e.liveAfterBytes}}}};
}

// The ops laid end to end, each with a counter sample at its start, and one after the last.
void appendOpEvents(const Timeline& t, int pid, json& events) {
  // A timeline without times (all zero) still gets a readable trace: one microsecond per op.
  bool anyTime = false;
  for (const TimelineEntry& e : t.entries) anyTime |= e.timeUs > 0.0;
  double ts = 0.0;
  const std::string counter = "dynamic memory (" + t.planner + ")";
  for (std::size_t k = 0; k < t.entries.size(); ++k) {
    const TimelineEntry& e = t.entries[k];
    const double dur = anyTime ? e.timeUs : 1.0;
    events.push_back(opEvent(t, k, ts, dur, pid));
    events.push_back(counterEvent(counter, ts, pid, e.footprintBytes, e.liveAfterBytes));
    ts += dur;
  }
  if (!t.entries.empty()) {
    const std::uint64_t last = t.entries.back().liveAfterBytes;
    events.push_back(counterEvent(counter, ts, pid, last, last));
  }
}

}  // namespace

std::string timelinesToChromeTrace(const std::vector<Timeline>& timelines) {
  json events = json::array();
  json meta = json::array();
  for (std::size_t i = 0; i < timelines.size(); ++i) {
    const int pid = static_cast<int>(i) + 1;
    appendProcessEvents(timelines[i], pid, events);
    appendOpEvents(timelines[i], pid, events);
    meta.push_back(detail::timelineSummaryJson(timelines[i]));
  }
  return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", {{"timelines", meta}}}}
             .dump() +
         "\n";
}

}  // namespace remat
