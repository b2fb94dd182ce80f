#include "document/timeline_files.hpp"

#include <QObject>
#include <QStringList>

#include "common/qt_text.hpp"
#include "remat/report/exporters.hpp"
#include "remat/report/timeline_formats.hpp"

namespace remat::gui {
namespace {

// "CSV timeline (*.csv)"
QString filterOf(const TimelineFormat& format) {
  return QStringLiteral("%1 (*%2)").arg(ui::toQString(format.title), ui::toQString(format.extension));
}

}  // namespace

Status writeTimelineFile(const std::vector<Timeline>& timelines, const QString& path, const WriteOptions& options) {
  return writeTimelines(path.toStdString(), timelines, options);
}

Result<Timeline> readTimelineFile(const QString& path) {
  Result<std::vector<Timeline>> timelines = readTimelines(path.toStdString());
  if (!timelines) return timelines.status();
  if (timelines->empty()) return Status::invalid(path.toStdString() + ": the file holds no timeline");
  // `remat run --timeline` writes the prediction next to the measurement: overlay the measurement.
  for (Timeline& timeline : *timelines)
    if (timeline.source != "predicted") return std::move(timeline);
  return std::move(timelines->front());
}

QString timelineOpenFilter() {
  QStringList patterns;
  QStringList filters;
  for (const TimelineFormat& format : timelineFormats()) {
    if (!format.readable()) continue;
    patterns << QStringLiteral("*") + ui::toQString(format.extension);
    filters << filterOf(format);
  }
  return QObject::tr("Timelines (%1);;%2;;All files (*)").arg(patterns.join(QLatin1Char(' ')), filters.join(";;"));
}

QString timelineExportFilter() {
  QStringList filters;
  for (const TimelineFormat& format : timelineFormats()) filters << filterOf(format);
  return filters.join(QStringLiteral(";;"));
}

const TimelineFormat* timelineFormatForFilter(const QString& filter) {
  for (const TimelineFormat& format : timelineFormats())
    if (filterOf(format) == filter) return &format;
  return nullptr;
}

QString timelinePathFor(const QString& path, const TimelineFormat& format) {
  Result<const TimelineFormat*> named = timelineFormatForPath(path.toStdString());
  if (named && *named == &format) return path;
  QString stem = path;
  if (named) stem.chop(static_cast<int>((*named)->extension.size()));
  return stem + ui::toQString(format.extension);
}

}  // namespace remat::gui
