#pragma once
// A planner chooser: the names core offers, with a segment count for "uniform:K".
#include <QWidget>

class QComboBox;
class QSpinBox;

namespace remat::gui {

class PlannerPicker : public QWidget {
  Q_OBJECT

 public:
  explicit PlannerPicker(QWidget* parent = nullptr);
  QString plannerName() const;               // "dp", "uniform:4", ...
  bool setPlannerName(const QString& name);  // false for a name core does not offer

 signals:
  void plannerChanged(const QString& name);

 private:
  void updateSegments();
  QComboBox* combo_;
  QSpinBox* segments_;
};

}  // namespace remat::gui
