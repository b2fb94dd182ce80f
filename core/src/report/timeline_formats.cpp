// The table of timeline file formats (timeline_formats.hpp) and the file entry points that choose a
// row by the file's extension: writeTimelines and readTimelines (exporters.hpp).
#include "remat/report/timeline_formats.hpp"

#include <algorithm>
#include <cctype>

#include "remat/input/atomic_file.hpp"
#include "remat/input/input_file.hpp"
#include "remat/report/exporters.hpp"
#include "remat/report/snapshot.hpp"

namespace remat {

namespace {

Result<std::vector<Timeline>> parseSnapshotFile(const std::string& text, const std::string& source) {
  return parseSnapshot(text, source);
}

}  // namespace

std::span<const TimelineFormat> timelineFormats() {
  // One row per format: name, extension, title, help note, writer, reader (nullptr: export-only),
  // size limit for reading (0: kMaxTimelineFileBytes).
  static const TimelineFormat kFormats[] = {
      {"csv", ".csv", "CSV timeline", "", timelinesToCsv, parseTimelinesCsv},
      {"chrome-trace", ".trace.json", "Chrome trace", "Chrome/Perfetto", timelinesToChromeTrace, nullptr},
      {"json", ".json", "JSON timeline", "", timelinesToJson, parseTimelinesJson},
      {"pytorch-snapshot-json", ".snapshot.json", "PyTorch memory snapshot, JSON", "PyTorch memory snapshot, JSON",
       timelinesToSnapshotJson, parseSnapshotFile, kMaxSnapshotFileBytes},
      {"pytorch-snapshot", ".pickle", "PyTorch memory snapshot", "PyTorch memory snapshot, for pytorch.org/memory_viz",
       timelinesToSnapshotPickle, parseSnapshotFile, kMaxSnapshotFileBytes},
      {"pytorch-snapshot-pkl", ".pkl", "PyTorch memory snapshot (.pkl)", "PyTorch memory snapshot",
       timelinesToSnapshotPickle, parseSnapshotFile, kMaxSnapshotFileBytes},
  };
  return kFormats;
}

namespace {

// ".csv, .trace.json or .json" (with each help note in brackets when asked).
std::string extensionList(bool withNotes) {
  std::string text;
  const auto formats = timelineFormats();
  for (std::size_t i = 0; i < formats.size(); ++i) {
    if (i > 0) text += i + 1 == formats.size() ? " or " : ", ";
    text += formats[i].extension;
    if (withNotes && !formats[i].helpNote.empty()) text += " (" + std::string(formats[i].helpNote) + ")";
  }
  return text;
}

// ".csv, .json, ... or .pkl": the formats that read back.
std::string readableExtensionList() {
  std::vector<std::string_view> extensions;
  for (const TimelineFormat& format : timelineFormats())
    if (format.readable()) extensions.push_back(format.extension);
  std::string text;
  for (std::size_t i = 0; i < extensions.size(); ++i) {
    if (i > 0) text += i + 1 == extensions.size() ? " or " : ", ";
    text += extensions[i];
  }
  return text;
}

bool endsWithNoCase(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         std::equal(suffix.begin(), suffix.end(), text.end() - static_cast<std::ptrdiff_t>(suffix.size()),
                    [](char a, char b) {
                      return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
                    });
}

}  // namespace

Result<const TimelineFormat*> timelineFormatForPath(const std::string& path) {
  const TimelineFormat* best = nullptr;
  for (const TimelineFormat& format : timelineFormats())
    if (endsWithNoCase(path, format.extension) && (!best || format.extension.size() > best->extension.size()))
      best = &format;
  if (best) return best;
  return Status::invalid(path + ": unknown timeline format; use a name ending in " + extensionList(false));
}

std::string timelineFormatsHelp() { return extensionList(true); }

Status writeTimelines(const std::string& path, const std::vector<Timeline>& timelines, const WriteOptions& options) {
  auto format = timelineFormatForPath(path);
  if (!format) return format.status();
  return writeFileAtomically(path, (*format)->write(timelines), options);
}

Result<std::vector<Timeline>> readTimelines(const std::string& path) {
  auto format = timelineFormatForPath(path);
  if (!format) return format.status();
  if (!(*format)->readable())
    return Status::invalid(path + ": a " + std::string((*format)->title) + " is export-only; read the " +
                           readableExtensionList() + " timeline instead");
  const std::uint64_t maxBytes = (*format)->maxInputBytes ? (*format)->maxInputBytes : kMaxTimelineFileBytes;
  auto text = readInputFile(path, maxBytes, "timeline");
  if (!text) return text.status();
  // `remat_torch` and PyTorch name snapshots freely (x.json, x.csv from a renamed pickle): the content decides.
  if (looksLikeSnapshot(*text)) return parseSnapshot(*text, path);
  return (*format)->parse(*text, path);
}

}  // namespace remat
