// MainWindow's toolbars: the main one (files, undo / redo, planner, measure) and the zoo bar. They
// share one row when both fit and take two rows otherwise, so no control ever sits in the "»"
// overflow; undo and redo keep short fixed labels (the edit they undo is in their tooltip and the
// Edit menu), so the controls do not move with every edit. A control added to the main toolbar
// later (a budget field) takes part in the same fitting.
#include <QAction>
#include <QEvent>
#include <QLabel>
#include <QResizeEvent>
#include <QSpinBox>
#include <QTimer>
#include <QToolBar>
#include <QUndoStack>

#include "document/document.hpp"
#include "views/planner_picker.hpp"
#include "views/zoo_bar.hpp"
#include "window/main_window.hpp"

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
  buildOnnxBatchField(zooToolBar_);
  // A toolbar whose contents change (an action shown, a wider widget) asks for a new layout.
  for (QToolBar* bar : {mainToolBar_, zooToolBar_}) bar->installEventFilter(this);
  fitToolBarRows();
}

bool MainWindow::toolBarsOnTwoRows() const { return toolBarBreak(zooToolBar_); }

void MainWindow::fitToolBarRows() {
  if (!mainToolBar_ || !zooToolBar_) return;
  const int oneRow = mainToolBar_->sizeHint().width() + zooToolBar_->sizeHint().width() + kToolBarRowSlackPx;
  const bool twoRows = oneRow > width();
  if (twoRows == toolBarsOnTwoRows()) return;
  if (twoRows) {
    insertToolBarBreak(zooToolBar_);
  } else {
    removeToolBarBreak(zooToolBar_);
  }
}

void MainWindow::resizeEvent(QResizeEvent* event) {
  QMainWindow::resizeEvent(event);
  fitToolBarRows();
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  if ((watched == mainToolBar_ || watched == zooToolBar_) && event->type() == QEvent::LayoutRequest)
    QTimer::singleShot(0, this, &MainWindow::fitToolBarRows);  // after the toolbar's own layout
  return QMainWindow::eventFilter(watched, event);
}

void MainWindow::buildOnnxBatchField(QToolBar* bar) {
  bar->addSeparator();
  bar->addWidget(new QLabel(tr("ONNX batch:"), bar));
  onnxBatch_ = new QSpinBox(bar);
  onnxBatch_->setObjectName(QStringLiteral("onnxBatch"));
  onnxBatch_->setRange(0, 65536);
  onnxBatch_->setSpecialValueText(tr("as exported"));
  onnxBatch_->setToolTip(
      tr("Batch size of an opened ONNX model: sets a symbolic batch dimension and overrides a "
         "fixed one ('as exported' keeps the model's own)"));
  bar->addWidget(onnxBatch_);
  connect(onnxBatch_, &QSpinBox::valueChanged, this, [this]() {
    if (onnxPath_.isEmpty()) return;
    if (!document_->undoStack()->isClean()) {
      showInfo(tr("The new batch applies when %1 is opened again (the chain has edits)").arg(onnxPath_));
      return;
    }
    (void)openChainFile(onnxPath_);
  });
}

}  // namespace remat::gui
