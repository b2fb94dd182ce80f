#pragma once
// A planner chooser: one item per row of core's planner registry, its description as the item's
// tooltip, and a spin box for the parameter of a planner that takes a count ("uniform:K"). A
// planner whose parameter is of another kind needs its editor here first (the GUI tests list every
// registry row through this picker).
#include <QWidget>

class QComboBox;
class QSpinBox;

namespace remat {
struct PlannerEntry;
}

namespace remat::gui {

class PlannerPicker : public QWidget {
  Q_OBJECT

 public:
  explicit PlannerPicker(QWidget* parent = nullptr);
  QString plannerName() const;               // "dp", "uniform:4", ...
  bool setPlannerName(const QString& name);  // false for a name core does not accept
  QComboBox* combo() const { return combo_; }

 signals:
  void plannerChanged(const QString& name);

 private:
  const PlannerEntry& currentEntry() const;
  void updateParameter();
  QComboBox* combo_;
  QSpinBox* count_;  // the parameter of a Count-parametrised planner
};

}  // namespace remat::gui
