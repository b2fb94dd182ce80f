#pragma once
// Timeline files in the formats of `remat run --timeline`, as the report stage's table of formats
// lists them (remat/report/timeline_formats.hpp): the file dialogs' filters come from the table too,
// so a new format shows up in the explorer without a change here.
#include <QString>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/memory/timeline.hpp"

namespace remat {
struct TimelineFormat;
}

namespace remat::gui {

// A file may hold several timelines; reading picks the first measured one (a `remat run --timeline`
// file holds the prediction too), else the first.
Status writeTimelineFile(const std::vector<Timeline>& timelines, const QString& path, const WriteOptions& options = {});
Result<Timeline> readTimelineFile(const QString& path);

// "Timelines (*.csv *.json);;CSV timeline (*.csv);;JSON timeline (*.json);;All files (*)": the
// readable formats, for Open measured timeline.
QString timelineOpenFilter();
// "CSV timeline (*.csv);;Chrome trace (*.trace.json);;JSON timeline (*.json)": every format, for the
// exports.
QString timelineExportFilter();

// The format a save dialog's chosen filter (one of timelineExportFilter's) names; nullptr for another.
const TimelineFormat* timelineFormatForFilter(const QString& filter);
// `path` named for `format`: kept when the table already reads it as that format, another format's
// extension replaced ("x.json" as a Chrome trace: "x.trace.json"), the extension appended otherwise.
QString timelinePathFor(const QString& path, const TimelineFormat& format);

}  // namespace remat::gui
