// PyTorch memory snapshots into measured timelines (snapshot.hpp).
#include <nlohmann/json.hpp>

#include "export_common.hpp"
#include "remat/base/device_names.hpp"
#include "remat/base/text.hpp"
#include "remat/input/input_file.hpp"
#include "remat/input/json_document.hpp"
#include "remat/input/pickle.hpp"
#include "remat/report/snapshot.hpp"
#include "snapshot_fields.hpp"

namespace remat {
namespace {

using io::PyFields;
using Kind = PyValue::Kind;

// The exporter's optional "step" dict (export_common.hpp's stepOptionsJson): four fields, foreach a bool.
Status readTraceStep(const PyDocument& doc, PyFields& f, const std::string& what, TraceInfo& info) {
  const auto step = f.member("step");
  if (!step || doc.at(*step).kind == Kind::None) return Status::ok();
  PyFields s(doc, *step, what + ", field 'step'");
  REMAT_RETURN_IF_ERROR(s.requireDict());
  std::string optimizer, grads, precision;
  REMAT_RETURN_IF_ERROR(s.readString("optimizer", optimizer, true));
  REMAT_RETURN_IF_ERROR(s.readString("grads", grads, true));
  REMAT_RETURN_IF_ERROR(s.readString("precision", precision, true));
  const auto foreach = s.member("foreach");
  if (!foreach) return s.error("foreach", "is missing");
  if (doc.at(*foreach).kind != Kind::Bool) return s.error("foreach", "must be a bool, not " + doc.describe(*foreach));
  auto options = detail::stepOptionsFromNames(
      optimizer, doc.at(*foreach).boolean ? "on" : "off", grads, precision,
      [&](const char* field, const std::string& message) -> Status { return s.error(field, message); });
  if (!options) return options.status();
  info.step = *options;
  return Status::ok();
}

Result<TraceInfo> readTraceInfo(const PyDocument& doc, std::uint32_t dict, const std::string& what,
                                std::size_t traceLength) {
  PyFields f(doc, dict, what);
  TraceInfo info;
  REMAT_RETURN_IF_ERROR(f.readBytes("static_bytes", info.staticBytes, &info.hasStaticBytes));
  auto phases = f.list("phases");
  if (!phases) return phases.status();
  if (*phases) {
    const PyValue& list = doc.at(**phases);
    for (std::size_t i = 0; i < list.items.size(); ++i) {
      PyFields phase(doc, list.items[i], what + ", field 'phases'[" + std::to_string(i) + "]");
      REMAT_RETURN_IF_ERROR(phase.requireDict());
      std::string name;
      std::uint64_t index = 0;
      REMAT_RETURN_IF_ERROR(phase.readString("name", name, true));
      REMAT_RETURN_IF_ERROR(phase.readBytes("trace_index", index, nullptr, true));
      if (index > traceLength)
        return phase.error("trace_index", "is " + std::to_string(index) + ", past the trace's " +
                                              std::to_string(traceLength) + " entries");
      if (name == "forward_end") info.forwardEnd = index;
    }
  }
  REMAT_RETURN_IF_ERROR(f.readString("planner", info.planner, false));
  REMAT_RETURN_IF_ERROR(f.readString("source", info.source, false));
  std::uint64_t run = 0;
  REMAT_RETURN_IF_ERROR(f.readBytes("run", run));
  if (run > 1000000000) return f.error("run", "is over 1000000000");
  info.run = static_cast<int>(run);
  REMAT_RETURN_IF_ERROR(readTraceStep(doc, f, what, info));
  auto times = f.list("op_times_us");
  if (!times) return times.status();
  if (*times) {
    info.hasOpTimes = true;
    for (std::uint32_t item : doc.at(**times).items) {
      const PyValue& v = doc.at(item);
      if (v.kind != Kind::Float && v.kind != Kind::Int)
        return Status::invalid(doc.where(item) + ": " + what + ": op_times_us holds " + doc.describe(item));
      const double t = v.kind == Kind::Float ? v.real : static_cast<double>(static_cast<std::int64_t>(v.intBits));
      if (!(t >= 0 && t <= 1e300))
        return Status::invalid(doc.where(item) + ": " + what + ": op_times_us holds " + doc.describe(item));
      info.opTimesUs.push_back(t);
    }
  }
  return info;
}

// The "remat" key: the recording's own fields (for device_traces[0], or the device it names) and
// the exporter's per-trace list.
struct RematKey {
  bool present = false;
  std::size_t device = 0;
  std::string deviceName;
  TraceInfo first;
  std::vector<TraceInfo> traces;
};

Result<std::size_t> deviceIndex(PyFields& f, const std::string& device) {
  if (device.rfind("cuda:", 0) != 0) return std::size_t{0};
  std::size_t index = 0;
  const std::string digits = device.substr(5);
  if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos)
    return f.error("device", "is " + quoteText(device, 40) + "; expected 'cpu' or 'cuda:N'");
  for (char c : digits) index = index * 10 + static_cast<std::size_t>(c - '0');
  return index;
}

Result<RematKey> readRematKey(const PyDocument& doc, std::uint32_t root, const std::vector<std::size_t>& lengths) {
  RematKey key;
  const auto found = doc.member(root, "remat");
  if (!found) return key;
  key.present = true;
  PyFields f(doc, *found, "field 'remat'");
  REMAT_RETURN_IF_ERROR(f.requireDict());
  std::string format;
  REMAT_RETURN_IF_ERROR(f.readString("format", format, true));
  if (format != kRecordingFormat)
    return f.error("format", "is " + quoteText(format, 40) + ", expected '" + kRecordingFormat + "'");
  REMAT_RETURN_IF_ERROR(f.readString("device", key.deviceName, false));
  auto device = deviceIndex(f, key.deviceName);
  if (!device) return device.status();
  key.device = *device;
  if (key.device >= lengths.size())
    return f.error("device", "names device " + std::to_string(key.device) + ", but device_traces has " +
                                 std::to_string(lengths.size()) + " lists");
  auto first = readTraceInfo(doc, *found, "field 'remat'", lengths[key.device]);
  if (!first) return first.status();
  key.first = std::move(first).value();
  auto traces = f.list("traces");
  if (!traces) return traces.status();
  if (*traces) {
    const PyValue& list = doc.at(**traces);
    if (list.items.size() > lengths.size())
      return f.error("traces", "describes " + std::to_string(list.items.size()) + " traces, but device_traces has " +
                                   std::to_string(lengths.size()));
    for (std::size_t k = 0; k < list.items.size(); ++k) {
      const std::string what = "field 'remat', traces[" + std::to_string(k) + "]";
      REMAT_RETURN_IF_ERROR(PyFields(doc, list.items[k], what).requireDict());
      auto info = readTraceInfo(doc, list.items[k], what, lengths[k]);
      if (!info) return info.status();
      key.traces.push_back(std::move(info).value());
    }
  }
  return key;
}

// Bytes of the segments' active blocks on `device` that the trace did not allocate (alive before
// it, as MemoryViz.js's Active Memory Timeline draws them).
Result<std::uint64_t> segmentsStaticBytes(const PyDocument& doc, std::uint32_t root, std::size_t device,
                                          const TraceReplay& replay) {
  const auto segments = doc.member(root, "segments");
  if (!segments) return std::uint64_t{0};
  if (doc.at(*segments).kind != Kind::List)
    return Status::invalid(doc.where(*segments) + ": field 'segments' must be a list, not " + doc.describe(*segments));
  std::uint64_t bytes = 0;
  const auto& list = doc.at(*segments).items;
  for (std::size_t s = 0; s < list.size(); ++s) {
    auto segment = readSegmentBlocks(doc, list[s], "segments[" + std::to_string(s) + "]", device, replay);
    if (!segment) return segment.status();
    bytes += *segment;
  }
  return bytes;
}

Result<std::vector<Timeline>> readSnapshotDocument(const PyDocument& doc) {
  const std::uint32_t root = doc.root();
  if (doc.at(root).kind != Kind::Dict) {
    const std::string hint = doc.at(root).kind == Kind::List
                                 ? " (a list of segments, as torch.cuda.memory_snapshot() returns, holds no trace: "
                                   "record with torch.cuda.memory._record_memory_history and _dump_snapshot)"
                                 : "";
    return Status::invalid(doc.where(root) + ": a memory snapshot is a dict, not " + doc.describe(root) + hint);
  }
  const auto traces = doc.member(root, "device_traces");
  if (!traces) return Status::invalid(doc.where(root) + ": field 'device_traces' is missing");
  if (doc.at(*traces).kind != Kind::List)
    return Status::invalid(doc.where(*traces) + ": field 'device_traces' must be a list, not " + doc.describe(*traces));
  const auto& deviceLists = doc.at(*traces).items;
  std::vector<std::size_t> lengths;
  for (std::size_t k = 0; k < deviceLists.size(); ++k) {
    if (doc.at(deviceLists[k]).kind != Kind::List)
      return Status::invalid(doc.where(deviceLists[k]) + ": device_traces[" + std::to_string(k) +
                             "] must be a list, not " + doc.describe(deviceLists[k]));
    lengths.push_back(doc.at(deviceLists[k]).items.size());
  }
  auto remat = readRematKey(doc, root, lengths);
  if (!remat) return remat.status();
  // Which traces: the exporter's list, else the recording's device, else every non-empty one.
  std::vector<std::pair<std::size_t, TraceInfo>> chosen;
  if (!remat->traces.empty()) {
    for (std::size_t k = 0; k < remat->traces.size(); ++k) chosen.emplace_back(k, remat->traces[k]);
  } else if (remat->present) {
    TraceInfo info = remat->first;
    if (info.source.empty()) info.source = remat->deviceName.empty() ? std::string(kCpuDeviceName) : remat->deviceName;
    chosen.emplace_back(remat->device, std::move(info));
  } else {
    for (std::size_t k = 0; k < lengths.size(); ++k) {
      if (lengths[k] == 0) continue;
      TraceInfo info;
      info.source = "cuda:" + std::to_string(k);
      chosen.emplace_back(k, std::move(info));
    }
  }
  if (chosen.empty())
    return Status::invalid(doc.where(*traces) +
                           ": field 'device_traces' holds no event (was the memory history "
                           "recorded? torch.cuda.memory._record_memory_history)");
  std::vector<Timeline> out;
  for (auto& [device, info] : chosen) {
    TraceReplay replay;
    auto timeline =
        replayTrace(doc, deviceLists[device], "device_traces[" + std::to_string(device) + "]", info, replay);
    if (!timeline) return timeline.status();
    if (!info.hasStaticBytes) {
      auto segmentBytes = segmentsStaticBytes(doc, root, device, replay);
      if (!segmentBytes) return segmentBytes.status();
      timeline->staticBytes = replay.freedUnallocatedBytes + *segmentBytes;
    }
    out.push_back(std::move(timeline).value());
  }
  return out;
}

}  // namespace

