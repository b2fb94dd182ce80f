// Timelines as a PyTorch memory snapshot (snapshot.hpp): synthetic blocks whose allocs and frees
// give each op's footprint and the bytes alive after it exactly.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "export_common.hpp"
#include "remat/base/device_names.hpp"
#include "remat/input/pickle.hpp"
#include "remat/report/snapshot.hpp"

namespace remat {
namespace {

using nlohmann::json;

// Where each timeline's blocks live: apart per device, far from zero like a real heap.
constexpr std::uint64_t kBaseAddress = 0x7f0000000000;
constexpr std::uint64_t kDeviceStride = std::uint64_t{1} << 44;

struct Block {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  json frames;
  bool alive = true;
};

class TraceWriter {
 public:
  TraceWriter(const Timeline& timeline, std::size_t device)
      : timeline_(timeline), device_(device), next_(kBaseAddress + device * kDeviceStride + timeline.staticBytes) {}

  void write() {
    double startUs = 0;
    for (const TimelineEntry& e : timeline_.entries) {
      if (e.op.kind != OpKind::F && !forwardEnd_) forwardEnd_ = trace_.size();
      // time_us is an int: the op's start, rounded, held within 2^53 (a double's exact range).
      writeOp(e, frames(e.op), static_cast<std::uint64_t>(std::min(std::round(startUs), 9007199254740992.0)));
      startUs += e.timeUs;
      times_.push_back(e.timeUs);
    }
  }
  json takeTrace() { return std::move(trace_); }
  json segment() const;
  json info(const std::string& deviceName) const;

 private:
  json frames(const Op& op) const {
    const std::string name = op.kind == OpKind::Seed   ? "(loss)"
                             : op.kind == OpKind::Step ? "(optimizer)"
                                                       : detail::layerName(timeline_, op);
    return json::array({{{"filename", name}, {"line", op.layer}, {"name", "remat::" + opLabel(op)}}});
  }
  void event(const char* action, const Block& block, std::uint64_t timeUs) {
    trace_.push_back({{"action", action},
                      {"addr", block.address},
                      {"size", block.bytes},
                      {"stream", 0},
                      {"time_us", timeUs},
                      {"frames", block.frames}});
  }
  std::size_t alloc(std::uint64_t bytes, const json& frames, std::uint64_t timeUs) {
    blocks_.push_back(Block{next_, bytes, frames, true});
    next_ += bytes;
    event("alloc", blocks_.back(), timeUs);
    live_ += bytes;
    return blocks_.size() - 1;
  }
  void release(std::size_t index, const json& frames, std::uint64_t timeUs) {
    Block freed = blocks_[index];
    freed.frames = frames;  // the op that frees it: the reader groups events by their frame
    blocks_[index].alive = false;
    event("free_requested", freed, timeUs);
    event("free_completed", freed, timeUs);
    live_ -= freed.bytes;
  }
  void writeOp(const TimelineEntry& e, const json& frames, std::uint64_t timeUs);

