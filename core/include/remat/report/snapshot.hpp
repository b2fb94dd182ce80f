#pragma once
// PyTorch memory snapshots (docs/formats.md, "PyTorch memory snapshots"): the dict that
// torch.cuda.memory._snapshot() returns ({"segments": [...], "device_traces": [[TraceEntry...]]}),
// as a pickle (what _dump_snapshot writes, protocols 2 to 5: pickle.hpp) or as JSON, plus the
// optional "remat" key of python/remat_torch's recordings ("remat-torch-recording/1": the static
// bytes and the phases of the step).
//
// Reading turns a device trace into a measured Timeline: the alloc / free_completed events are
// replayed; consecutive events of one frame (the module, or the source line) and one phase make
// one entry (an F op in the forward phase, B in the backward one; the exporter's own frames
// "remat::F(3)" give the op back exactly); an entry's footprint is the most bytes allocated in the
// trace and alive during its events, its live bytes those alive after them. Blocks alive before
// the trace are static: the "remat" key's static_bytes, or else those the trace frees without
// allocating them plus the segments' active blocks the trace did not allocate (as MemoryViz.js
// counts them). Errors are InvalidInput placed at the value ("F: byte offset N: ..." in a pickle,
// "F:LINE:COLUMN: ..." in JSON) naming it (device_traces[0][17], field 'size').
//
// Writing turns timelines into one snapshot, timeline k as device_traces[k]: per op an alloc of
// what it keeps, an alloc and a free of its workspace, and the frees of what it releases, all with
// one frame {"filename": layer name, "line": layer, "name": "remat::F(3)"}; one segment per
// timeline ends the step (its static block first); the "remat" key carries the static bytes, the
// phases and, under "traces", each timeline's planner, source, run and op times, so reading the
// file gives the same timelines back.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/memory/timeline.hpp"

namespace remat {

inline constexpr const char* kRecordingFormat = "remat-torch-recording/1";
// Snapshots of long CUDA runs are large; the JSON and pickle forms alike are refused above this.
inline constexpr std::uint64_t kMaxSnapshotFileBytes = std::uint64_t{256} << 20;  // 256 MiB
// Containers nest at most this deep (segments > segment > blocks > block > history > frames).
inline constexpr std::size_t kSnapshotMaxDepth = 10;

// A pickle when the data starts with the PROTO opcode (0x80), JSON otherwise.
Result<std::vector<Timeline>> parseSnapshot(std::string_view data, const std::string& source);
// The file (at most kMaxSnapshotFileBytes), by content as parseSnapshot.
Result<std::vector<Timeline>> readSnapshot(const std::string& path);
// Whether the data looks like a snapshot rather than a remat timeline (a pickle, or JSON whose
// top level has "device_traces").
bool looksLikeSnapshot(std::string_view data);

nlohmann::json timelinesToSnapshot(const std::vector<Timeline>& timelines);
std::string timelinesToSnapshotJson(const std::vector<Timeline>& timelines);
std::string timelinesToSnapshotPickle(const std::vector<Timeline>& timelines);  // protocol 4

}  // namespace remat
