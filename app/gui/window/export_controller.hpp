#pragma once
// The main window's exports: the predicted timeline, predicted and measured timelines in one file
// (only a measurement of the plan shown), the plan as JSON, the chart as PNG or SVG. None of them
// replaces the chain file the document was read from.
#include <QString>

#include "remat/base/status.hpp"
#include "remat/input/atomic_file.hpp"
#include "window/controller.hpp"

namespace remat::gui {

class ExportController : public WindowController {
 public:
  explicit ExportController(MainWindow* window);

  Status exportPredictedTimeline(const QString& path);
  Status exportMeasuredTimeline(const QString& path);  // predicted and measured, in one file
  Status exportPlanJson(const QString& path);
  Status exportChartPng(const QString& path);
  Status exportChartSvg(const QString& path);

  enum class Kind { PredictedTimeline, MeasuredTimeline, PlanJson, ChartPng, ChartSvg };
  // Asks where (the window's prompts), then exports: the type chosen in the dialog decides the
  // format, and the name gets that type's extension.
  void exportDialog(Kind kind);
  QString defaultExportStem() const;  // "resnet18_budget-54951085": chain and planner, no colon

 private:
  WriteOptions writeOptions() const;
};

}  // namespace remat::gui
