#pragma once
// Timeline exports, shared by predicted (simulator) and measured (interpreter) timelines. A file
// holds one or more timelines (e.g. predicted + measured, or several planners, or several runs).
// The formats (timeline_formats.hpp has their table, which the file entry points below read):
//   .csv         long layout, one row per op (docs/formats.md): the columns
//                planner,run,op_index,op,layer,layer_name,phase,time_us,footprint_bytes,
//                live_after_bytes, then source,static_bytes. SEED's layer is empty.
//   .trace.json  Chrome's trace event format (Perfetto, chrome://tracing): each timeline is a
//                process; ops are complete events ("ph": "X", ts / dur in microseconds, one after
//                the other) named "F(3) conv1" with the phase as category; the dynamic bytes are a
//                counter track ("ph": "C") per timeline with two series sampled at each op's start:
//                footprint_bytes (during the op) and live_after_bytes (after it).
//   .json        the JSON timeline, format "remat-timeline/1" (readable back, exactly).
//   .snapshot.json, .pickle, .pkl
//                a PyTorch memory snapshot (snapshot.hpp), JSON or pickle protocol 4, for
//                pytorch.org/memory_viz and torch.cuda._memory_viz (readable back, exactly).
// Numbers are written with std::to_chars or nlohmann-json: independent of the locale. Files are
// written through a temporary file and a rename.
#include <string>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/report/timeline_formats.hpp"

namespace remat {

inline constexpr const char* kTimelineFormat = "remat-timeline/1";
inline constexpr const char* kTimelineCsvHeader =
    "planner,run,op_index,op,layer,layer_name,phase,time_us,footprint_bytes,live_after_bytes,source,static_bytes,"
    "optimizer,foreach,grads,precision";

std::string timelinesToCsv(const std::vector<Timeline>& timelines);
std::string timelinesToChromeTrace(const std::vector<Timeline>& timelines);
std::string timelinesToJson(const std::vector<Timeline>& timelines);

// Writes in the format the extension names (timelineFormatForPath), with writeFileAtomically
// (atomic_file.hpp).
Status writeTimelines(const std::string& path, const std::vector<Timeline>& timelines,
                      const WriteOptions& options = {});

// Readers (CSV and JSON timeline; `source` names the file in messages). The CSV reader needs the
// ten required columns in any order and ignores unknown ones; rows group into timelines by
// (planner, source, run) in order of first appearance. The JSON reader reads the text as
// JsonDocument does (no duplicated keys, nothing after the value, nesting at most 7 deep). Errors
// are placed ("FILE:LINE:COLUMN: ...") and name the line and column, or the timeline, the entry
// and the field; no text holds a NUL byte.
Result<std::vector<Timeline>> parseTimelinesCsv(const std::string& text, const std::string& source);
Result<std::vector<Timeline>> parseTimelinesJson(const std::string& text, const std::string& source);
// Reads a timeline file in a readable format (Chrome traces are export-only) of at most the format's
// size limit (kMaxTimelineFileBytes, input_file.hpp; kMaxSnapshotFileBytes for PyTorch memory
// snapshots, snapshot.hpp), refused before reading when larger. A .csv or .json file whose content is
// a PyTorch memory snapshot (looksLikeSnapshot) is read as one.
Result<std::vector<Timeline>> readTimelines(const std::string& path);

}  // namespace remat
