// One device trace of a memory snapshot replayed into a timeline, and the typed fields the
// snapshot reader shares (snapshot_fields.hpp).
#include <algorithm>

#include "export_common.hpp"
#include "remat/base/text.hpp"
#include "snapshot_fields.hpp"

namespace remat {

namespace io {

using Kind = PyValue::Kind;

Status PyFields::requireDict() const {
  if (doc_.at(dict_).kind == Kind::Dict) return Status::ok();
  return Status::invalid(doc_.where(dict_) + ": " + what_ + ": must be a dict, not " + doc_.describe(dict_));
}

Status PyFields::error(const char* field, const std::string& message) const {
  const auto value = member(field);
  return Status::invalid(doc_.where(value ? *value : dict_) + ": " + (what_.empty() ? "" : what_ + ": ") + "field " +
                         quoteText(field, 40) + " " + message);
}

Status PyFields::readString(const char* field, std::string& out, bool required) {
  const auto value = member(field);
  if (!value) return required ? error(field, "is missing") : Status::ok();
  if (doc_.at(*value).kind != Kind::Str) return error(field, "must be a str, not " + doc_.describe(*value));
  out = doc_.at(*value).text;
  return Status::ok();
}

Status PyFields::readBytes(const char* field, std::uint64_t& out, bool* present, bool required) {
  const auto value = member(field);
  if (present) *present = value.has_value();
  if (!value) return required ? error(field, "is missing") : Status::ok();
  const PyValue& v = doc_.at(*value);
  if (v.kind != Kind::Int || (!v.intIsUnsigned && static_cast<std::int64_t>(v.intBits) < 0))
    return error(field, "must be a non-negative int, not " + doc_.describe(*value));
  out = v.intBits;
  return Status::ok();
}

Status PyFields::readInt(const char* field, std::int64_t& out, bool required) {
  const auto value = member(field);
  if (!value) return required ? error(field, "is missing") : Status::ok();
  const PyValue& v = doc_.at(*value);
  if (v.kind != Kind::Int || v.intIsUnsigned) return error(field, "must be an int, not " + doc_.describe(*value));
  out = static_cast<std::int64_t>(v.intBits);
  return Status::ok();
}

Result<std::optional<std::uint32_t>> PyFields::list(const char* field) {
  const auto value = member(field);
  if (!value || doc_.at(*value).kind == Kind::None) return std::optional<std::uint32_t>{};
  const Kind kind = doc_.at(*value).kind;
  if (kind != Kind::List && kind != Kind::Tuple) return error(field, "must be a list, not " + doc_.describe(*value));
  return std::optional<std::uint32_t>{*value};
}

}  // namespace io

namespace {

using io::PyFields;
using Kind = PyValue::Kind;

constexpr std::string_view kLabelPrefix = "remat::";

// The frame an event is grouped by: its key (empty: none), and the exporter's exact op.
struct EventFrame {
  std::string key;
  bool labelled = false;
  Op op;
  std::string layerName;
};

// "F(3)", "RE(12)", "SEED" (after the prefix) into an op whose layer is at most maxLayer.
Result<Op> parseLabel(const std::string& label, std::size_t maxLayer) {
  if (label == "SEED") return Op{OpKind::Seed, 0};
  if (label == "STEP") return Op{OpKind::Step, 0};
  const std::size_t open = label.find('(');
  if (open == std::string::npos || label.back() != ')') return Status::invalid("is no op label");
  auto kind = detail::parseOpName(label.substr(0, open));
  if (!kind || !Op{*kind, 1}.hasLayer()) return Status::invalid("is no op label");
  const std::string digits = label.substr(open + 1, label.size() - open - 2);
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
    return Status::invalid("has no layer number");
  const std::size_t layer = std::stoul(digits);
  if (layer == 0 || layer > maxLayer)
    return Status::invalid("names layer " + digits + ", outside 1.." + std::to_string(maxLayer) +
                           " (a layer per event at most)");
  const Op op{*kind, layer};
  if (opLabel(op) != label) return Status::invalid("is not written as remat writes it ('" + opLabel(op) + "')");
  return op;
}

Result<EventFrame> readFrame(const PyDocument& doc, PyFields& entry, const std::string& what, std::size_t events) {
  EventFrame frame;
  auto frames = entry.list("frames");
  if (!frames) return frames.status();
  if (!*frames || doc.at(**frames).items.empty()) return frame;
  PyFields f(doc, doc.at(**frames).items.front(), what + ", frames[0]");
  REMAT_RETURN_IF_ERROR(f.requireDict());
  std::string filename, name;
  std::int64_t line = 0;
  REMAT_RETURN_IF_ERROR(f.readString("filename", filename, true));
  REMAT_RETURN_IF_ERROR(f.readString("name", name, true));
  REMAT_RETURN_IF_ERROR(f.readInt("line", line, true));
  if (name.rfind(kLabelPrefix, 0) == 0) {
    auto op = parseLabel(name.substr(kLabelPrefix.size()), events);
    if (!op) return f.error("name", op.status().message());
    frame.labelled = true;
    frame.op = *op;
    frame.layerName = filename;
    frame.key = name;
    return frame;
  }
  // The recordings name the module in filename with line 0 (the op alone where no module is
  // known); CUDA's Python frames name a source line.
  if (line != 0)
    frame.key = filename + ":" + std::to_string(line) + ":" + name;
  else
    frame.key = filename.empty() ? name : filename;
  return frame;
}

// Groups the memory events into ops as the replay goes.
class TraceBuilder {
 public:
  explicit TraceBuilder(const TraceInfo& info) : info_(info) {}