  const Timeline& timeline_;
  std::size_t device_;
  std::uint64_t next_;
  std::uint64_t live_ = 0;
  std::vector<Block> blocks_;
  std::vector<std::size_t> aliveStack_;  // blocks alive, oldest first
  std::vector<double> times_;
  std::optional<std::size_t> forwardEnd_;
  json trace_ = json::array();
};

// Allocs up to the footprint, the workspace freed again, then what the op releases: the newest
// blocks first, the last one split (freed and its remainder allocated again) to hit the bytes.
void TraceWriter::writeOp(const TimelineEntry& e, const json& frames, std::uint64_t timeUs) {
  const std::uint64_t before = live_;
  const std::uint64_t after = e.liveAfterBytes;
  const std::uint64_t footprint = std::max({e.footprintBytes, before, after});
  const std::size_t eventsBefore = trace_.size();
  if (after > before) aliveStack_.push_back(alloc(after - before, frames, timeUs));
  const std::uint64_t workspace = footprint - std::max(before, after);
  if (workspace > 0) release(alloc(workspace, frames, timeUs), frames, timeUs);
  std::uint64_t toFree = before > after ? before - after : 0;
  while (toFree > 0 && !aliveStack_.empty()) {
    const std::size_t index = aliveStack_.back();
    aliveStack_.pop_back();
    const std::uint64_t bytes = blocks_[index].bytes;
    release(index, frames, timeUs);
    if (bytes > toFree) {
      aliveStack_.push_back(alloc(bytes - toFree, frames, timeUs));
      toFree = 0;
    } else {
      toFree -= bytes;
    }
  }
  // An op that changes nothing still shows, as an empty block.
  if (trace_.size() == eventsBefore) release(alloc(0, frames, timeUs), frames, timeUs);
}

json TraceWriter::segment() const {
  const std::uint64_t base = kBaseAddress + device_ * kDeviceStride;
  json blocks = json::array();
  std::uint64_t active = 0, inactive = 0;
  auto flushInactive = [&](std::uint64_t address) {
    if (inactive == 0) return;
    blocks.push_back({{"address", address - inactive},
                      {"size", inactive},
                      {"requested_size", 0},
                      {"state", "inactive"},
                      {"frames", json::array()}});
    inactive = 0;
  };
  if (timeline_.staticBytes > 0) {
    blocks.push_back({{"address", base},
                      {"size", timeline_.staticBytes},
                      {"requested_size", timeline_.staticBytes},
                      {"state", "active_allocated"},
                      {"frames", json::array({{{"filename", "(static)"}, {"line", 0}, {"name", "remat::static"}}})}});
    active += timeline_.staticBytes;
  }
  for (const Block& block : blocks_) {
    if (block.bytes == 0) continue;
    if (!block.alive) {
      inactive += block.bytes;
      continue;
    }
    flushInactive(block.address);
    blocks.push_back({{"address", block.address},
                      {"size", block.bytes},
                      {"requested_size", block.bytes},
                      {"state", "active_allocated"},
                      {"frames", block.frames}});
    active += block.bytes;
  }
  flushInactive(next_);
  const std::uint64_t total = next_ - base;
  return {{"device", device_},
          {"address", base},
          {"total_size", total},
          {"allocated_size", active},
          {"active_size", active},
          {"requested_size", active},
          {"stream", 0},
          {"segment_type", "large"},
          {"segment_pool_id", json::array({0, 0})},
          {"is_expandable", false},
          {"frames", json::array()},
          {"blocks", std::move(blocks)}};
}

json TraceWriter::info(const std::string& deviceName) const {
  const std::size_t traceEnd = trace_.size();
  const std::size_t forwardEnd = forwardEnd_.value_or(traceEnd);
  json info = {{"planner", timeline_.planner},
               {"source", timeline_.source},
               {"device", deviceName},
               {"run", timeline_.run},
               {"static_bytes", timeline_.staticBytes},
               {"phases", json::array({{{"name", "forward_begin"}, {"trace_index", 0}},
                                       {{"name", "forward_end"}, {"trace_index", forwardEnd}},
                                       {{"name", "backward_end"}, {"trace_index", traceEnd}},
                                       {{"name", "step_end"}, {"trace_index", traceEnd}}})},
               {"op_times_us", times_}};
  if (timeline_.step) info["step"] = detail::stepOptionsJson(*timeline_.step);
  return info;
}

// PyTorch names its CUDA device "cuda:0"; our GPU backend runs on the first device.
std::string deviceNameFor(const std::string& source) { return source == kGpuDeviceName ? "cuda:0" : source; }

}  // namespace

json timelinesToSnapshot(const std::vector<Timeline>& timelines) {
  json segments = json::array(), traces = json::array(), infos = json::array();
  for (std::size_t k = 0; k < timelines.size(); ++k) {
    TraceWriter writer(timelines[k], k);
    writer.write();
    json segment = writer.segment();
    if (segment["total_size"].get<std::uint64_t>() > 0) segments.push_back(std::move(segment));
    infos.push_back(writer.info(deviceNameFor(timelines[k].source)));
    traces.push_back(writer.takeTrace());
  }
  // The recording's own fields describe device_traces[0]; "traces" describes every one.
  json remat = {{"format", kRecordingFormat}, {"device", "cuda:0"}, {"plan", nullptr}};
  if (!infos.empty()) {
    const std::string first = infos[0]["device"].get<std::string>();
    remat["device"] = first.rfind("cuda", 0) == 0 ? "cuda:0" : first;
    remat["static_bytes"] = infos[0]["static_bytes"];
    remat["phases"] = infos[0]["phases"];
  }
  remat["traces"] = std::move(infos);
  return {{"segments", std::move(segments)}, {"device_traces", std::move(traces)}, {"remat", std::move(remat)}};
}

std::string timelinesToSnapshotJson(const std::vector<Timeline>& timelines) {
  return timelinesToSnapshot(timelines).dump() + "\n";
}

std::string timelinesToSnapshotPickle(const std::vector<Timeline>& timelines) {
  return encodePickle(timelinesToSnapshot(timelines));
}

}  // namespace remat
