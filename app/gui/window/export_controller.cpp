#include "window/export_controller.hpp"

#include <QFileDialog>

#include "charts/memory_chart.hpp"
#include "document/document.hpp"
#include "document/plan_export.hpp"
#include "document/timeline_files.hpp"
#include "views/plan_view.hpp"
#include "window/main_window.hpp"
#include "window/plan_controller.hpp"

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
                    document->chain().name, writeOptions()),
      tr("Exported %1").arg(path));
}

Status ExportController::exportChartPng(const QString& path) {
  return window_->report(window_->planView()->chart()->exportPng(path, writeOptions()), tr("Exported %1").arg(path));
}

Status ExportController::exportChartSvg(const QString& path) {
  return window_->report(window_->planView()->chart()->exportSvg(path, writeOptions()), tr("Exported %1").arg(path));
}

void ExportController::exportDialog(Kind kind) {
  const Document* document = window_->document();
  if (!document->hasChain()) return;
  // What the dialog asks for and which export writes the chosen file.
  struct Target {
    QString title;
    QString suffix;
    QString filter;
    Status (ExportController::*write)(const QString& path) = nullptr;
  };
  const Target target = [&]() -> Target {
    switch (kind) {
      case Kind::PredictedTimeline:
        return {tr("Export predicted timeline"), ".csv", timelineExportFilter(),
                &ExportController::exportPredictedTimeline};
      case Kind::MeasuredTimeline:
        return {tr("Export measured timeline"), ".csv", timelineExportFilter(),
                &ExportController::exportMeasuredTimeline};
      case Kind::PlanJson:
        return {tr("Export plan"), "_plan.json", tr("JSON (*.json)"), &ExportController::exportPlanJson};
      case Kind::ChartPng: return {tr("Export chart"), ".png", tr("PNG (*.png)"), &ExportController::exportChartPng};
      case Kind::ChartSvg: return {tr("Export chart"), ".svg", tr("SVG (*.svg)"), &ExportController::exportChartSvg};
    }
    return {};
  }();
  if (!target.write) return;
  const QString stem = QString::fromStdString(document->chain().name) + QLatin1Char('_') + document->planner();
  const QString path = QFileDialog::getSaveFileName(window_, target.title, stem + target.suffix, target.filter);
  if (!path.isEmpty()) (void)(this->*target.write)(path);
}

}  // namespace remat::gui
