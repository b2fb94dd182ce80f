#include "views/step_bar.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <algorithm>

#include "common/qt_text.hpp"

namespace remat::gui {

StepBar::StepBar(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(4);
  optimizer_ = new QComboBox(this);
  optimizer_->setObjectName(QStringLiteral("stepOptimizer"));
  for (OptimizerKind kind : optimizerKinds()) optimizer_->addItem(ui::toQString(optimizerName(kind)));
  optimizer_->setToolTip(
      tr("The optimizer step that ends the training step (PyTorch's defaults): its state (momentum: one "
         "copy of the weights; Adam, AdamW: two) is static memory, its temporaries the step op's"));
  grads_ = new QComboBox(this);
  grads_->setObjectName(QStringLiteral("stepGrads"));
  for (GradMode mode : gradModes())
    grads_->addItem(tr("gradients %1").arg(ui::toQString(gradModeName(mode))), ui::toQString(gradModeName(mode)));
  grads_->setToolTip(
      tr("When weight gradients exist: in-place (allocated for the whole step, each backward adds into them: the "
         "paper's model), static (zero_grad(set_to_none=False): allocated for the whole step, each backward makes "
         "a fresh gradient and adds it in) or on-backward (PyTorch 2's zero_grad(): each layer's backward "
         "allocates them, the optimizer step frees them)"));
  foreach_ = new QCheckBox(tr("foreach"), this);
  foreach_->setObjectName(QStringLiteral("stepForeach"));
  foreach_->setToolTip(
      tr("The optimizer's multi-tensor (foreach) implementation, PyTorch's default on CUDA; off: its "
         "per-parameter loop"));
  precision_ = new QComboBox(this);
  precision_->setObjectName(QStringLiteral("stepPrecision"));
  for (Precision precision : precisions()) precision_->addItem(ui::toQString(precisionName(precision)));
  precision_->setToolTip(
      tr("The step's dtypes: fp32; bf16 or fp16 (the whole model, weights and optimizer state in half); "
         "bf16-mixed or fp16-mixed (torch.autocast: convolutions and linears in half, float32 master weights, "
         "gradients and optimizer state; each conv and linear keeps a half copy of its weights for its backward)"));
  layout->addWidget(new QLabel(tr("Step:"), this));
  layout->addWidget(optimizer_);
  layout->addWidget(foreach_);
  layout->addWidget(grads_);
  layout->addWidget(precision_);
  setStepOptions(kPyTorchDefaultStep);
  const auto changed = [this]() {
    updateForeach();
    emit stepChanged(stepOptions());
  };
  connect(optimizer_, &QComboBox::currentIndexChanged, this, changed);
  connect(grads_, &QComboBox::currentIndexChanged, this, changed);
  connect(foreach_, &QCheckBox::toggled, this, changed);
  connect(precision_, &QComboBox::currentIndexChanged, this, changed);
}

StepOptions StepBar::stepOptions() const {
  StepOptions options;
  options.optimizer = optimizerKinds()[static_cast<std::size_t>(std::max(0, optimizer_->currentIndex()))];
  options.foreach = foreach_->isChecked();
  options.grads = gradModes()[static_cast<std::size_t>(std::max(0, grads_->currentIndex()))];
  options.precision = precisions()[static_cast<std::size_t>(std::max(0, precision_->currentIndex()))];
  return options;
}

void StepBar::setStepOptions(const StepOptions& options) {
  const QSignalBlocker blockOptimizer(optimizer_);
  const QSignalBlocker blockGrads(grads_);
  const QSignalBlocker blockForeach(foreach_);
  const QSignalBlocker blockPrecision(precision_);
  optimizer_->setCurrentText(ui::toQString(optimizerName(options.optimizer)));
  const auto modes = gradModes();
  grads_->setCurrentIndex(static_cast<int>(std::find(modes.begin(), modes.end(), options.grads) - modes.begin()));
  foreach_->setChecked(options.foreach);
  precision_->setCurrentText(ui::toQString(precisionName(options.precision)));
  updateForeach();
}

void StepBar::updateForeach() { foreach_->setEnabled(optimizer_->currentIndex() > 0); }

}  // namespace remat::gui
