#pragma once
// The pieces of the snapshot reader (snapshot_read.cpp, snapshot_replay.cpp): typed fields of a
// dict of a PyDocument, and the replay of one device trace. Internal to core/io.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/input/pickle.hpp"
#include "remat/memory/timeline.hpp"

namespace remat {

namespace io {

// Like FieldReader (json_fields.hpp), for the dicts of a PyDocument. Every error is InvalidInput
// placed at the field's value (at the dict when the field is missing) and names the dict (`what`).
class PyFields {
 public:
  PyFields(const PyDocument& doc, std::uint32_t dict, std::string what)
      : doc_(doc), dict_(dict), what_(std::move(what)) {}

  Status requireDict() const;
  std::optional<std::uint32_t> member(const char* field) const { return doc_.member(dict_, field); }
  Status error(const char* field, const std::string& message) const;

  Status readString(const char* field, std::string& out, bool required);
  // Integers 0..2^64-1.
  Status readBytes(const char* field, std::uint64_t& out, bool* present = nullptr, bool required = false);
  // Any 64-bit integer (a line number).
  Status readInt(const char* field, std::int64_t& out, bool required);
  // A list or tuple field; nullopt when missing or None.
  Result<std::optional<std::uint32_t>> list(const char* field);

 private:
  const PyDocument& doc_;
  std::uint32_t dict_;
  std::string what_;
};

}  // namespace io

// What the "remat" key says about one device trace.
struct TraceInfo {
  std::uint64_t staticBytes = 0;
  bool hasStaticBytes = false;
  std::optional<std::uint64_t> forwardEnd;  // trace index of the first event after the forward pass
  std::string planner;
  std::string source;
  int run = 0;
  bool hasOpTimes = false;
  std::vector<double> opTimesUs;    // one per op (the exporter's)
  std::optional<StepOptions> step;  // the exporter's step options, when it wrote them
};

// What a replay leaves: the blocks the trace allocated and did not free, and the bytes it freed
// without allocating them (alive before the trace).
struct TraceReplay {
  std::unordered_map<std::uint64_t, std::uint64_t> liveBlocks;  // address -> bytes
  std::uint64_t freedUnallocatedBytes = 0;
};

// The timeline of device trace `list` (a list; `what` names it: "device_traces[0]"); its static
// bytes are info's (the caller adds the segments' when info has none).
Result<Timeline> replayTrace(const PyDocument& doc, std::uint32_t list, const std::string& what, const TraceInfo& info,
                             TraceReplay& replay);
// The bytes of a segment's active blocks on `device` that the replay did not allocate.
Result<std::uint64_t> readSegmentBlocks(const PyDocument& doc, std::uint32_t segment, const std::string& what,
                                        std::size_t device, const TraceReplay& replay);

}  // namespace remat
