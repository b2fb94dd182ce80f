#pragma once
// Picks what the training step does besides forward and backward (docs/memory-model.md section
// 11): the optimizer, its foreach implementation, when weight gradients exist and the precision
// (section 11.7). The explorer's counterpart of the command line's --optimizer, --foreach, --grads
// and --precision.
#include <QWidget>

#include "remat/model/step_options.hpp"

class QCheckBox;
class QComboBox;

namespace remat::gui {

class StepBar : public QWidget {
  Q_OBJECT

 public:
  explicit StepBar(QWidget* parent = nullptr);
  StepOptions stepOptions() const;
  // Shows options without saying stepChanged (an undo, a new chain).
  void setStepOptions(const StepOptions& options);

 signals:
  void stepChanged(const remat::StepOptions& options);  // the user picked another option

 private:
  void updateForeach();  // foreach means nothing without an optimizer

  QComboBox* optimizer_;
  QComboBox* grads_;
  QCheckBox* foreach_;
  QComboBox* precision_;
};

}  // namespace remat::gui