  Status add(const EventFrame& frame, Phase phase, std::optional<std::uint64_t> timeUs, const std::string& where) {
    if (frame.labelled) {
      if (sawUnlabelled_) return mixed(where);
      sawLabelled_ = true;
      if (!open_ || frame.key != groupKey_) start(frame, frame.key, frame.op.phase(), timeUs);
      return Status::ok();
    }
    // An event without a frame belongs to the op before it (in the same phase: the loss's gradient
    // starts the backward pass without one).
    if (frame.key.empty() && open_ && (sawLabelled_ || phase == groupPhase_)) return Status::ok();
    if (sawLabelled_) return mixed(where);
    sawUnlabelled_ = true;
    const std::string key = frame.key.empty() && phase == Phase::Forward ? kNoFrame : frame.key;
    if (!open_ || key != groupKey_ || phase != groupPhase_) start(frame, key, phase, timeUs);
    return Status::ok();
  }
  void afterEvent(std::uint64_t liveBytes) {
    live_ = liveBytes;
    peak_ = std::max(peak_, liveBytes);
  }
  Result<Timeline> finish(const std::string& what);
  std::uint64_t live() const { return live_; }

 private:
  static constexpr const char* kNoFrame = "(no frame)";
  static Status mixed(const std::string& where) {
    return Status::invalid(where +
                           ": remat's own frames ('remat::F(3)') and others are mixed; a trace holds "
                           "one kind");
  }
  void start(const EventFrame& frame, const std::string& key, Phase phase, std::optional<std::uint64_t> timeUs);
  void close();
  std::size_t layerFor(const std::string& name);

