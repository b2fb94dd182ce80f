#include "window/export_controller.hpp"

#include "charts/memory_chart.hpp"
#include "document/document.hpp"
#include "document/plan_export.hpp"
#include "document/timeline_files.hpp"
#include "remat/report/timeline_formats.hpp"
#include "views/plan_view.hpp"
#include "window/main_window.hpp"
#include "window/plan_controller.hpp"
#include "window/prompts.hpp"

namespace remat::gui {

ExportController::ExportController(MainWindow* window) : WindowController(window) {}

WriteOptions ExportController::writeOptions() const {
  WriteOptions options;
  const QString& file = window_->document()->filePath();
  if (!file.isEmpty() && !file.startsWith(QLatin1Char(':'))) options.inputs.push_back(file.toStdString());
  return options;
}

Status ExportController::exportPredictedTimeline(const QString& path) {
  const Document* document = window_->document();
  if (!document->hasChain()) return window_->report(Status::invalid("no chain: nothing to export"));
  return window_->report(writeTimelineFile({document->simulation().timeline}, path, writeOptions()),
                         tr("Exported %1").arg(path));
}

Status ExportController::exportMeasuredTimeline(const QString& path) {
  const Document* document = window_->document();
  if (!document->measured())
    return window_->report(Status::invalid("no measured timeline: run the plan or open one first"));
  // Never a prediction of one plan next to a measurement of another.
  if (!document->measuredIsCurrent())
    return window_->report(Status::invalid("the measured timeline is of plan '" +
                                           document->measuredOrigin().planner.toStdString() +
                                           "', not of the plan shown ('" + document->planner().toStdString() +
                                           "'): measure this plan, or undo back to that one; nothing was written"));
  // With the prediction next to it, as `remat run --timeline` writes them. Readers group rows by
  // (planner, source, run): an overlay that is itself a prediction of the same plan gets its own source.
  const Timeline& predicted = document->simulation().timeline;
  Timeline overlay = *document->measured();
  if (overlay.planner == predicted.planner && overlay.source == predicted.source && overlay.run == predicted.run)
    overlay.source = "overlay";
  return window_->report(writeTimelineFile({predicted, overlay}, path, writeOptions()), tr("Exported %1").arg(path));
}

Status ExportController::exportPlanJson(const QString& path) {
  const Document* document = window_->document();
  if (!document->hasChain()) return window_->report(Status::invalid("no chain: nothing to export"));
  return window_->report(
      writePlanJson(path, document->simulation(), document->planner(), window_->plans()->planSecondsForCurrentPlan(),
                    document->chain(), writeOptions()),
      tr("Exported %1").arg(path));
}

Status ExportController::exportChartPng(const QString& path) {
  return window_->report(window_->planView()->chart()->exportPng(path, writeOptions()), tr("Exported %1").arg(path));
}

Status ExportController::exportChartSvg(const QString& path) {
  return window_->report(window_->planView()->chart()->exportSvg(path, writeOptions()), tr("Exported %1").arg(path));
}

namespace {

// What the dialog asks for and which export writes the chosen file.
struct ExportTarget {
  QString title;
  QString suffix;
  QString filter;
  Status (ExportController::*write)(const QString& path) = nullptr;
  bool timeline = false;  // the chosen type (a row of the timeline formats) decides the format
};

ExportTarget exportTarget(ExportController::Kind kind) {
  using Kind = ExportController::Kind;
  switch (kind) {
    case Kind::PredictedTimeline:
      return {QObject::tr("Export predicted timeline"), ".csv", timelineExportFilter(),
              &ExportController::exportPredictedTimeline, true};
    case Kind::MeasuredTimeline:
      return {QObject::tr("Export measured timeline"), ".csv", timelineExportFilter(),
              &ExportController::exportMeasuredTimeline, true};
    case Kind::PlanJson:
      return {QObject::tr("Export plan"), "_plan.json", QObject::tr("JSON (*.json)"),
              &ExportController::exportPlanJson};
    case Kind::ChartPng:
      return {QObject::tr("Export chart"), ".png", QObject::tr("PNG (*.png)"), &ExportController::exportChartPng};
    case Kind::ChartSvg:
      return {QObject::tr("Export chart"), ".svg", QObject::tr("SVG (*.svg)"), &ExportController::exportChartSvg};
  }
  return {};
}

// The name as the chosen type wants it: a timeline's chosen format decides its extension; other
// exports get theirs appended when the name lacks it.
QString exportPath(const ExportTarget& target, const SaveTarget& chosen) {
  if (target.timeline) {
    const TimelineFormat* format = timelineFormatForFilter(chosen.filter);
    return format ? timelinePathFor(chosen.path, *format) : chosen.path;
  }
  const QString extension = target.suffix.mid(target.suffix.lastIndexOf(QLatin1Char('.')));
  return chosen.path.endsWith(extension, Qt::CaseInsensitive) ? chosen.path : chosen.path + extension;
}

}  // namespace

QString ExportController::defaultExportStem() const {
  const Document* document = window_->document();
  // "resnet18_budget-54951085": no colon, which some file systems and tools refuse.
  QString stem = QString::fromStdString(document->chain().name) + QLatin1Char('_') + document->planner();
  for (QChar& c : stem)
    if (c == QLatin1Char(':') || c == QLatin1Char('/') || c == QLatin1Char('\\')) c = QLatin1Char('-');
  return stem;
}

void ExportController::exportDialog(Kind kind) {
  if (!window_->document()->hasChain()) return;
  const ExportTarget target = exportTarget(kind);
  if (!target.write) return;
  const QString firstFilter = target.filter.section(QStringLiteral(";;"), 0, 0);
  const SaveTarget chosen = window_->prompts().saveFile(window_, target.title, defaultExportStem() + target.suffix,
                                                        target.filter, firstFilter);
  if (!chosen.path.isEmpty()) (void)(this->*target.write)(exportPath(target, chosen));
}

}  // namespace remat::gui
