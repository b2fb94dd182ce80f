#pragma once
// The one table of timeline file formats. Everything that lists, chooses, writes or reads a timeline
// file reads it: `remat simulate` / `remat run --timeline` (their help and the check of the name),
// the explorer's open and export dialogs (their filters), writeTimelines and readTimelines
// (exporters.hpp). Adding a format: its writer (and reader, when it can be read back) in a file of its
// own under core/src/report/, and its row in core/src/report/timeline_formats.cpp, which declares
// the functions it names unless exporters.hpp does (for the tests and fuzzers that call them).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/memory/timeline.hpp"

namespace remat {

struct TimelineFormat {
  std::string_view name;       // "csv", "chrome-trace", "json", "pytorch-snapshot"
  std::string_view extension;  // ".csv", ".trace.json": what a file name ends with (any case)
  std::string_view title;      // "CSV timeline": the explorer's file filters
  std::string_view helpNote;   // "Chrome/Perfetto": in brackets after the extension in the CLI's help
  std::string (*write)(const std::vector<Timeline>& timelines) = nullptr;
  // nullptr: export-only. `source` names the file in messages.
  Result<std::vector<Timeline>> (*parse)(const std::string& text, const std::string& source) = nullptr;
  std::uint64_t maxInputBytes = 0;  // the largest file readTimelines reads; 0: kMaxTimelineFileBytes
  bool readable() const { return parse != nullptr; }
};

// Every format, in the order help texts and menus list them.
std::span<const TimelineFormat> timelineFormats();

// The format whose extension `path` ends with, case-insensitively; the longest extension wins
// (x.trace.json is a Chrome trace, x.json a JSON timeline). InvalidInput naming the extensions
// otherwise.
Result<const TimelineFormat*> timelineFormatForPath(const std::string& path);

// ".csv, .trace.json (Chrome/Perfetto) or .json": every format for the CLI's --timeline help.
std::string timelineFormatsHelp();

}  // namespace remat
