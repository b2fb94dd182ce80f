// MainWindow's toolbars: the main one (files, undo / redo, planner, measure), the zoo bar, the ONNX
// bar (the batch and an imported transformer's import bar) and the step bar. Each joins the row before it when it fits
// there and starts a row of its own otherwise, so no control ever sits in the "»" overflow; undo and redo keep short
// fixed labels (the edit they undo is in their tooltip and the Edit menu), so the controls do not move with every edit.
// A control added to the main toolbar later (a budget field) takes part in the same fitting.
#include <QAction>
#include <QEvent>
#include <QLabel>
#include <QResizeEvent>
#include <QSpinBox>
#include <QTimer>
#include <QToolBar>
#include <QUndoStack>

#include "document/document.hpp"
#include "views/import_bar.hpp"
#include "views/planner_picker.hpp"
#include "views/step_bar.hpp"
#include "views/zoo_bar.hpp"
#include "window/file_controller.hpp"
#include "window/main_window.hpp"
#include "window/plan_controller.hpp"

namespace remat::gui {
namespace {

// The space QMainWindow leaves around toolbars on one row (handles, margins), in pixels.
constexpr int kToolBarRowSlackPx = 24;

// A toolbar action that undoes (or redoes) the stack's next edit. Its text stays short; the
// tooltip names the edit.
QAction* stackAction(QObject* parent, QUndoStack* stack, bool undo) {
  auto* action = new QAction(QIcon(undo ? QStringLiteral(":/icons/undo.svg") : QStringLiteral(":/icons/redo.svg")),
                             undo ? QObject::tr("Undo") : QObject::tr("Redo"), parent);
  action->setObjectName(undo ? QStringLiteral("toolUndo") : QStringLiteral("toolRedo"));
  const auto describe = [action, undo](const QString& text) {
    const QString tip =
        text.isEmpty() ? (undo ? QObject::tr("Nothing to undo") : QObject::tr("Nothing to redo"))
                       : (undo ? QObject::tr("Undo %1 (Ctrl+Z)") : QObject::tr("Redo %1 (Ctrl+Shift+Z)")).arg(text);
    action->setToolTip(tip);
    action->setStatusTip(tip);
  };
  if (undo) {
    QObject::connect(action, &QAction::triggered, stack, &QUndoStack::undo);
    QObject::connect(stack, &QUndoStack::canUndoChanged, action, &QAction::setEnabled);
    QObject::connect(stack, &QUndoStack::undoTextChanged, action, describe);
    action->setEnabled(stack->canUndo());
    describe(stack->undoText());
  } else {
    QObject::connect(action, &QAction::triggered, stack, &QUndoStack::redo);
    QObject::connect(stack, &QUndoStack::canRedoChanged, action, &QAction::setEnabled);
    QObject::connect(stack, &QUndoStack::redoTextChanged, action, describe);
    action->setEnabled(stack->canRedo());
    describe(stack->redoText());
  }
  return action;
}

}  // namespace

void MainWindow::buildToolBars() {
  mainToolBar_ = addToolBar(tr("Main"));
  mainToolBar_->setObjectName(QStringLiteral("mainToolBar"));
  mainToolBar_->setIconSize(QSize(20, 20));
  mainToolBar_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  for (const char* key : {"open", "save"}) mainToolBar_->addAction(actions_[key]);
  mainToolBar_->addSeparator();
  actions_.insert(QStringLiteral("toolUndo"), stackAction(this, document_->undoStack(), true));
  actions_.insert(QStringLiteral("toolRedo"), stackAction(this, document_->undoStack(), false));
  for (const char* key : {"toolUndo", "toolRedo"}) mainToolBar_->addAction(actions_[key]);
  mainToolBar_->addSeparator();
  plannerPicker_ = new PlannerPicker(mainToolBar_);
  plannerPicker_->setPlannerName(QStringLiteral("linear"));
  mainToolBar_->addWidget(plannerPicker_);
  mainToolBar_->addAction(actions_["plan"]);
  mainToolBar_->addSeparator();
  for (const char* key : {"runCpu", "runGpu"}) mainToolBar_->addAction(actions_[key]);
  zooToolBar_ = addToolBar(tr("Zoo"));
  zooToolBar_->setObjectName(QStringLiteral("zooToolBar"));
  zooBar_ = new ZooBar(zooToolBar_);
  zooToolBar_->addWidget(zooBar_);
  // The ONNX fields have a bar of their own: with an imported transformer's dimension fields they
  // need a row of their own at 1,024 px rather than the overflow menu.
  onnxToolBar_ = addToolBar(tr("ONNX"));
  onnxToolBar_->setObjectName(QStringLiteral("onnxToolBar"));
  buildOnnxBatchField(onnxToolBar_);
  stepToolBar_ = addToolBar(tr("Step"));
  stepToolBar_->setObjectName(QStringLiteral("stepToolBar"));
  buildStepBar(stepToolBar_);
  // A toolbar whose contents change (an action shown, a wider widget) asks for a new layout.
  for (QToolBar* bar : {mainToolBar_, zooToolBar_, onnxToolBar_, stepToolBar_}) bar->installEventFilter(this);
  fitToolBarRows();
}

bool MainWindow::toolBarsOnTwoRows() const { return toolBarBreak(zooToolBar_); }

void MainWindow::fitToolBarRows() {
  if (!mainToolBar_ || !zooToolBar_ || !onnxToolBar_ || !stepToolBar_) return;
  int rowWidth = mainToolBar_->sizeHint().width() + kToolBarRowSlackPx;
  for (QToolBar* bar : {zooToolBar_, onnxToolBar_, stepToolBar_}) {
    const int barWidth = bar->sizeHint().width();
    const bool newRow = rowWidth + barWidth > width();
    rowWidth = newRow ? barWidth + kToolBarRowSlackPx : rowWidth + barWidth;
    if (newRow == toolBarBreak(bar)) continue;
    if (newRow) {
      insertToolBarBreak(bar);
    } else {
      removeToolBarBreak(bar);
    }
  }
}

void MainWindow::resizeEvent(QResizeEvent* event) {
  QMainWindow::resizeEvent(event);
  fitToolBarRows();
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  if ((watched == mainToolBar_ || watched == zooToolBar_ || watched == onnxToolBar_ || watched == stepToolBar_) &&
      event->type() == QEvent::LayoutRequest)
    QTimer::singleShot(0, this, &MainWindow::fitToolBarRows);  // after the toolbar's own layout
  return QMainWindow::eventFilter(watched, event);
}

void MainWindow::buildOnnxBatchField(QToolBar* bar) {
  bar->addWidget(new QLabel(tr("ONNX batch:"), bar));
  onnxBatch_ = new QSpinBox(bar);
  onnxBatch_->setObjectName(QStringLiteral("onnxBatch"));
  onnxBatch_->setRange(0, 65536);
  onnxBatch_->setSpecialValueText(tr("as exported"));
  onnxBatch_->setToolTip(
      tr("Batch size of an opened ONNX model: sets a symbolic batch dimension and overrides a "
         "fixed one ('as exported' keeps the model's own)"));
  bar->addWidget(onnxBatch_);
  connect(onnxBatch_, &QSpinBox::valueChanged, files_, &FileController::onnxBatchChanged);
  importBar_ = new ImportBar(bar);
  importBar_->setObjectName(QStringLiteral("importBar"));
  importBarAction_ = bar->addWidget(importBar_);
  importBarAction_->setVisible(false);
  connect(importBar_, &ImportBar::changed, files_, &FileController::importFieldsChanged);
}

void MainWindow::showImportBar(bool shown) {
  if (importBarAction_) importBarAction_->setVisible(shown);
}

void MainWindow::buildStepBar(QToolBar* bar) {
  stepBar_ = new StepBar(bar);
  stepBar_->setStepOptions(document_->stepOptions());
  bar->addWidget(stepBar_);
  connect(stepBar_, &StepBar::stepChanged, this, [this](const StepOptions& step) {
    // A planner's plan is planned again for the new step (its best checkpoints move with the
    // gradients and the optimizer's floor); a hand-made plan stays as it is.
    const bool replan = document_->hasChain() && document_->planner() == plannerPicker_->plannerName();
    if (!report(document_->setStepOptions(step))) return;
    if (replan) plans_->runPlanner(plannerPicker_->plannerName());
  });
  // An undo of a step change, or of an edit before it, shows the step of the chain it restores.
  connect(document_, &Document::chainChanged, stepBar_,
          [this]() { stepBar_->setStepOptions(document_->stepOptions()); });
}

}  // namespace remat::gui