bool looksLikeSnapshot(std::string_view data) {
  if (!data.empty() && static_cast<unsigned char>(data[0]) == 0x80) return true;
  // JSON: key order is free, so a search chooses the reader (which then checks everything): the
  // snapshot's own key, and not the format string of a remat timeline.
  return data.find("\"device_traces\"") != std::string_view::npos &&
         data.find("\"remat-timeline/1\"") == std::string_view::npos;
}

Result<std::vector<Timeline>> parseSnapshot(std::string_view data, const std::string& source) {
  if (!data.empty() && static_cast<unsigned char>(data[0]) == 0x80) {
    auto doc = decodePickle(data, source, kSnapshotMaxDepth);
    if (!doc) return doc.status();
    return readSnapshotDocument(*doc);
  }
  // Not JSON either (an older pickle protocol, another format): say what is read.
  const std::size_t first = data.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || (data[first] != '{' && data[first] != '['))
    return Status::invalid(placeText(source, data, first == std::string_view::npos ? data.size() : first) +
                           ": neither a pickle of protocol 2 to 5 (which starts with byte 0x80) nor JSON; a memory "
                           "snapshot is what torch.cuda.memory._dump_snapshot writes, or its JSON form");
  auto json = JsonDocument::parse(std::string(data), source, kSnapshotMaxDepth);
  if (!json) return json.status();
  auto doc = pyDocumentFromJson(*json);
  if (!doc) return doc.status();
  return readSnapshotDocument(*doc);
}

Result<std::vector<Timeline>> readSnapshot(const std::string& path) {
  auto data = readInputFile(path, kMaxSnapshotFileBytes, "memory snapshot");
  if (!data) return data.status();
  return parseSnapshot(*data, path);
}

}  // namespace remat
