#pragma once
// The compare tab: two planners (DP and linear by default) side by side on the same axes, a table
// of their numbers, and "apply" buttons that copy a plan into the editor. Planning runs in the
// background (JobChannel::Compare); a chain edit makes the comparison stale and reruns it when shown.
#include <QWidget>
#include <array>

#include "document/plan_jobs.hpp"
#include "remat/memory/plan.hpp"

class QHBoxLayout;
class QLabel;
class QPushButton;
class QSplitter;
class QTableView;

namespace remat::charts {
class MemoryChart;
}

namespace remat::gui {

class CompareTableModel;
class Document;
class JobRunner;
class PlannerPicker;

class CompareView : public QWidget {
  Q_OBJECT

 public:
  CompareView(Document* document, JobRunner* jobs, QWidget* parent = nullptr);

  PlannerPicker* picker(int side) const { return pickers_[static_cast<std::size_t>(side)]; }
  charts::MemoryChart* chart(int side) const { return charts_[static_cast<std::size_t>(side)]; }
  CompareTableModel* model() const { return model_; }
  QPushButton* applyButton(int side) const { return apply_[static_cast<std::size_t>(side)]; }
  bool isStale() const { return stale_; }
  QString statusText() const;

 public slots:
  void compare();  // starts the background comparison of the two pickers' planners

 signals:
  // The chosen side's plan with its simulation, computed on the document's current chain (a chain
  // change clears the comparison), so applying it simulates nothing again.
  void applyRequested(const SimulatedPlan& planned);
  void statusMessage(const QString& text);

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  QHBoxLayout* buildPickers();
  QTableView* buildTable();
  QSplitter* buildPanes();
  void showResults();

  Document* document_;
  JobRunner* jobs_;
  std::array<PlannerPicker*, 2> pickers_{};
  std::array<charts::MemoryChart*, 2> charts_{};
  std::array<QPushButton*, 2> apply_{};
  std::array<QLabel*, 2> titles_{};
  CompareTableModel* model_;
  QTableView* table_;
  QLabel* status_;
  QPushButton* resetZoom_;
  bool stale_ = true;
};

}  // namespace remat::gui
