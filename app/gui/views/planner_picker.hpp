#pragma once
// A planner chooser: one item per row of core's planner registry, its description as the item's
// tooltip, a spin box for the parameter of a planner that takes a count ("uniform:K") and a text
// field for one that takes a byte size ("budget:SIZE", the explorer's budget field). A planner
// whose parameter is of another kind needs its editor here first (the GUI tests list every
// registry row through this picker).
#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTimer;

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
  QLineEdit* sizeField() const { return size_; }
  QLabel* sizeLabel() const { return sizeLabel_; }

 signals:
  void plannerChanged(const QString& name);
  // A byte-size parameter was edited into a size core accepts, and the typing has paused: a
  // budget to plan for now (the explorer replans live).
  void sizeEdited(const QString& name);

 private:
  const PlannerEntry& currentEntry() const;
  void updateParameter();
  QComboBox* combo_;
  bool sizeChanged();
  QSpinBox* count_;    // the parameter of a Count-parametrised planner
  QLineEdit* size_;    // the parameter of a ByteSize-parametrised planner, as typed
  QLabel* sizeLabel_;  // what the size bounds: "dynamic E ≤" (not the total: static memory comes on top)
  QTimer* settle_;     // sizeEdited waits for the typing to pause
};

}  // namespace remat::gui