  const TraceInfo& info_;
  Timeline timeline_;
  std::unordered_map<std::string, std::size_t> layers_;
  std::vector<std::optional<std::uint64_t>> startTimes_;
  bool sawLabelled_ = false, sawUnlabelled_ = false, open_ = false, sawBackward_ = false;
  std::string groupKey_;
  Phase groupPhase_ = Phase::Forward;
  Op groupOp_;
  std::uint64_t live_ = 0, peak_ = 0;
};

std::size_t TraceBuilder::layerFor(const std::string& name) {
  const auto [it, added] = layers_.emplace(name, timeline_.layerNames.size() + 1);
  if (added) timeline_.layerNames.push_back(name);
  return it->second;
}

void TraceBuilder::start(const EventFrame& frame, const std::string& key, Phase phase,
                         std::optional<std::uint64_t> timeUs) {
  close();
  open_ = true;
  groupKey_ = key;
  groupPhase_ = phase;
  peak_ = live_;
  startTimes_.push_back(timeUs);
  if (frame.labelled) {
    groupOp_ = frame.op;
    if (frame.op.layer > timeline_.layerNames.size()) timeline_.layerNames.resize(frame.op.layer);
    if (frame.op.layer > 0 && timeline_.layerNames[frame.op.layer - 1].empty())
      timeline_.layerNames[frame.op.layer - 1] = frame.layerName;
  } else if (key.empty() && phase == Phase::Backward && !sawBackward_) {
    groupOp_ = Op{OpKind::Seed, 0};  // the loss's gradient, before any module's backward
  } else {
    groupOp_ = Op{phase == Phase::Forward ? OpKind::F : OpKind::B, layerFor(key.empty() ? kNoFrame : key)};
  }
  sawBackward_ |= phase == Phase::Backward;
}

void TraceBuilder::close() {
  if (!open_) return;
  TimelineEntry entry;
  entry.op = groupOp_;
  entry.footprintBytes = peak_;
  entry.liveAfterBytes = live_;
  timeline_.entries.push_back(entry);
  open_ = false;
}

Result<Timeline> TraceBuilder::finish(const std::string& what) {
  close();
  auto& entries = timeline_.entries;
  if (info_.hasOpTimes) {
    if (info_.opTimesUs.size() != entries.size())
      return Status::invalid(what + ": the 'remat' key's op_times_us has " + std::to_string(info_.opTimesUs.size()) +
                             " times for the trace's " + std::to_string(entries.size()) + " ops");
    for (std::size_t i = 0; i < entries.size(); ++i) entries[i].timeUs = info_.opTimesUs[i];
  } else {
    for (std::size_t i = 0; i + 1 < entries.size(); ++i)
      if (startTimes_[i] && startTimes_[i + 1] && *startTimes_[i + 1] > *startTimes_[i])
        entries[i].timeUs = static_cast<double>(*startTimes_[i + 1] - *startTimes_[i]);
  }
  timeline_.planner = info_.planner.empty() ? "pytorch" : info_.planner;
  timeline_.source = info_.source;
  timeline_.run = info_.run;
  timeline_.staticBytes = info_.staticBytes;
  timeline_.step = info_.step;
  return std::move(timeline_);
}

bool isMemoryAction(const std::string& action) {
  return action == "alloc" || action == "free_completed" || action == "free";
}

bool isKnownAction(const std::string& action) {
  for (const char* known :
       {"free_requested", "segment_alloc", "segment_free", "segment_map", "segment_unmap", "snapshot", "oom"})
    if (action == known) return true;
  return isMemoryAction(action);
}

// One event: its effect on the live blocks and its op.
Status replayEvent(const PyDocument& doc, std::uint32_t item, const std::string& what, std::size_t index,
                   const TraceInfo& info, std::size_t events, TraceBuilder& builder, TraceReplay& replay) {
  PyFields f(doc, item, what);
  REMAT_RETURN_IF_ERROR(f.requireDict());
  std::string action;
  REMAT_RETURN_IF_ERROR(f.readString("action", action, true));
  if (!isKnownAction(action))
    return f.error("action", "is " + quoteText(action, 40) +
                                 "; expected alloc, free_requested, free_completed, segment_alloc, segment_free, "
                                 "segment_map, segment_unmap, snapshot or oom");
  if (!isMemoryAction(action)) return Status::ok();
  std::uint64_t address = 0, bytes = 0, timeUs = 0;
  bool hasTime = false;
  REMAT_RETURN_IF_ERROR(f.readBytes("addr", address, nullptr, true));
  REMAT_RETURN_IF_ERROR(f.readBytes("size", bytes, nullptr, true));
  REMAT_RETURN_IF_ERROR(f.readBytes("time_us", timeUs, &hasTime));
  auto frame = readFrame(doc, f, what, events);
  if (!frame) return frame.status();
  const Phase phase = info.forwardEnd && index >= *info.forwardEnd ? Phase::Backward : Phase::Forward;
  REMAT_RETURN_IF_ERROR(builder.add(*frame, phase, hasTime ? std::optional<std::uint64_t>(timeUs) : std::nullopt,
                                    doc.where(item) + ": " + what));
  std::uint64_t live = builder.live();
  if (action == "alloc") {
    if (!replay.liveBlocks.emplace(address, bytes).second)
      return f.error("addr", "is allocated again before the trace frees it");
    if (bytes > UINT64_MAX - live) return f.error("size", "makes the bytes alive overflow 64 bits");
    live += bytes;
  } else if (const auto found = replay.liveBlocks.find(address); found != replay.liveBlocks.end()) {
    live -= found->second;
    replay.liveBlocks.erase(found);
  } else {
    replay.freedUnallocatedBytes += std::min(bytes, UINT64_MAX - replay.freedUnallocatedBytes);
  }
  builder.afterEvent(live);
  return Status::ok();
}

}  // namespace

Result<Timeline> replayTrace(const PyDocument& doc, std::uint32_t list, const std::string& what, const TraceInfo& info,
                             TraceReplay& replay) {
  TraceBuilder builder(info);
  const auto& items = doc.at(list).items;
  for (std::size_t i = 0; i < items.size(); ++i)
    REMAT_RETURN_IF_ERROR(
        replayEvent(doc, items[i], what + "[" + std::to_string(i) + "]", i, info, items.size(), builder, replay));
  return builder.finish(doc.where(list) + ": " + what);
}

Result<std::uint64_t> readSegmentBlocks(const PyDocument& doc, std::uint32_t segment, const std::string& what,
                                        std::size_t device, const TraceReplay& replay) {
  PyFields f(doc, segment, what);
  REMAT_RETURN_IF_ERROR(f.requireDict());
  std::uint64_t segmentDevice = 0, address = 0;
  REMAT_RETURN_IF_ERROR(f.readBytes("device", segmentDevice));
  REMAT_RETURN_IF_ERROR(f.readBytes("address", address, nullptr, true));
  auto blocks = f.list("blocks");
  if (!blocks) return blocks.status();
  if (segmentDevice != device || !*blocks) return std::uint64_t{0};
  std::uint64_t bytes = 0;
  const auto& items = doc.at(**blocks).items;
  for (std::size_t b = 0; b < items.size(); ++b) {
    PyFields block(doc, items[b], what + ", blocks[" + std::to_string(b) + "]");
    REMAT_RETURN_IF_ERROR(block.requireDict());
    std::uint64_t size = 0, requested = 0;
    bool hasRequested = false;
    std::string state;
    REMAT_RETURN_IF_ERROR(block.readBytes("size", size, nullptr, true));
    REMAT_RETURN_IF_ERROR(block.readBytes("requested_size", requested, &hasRequested));
    REMAT_RETURN_IF_ERROR(block.readString("state", state, true));
    // Blocks follow each other from the segment's address (MemoryViz.js places them so).
    if (state == "active_allocated" && !replay.liveBlocks.count(address))
      bytes += std::min(hasRequested ? requested : size, UINT64_MAX - bytes);
    address += size;
  }
  return bytes;
}

}  // namespace remat
