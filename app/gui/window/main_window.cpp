#include "window/main_window.hpp"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>

#include "common/qt_text.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/run_support.hpp"
#include "remat/base/device_names.hpp"
#include "views/checkpoint_strip.hpp"
#include "views/compare_view.hpp"
#include "views/layer_panel.hpp"
#include "views/message_bar.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "views/tradeoff_view.hpp"
#include "views/zoo_bar.hpp"
#include "window/about.hpp"
#include "window/export_controller.hpp"
#include "window/file_controller.hpp"
#include "window/measure_controller.hpp"
#include "window/plan_controller.hpp"

// The icons and examples live in a static library: register them explicitly (outside any namespace,
// as Q_INIT_RESOURCE requires).
static void initRematResources() { Q_INIT_RESOURCE(remat); }

namespace remat::gui {

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      document_(new Document(this)),
      jobs_(new JobRunner(this)),
      files_(new FileController(this)),
      plans_(new PlanController(this)),
      measuring_(new MeasureController(this)),
      exports_(new ExportController(this)) {
  initRematResources();
  setWindowIcon(QIcon(QStringLiteral(":/icons/app.svg")));
  setAcceptDrops(true);
  buildCentralWidget();
  buildActions();
  buildMenus();
  buildToolBars();
  buildStatusBar();
  connectViews();
  QSettings settings;
  geometryRestored_ = restoreGeometry(settings.value(QStringLiteral("geometry")).toByteArray());
  updateTitle();
  updateActions();
}

// The message bar over two tabs: the layer table beside the plan view, and the comparison.
void MainWindow::buildCentralWidget() {
  auto* central = new QWidget(this);
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(4, 4, 4, 0);
  layout->setSpacing(4);
  messageBar_ = new MessageBar(central);
  layout->addWidget(messageBar_);
  tabs_ = new QTabWidget(central);
  tabs_->setDocumentMode(true);
  auto* splitter = new QSplitter(Qt::Horizontal, tabs_);
  layerPanel_ = new LayerPanel(document_, splitter);
  planView_ = new PlanView(document_, splitter);
  splitter->addWidget(layerPanel_);
  splitter->addWidget(planView_);
  splitter->setStretchFactor(0, 2);
  splitter->setStretchFactor(1, 3);
  splitter->setSizes({560, 860});
  tabs_->addTab(splitter, QIcon(QStringLiteral(":/icons/plan.svg")), tr("Plan"));
  compareView_ = new CompareView(document_, jobs_, tabs_);
  tabs_->addTab(compareView_, QIcon(QStringLiteral(":/icons/compare.svg")), tr("Compare"));
  tradeoffView_ = new TradeoffView(document_, jobs_, tabs_);
  tabs_->addTab(tradeoffView_, tr("Trade-off"));
  layout->addWidget(tabs_, 1);
  setCentralWidget(central);
}

void MainWindow::connectViews() {
  connect(document_, &Document::chainChanged, this, [this]() {
    jobs_->cancel(JobChannel::Plan);  // a plan for the old chain means nothing for the new one
    jobs_->cancel(JobChannel::Run);
    updateTitle();
    updateActions();
  });
  connect(document_, &Document::simulationChanged, this, &MainWindow::updateActions);
  connect(document_, &Document::measuredChanged, this, &MainWindow::updateActions);
  connect(document_, &Document::filePathChanged, this, &MainWindow::updateTitle);
  connect(document_->undoStack(), &QUndoStack::cleanChanged, this, &MainWindow::updateTitle);
  // Every edit, undo and redo says what it did and where the peak went, in place of the last message.
  connect(document_->undoStack(), &QUndoStack::indexChanged, this, [this](int index) {
    const QUndoStack* stack = document_->undoStack();
    const bool undid = index < shownUndoIndex_;
    shownUndoIndex_ = index;
    const QString what = undid ? tr("Undid: %1").arg(stack->text(index)) : stack->text(index - 1);
    if (what.isEmpty() || !document_->hasChain()) return;
    statusText_->setText(tr("%1 (peak %2)").arg(what, ui::formatBytes(document_->simulation().peakBytes())));
  });
  connect(document_, &Document::chainReplaced, this, [this]() { shownUndoIndex_ = 0; });
  const auto showStatus = [this](const QString& text) { statusText_->setText(text); };
  connect(planView_, &PlanView::statusMessage, this, showStatus);
  connect(layerPanel_, &LayerPanel::newChainRequested, this, [this]() {
    if (files_->maySaveChanges()) (void)files_->newChain();
  });
  connect(planView_, &PlanView::layerFocused, layerPanel_, &LayerPanel::selectLayer);
  connect(layerPanel_, &LayerPanel::layerSelected, this,
          [this](std::size_t layer) { planView_->strip()->setCursor(layer); });
  connect(layerPanel_, &LayerPanel::statusMessage, this, showStatus);
  connect(compareView_, &CompareView::statusMessage, this, showStatus);
  connect(zooBar_, &ZooBar::loadRequested, this, [this](const QString& name, const ZooOptions& options) {
    if (files_->maySaveChanges()) (void)files_->loadZoo(name, options);
  });
  plans_->connectViews();
}

MainWindow::~MainWindow() { jobs_->shutdown(); }

QAction* MainWindow::defineAction(const QString& key, const QString& text, const QString& icon,
                                  const QKeySequence& shortcut, const QString& tip, std::function<void()> slot) {
  auto* action = new QAction(icon.isEmpty() ? QIcon() : QIcon(icon), text, this);
  if (!shortcut.isEmpty()) action->setShortcut(shortcut);
  action->setStatusTip(tip);
  action->setToolTip(tip);
  connect(action, &QAction::triggered, this, std::move(slot));
  actions_.insert(key, action);
  return action;
}

void MainWindow::buildActions() {
  buildFileActions();
  buildExportActions();
  buildEditActions();
  buildPlanActions();
  buildRunActions();
  buildHelpActions();
}

void MainWindow::buildFileActions() {
  defineAction("new", tr("&New chain"), ":/icons/new.svg", QKeySequence::New, tr("Start a small chain to edit"),
               [this]() {
                 if (files_->maySaveChanges()) (void)files_->newChain();
               });
  defineAction("open", tr("&Open chain..."), ":/icons/open.svg", QKeySequence::Open,
               tr("Open a remat-chain/1 file or an ONNX model"), [this]() { files_->openDialog(); });
  defineAction("save", tr("&Save chain"), ":/icons/save.svg", QKeySequence::Save, tr("Save the chain"),
               [this]() { files_->saveDialog(); });
  defineAction("saveAs", tr("Save chain &as..."), "", QKeySequence::SaveAs, tr("Save the chain to a new file"),
               [this]() { files_->saveAsDialog(); });
  defineAction("openTimeline", tr("Open measured &timeline..."), "", QKeySequence(),
               tr("Overlay a timeline written by `remat run --timeline`, or a PyTorch memory snapshot"),
               [this]() { files_->openTimelineDialog(); });
  defineAction("openPlan", tr("Open &plan..."), "", QKeySequence(),
               tr("Apply a plan file (File > Export plan, `remat plan --json`) to the chain shown"),
               [this]() { files_->openPlanDialog(); });
  defineAction("quit", tr("&Quit"), "", QKeySequence::Quit, tr("Quit Remat Explorer"), [this]() { close(); });
}

void MainWindow::buildExportActions() {
  using Kind = ExportController::Kind;
  const auto dialog = [this](Kind kind) { return [this, kind]() { exports_->exportDialog(kind); }; };
  defineAction("exportPredicted", tr("Predicted timeline..."), "", QKeySequence(),
               tr("CSV, Chrome trace, JSON or PyTorch memory snapshot"), dialog(Kind::PredictedTimeline));
  defineAction("exportMeasured", tr("Predicted and measured timelines..."), "", QKeySequence(),
               tr("Both timelines in one CSV, Chrome trace, JSON or PyTorch memory snapshot file"),
               dialog(Kind::MeasuredTimeline));
  defineAction("exportPlan", tr("Plan as JSON..."), "", QKeySequence(), tr("The fields of `remat plan --json`"),
               dialog(Kind::PlanJson));
  defineAction("exportPng", tr("Chart as PNG..."), "", QKeySequence(), tr("The memory chart as an image"),
               dialog(Kind::ChartPng));
  defineAction("exportSvg", tr("Chart as SVG..."), "", QKeySequence(), tr("The memory chart as vector graphics"),
               dialog(Kind::ChartSvg));
}

void MainWindow::buildEditActions() {
  QAction* undo = document_->undoStack()->createUndoAction(this, tr("&Undo"));
  undo->setIcon(QIcon(QStringLiteral(":/icons/undo.svg")));
  undo->setShortcut(QKeySequence::Undo);
  actions_.insert(QStringLiteral("undo"), undo);
  QAction* redo = document_->undoStack()->createRedoAction(this, tr("&Redo"));
  redo->setIcon(QIcon(QStringLiteral(":/icons/redo.svg")));
  redo->setShortcut(QKeySequence::Redo);
  actions_.insert(QStringLiteral("redo"), redo);
  defineAction("addLayer", tr("&Add layer"), ":/icons/add.svg", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_N),
               tr("Insert a layer after the selected one"), [this]() { layerPanel_->addLayer(); });
  defineAction("removeLayer", tr("&Remove layer"), ":/icons/remove.svg", QKeySequence(),
               tr("Remove the selected layer"), [this]() { layerPanel_->removeLayer(); });
  defineAction("moveUp", tr("Move layer &up"), ":/icons/up.svg", QKeySequence(Qt::ALT | Qt::Key_Up),
               tr("Move the selected layer up"), [this]() { layerPanel_->moveLayer(-1); });
  defineAction("moveDown", tr("Move layer &down"), ":/icons/down.svg", QKeySequence(Qt::ALT | Qt::Key_Down),
               tr("Move the selected layer down"), [this]() { layerPanel_->moveLayer(1); });
  defineAction("clearCheckpoints", tr("&Clear checkpoints"), "", QKeySequence(), tr("Store every activation"),
               [this]() { (void)report(document_->applyPlan(Plan{}, QStringLiteral("none"))); });
}

void MainWindow::buildPlanActions() {
  defineAction("plan", tr("&Plan"), ":/icons/plan.svg", QKeySequence(Qt::CTRL | Qt::Key_P),
               tr("Run the chosen planner in the background and apply its plan"),
               [this]() { plans_->runPlanner(plannerPicker_->plannerName()); });
  defineAction("compare", tr("&Compare planners"), ":/icons/compare.svg", QKeySequence(Qt::CTRL | Qt::Key_K),
               tr("Show two planners side by side"), [this]() { tabs_->setCurrentWidget(compareView_); });
  defineAction("tradeoff", tr("&Trade-off"), "", QKeySequence(Qt::CTRL | Qt::Key_T),
               tr("The least recompute for every peak, and the planners against it"),
               [this]() { tabs_->setCurrentWidget(tradeoffView_); });
  defineAction("clearMeasured", tr("Clear &measured overlay"), "", QKeySequence(), tr("Hide the measured timeline"),
               [this]() { document_->setMeasured(std::nullopt); });
}

void MainWindow::buildHelpActions() {
  defineAction("about", tr("&About Remat Explorer"), ":/icons/app.svg", QKeySequence(), tr("About"),
               [this]() { QMessageBox::about(this, tr("About Remat Explorer"), aboutHtml()); });
}

void MainWindow::buildRunActions() {
  defineAction("runCpu", tr("Measure on &CPU"), ":/icons/run.svg", QKeySequence(Qt::CTRL | Qt::Key_R),
               tr("Run the plan on the CPU (oneDNN, every core) and overlay the measured memory"),
               [this]() { measuring_->measure(ui::toQString(kCpuDeviceName)); });
  defineAction("runGpu", tr("Measure on &GPU"), ":/icons/gpu.svg", QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R),
               tr("Run the plan on the GPU and overlay the measured memory"),
               [this]() { measuring_->measure(ui::toQString(kGpuDeviceName)); });
  defineAction("cancel", tr("Cancel &job"), ":/icons/stop.svg", QKeySequence(Qt::Key_Escape),
               tr("Cancel the running jobs"), [this]() {
                 jobs_->cancelAll();
                 statusText_->setText(tr("Cancelled"));
               });
  // Shown when the GPU module file is there; whether a GPU answers is found out when it is used
  // (opening the window loads no CUDA).
  actions_["runGpu"]->setVisible(measureDevices().contains(ui::toQString(kGpuDeviceName)));
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(actions_["new"]);
  file->addAction(actions_["open"]);
  files_->setRecentMenu(file->addMenu(tr("Open &recent")));
  QMenu* examples = file->addMenu(tr("Open e&xample"));
  examples->addAction(tr("Small CNN (editable)"), this,
                      [this]() { files_->openChainAfterAsking(QStringLiteral(":/examples/small_cnn.json")); });
  examples->addAction(tr("Abstract toy chain"), this,
                      [this]() { files_->openChainAfterAsking(QStringLiteral(":/examples/toy_abstract.json")); });
  file->addAction(actions_["save"]);
  file->addAction(actions_["saveAs"]);
  file->addSeparator();
  file->addAction(actions_["openTimeline"]);
  file->addAction(actions_["openPlan"]);
  QMenu* exports = file->addMenu(QIcon(QStringLiteral(":/icons/export.svg")), tr("&Export"));
  for (const char* key : {"exportPredicted", "exportMeasured", "exportPlan", "exportPng", "exportSvg"})
    exports->addAction(actions_[key]);
  file->addSeparator();
  file->addAction(actions_["quit"]);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  for (const char* key : {"undo", "redo"}) edit->addAction(actions_[key]);
  edit->addSeparator();
  for (const char* key : {"addLayer", "removeLayer", "moveUp", "moveDown"}) edit->addAction(actions_[key]);
  edit->addSeparator();
  edit->addAction(actions_["clearCheckpoints"]);

  QMenu* plan = menuBar()->addMenu(tr("&Plan"));
  for (const char* key : {"plan", "compare", "tradeoff", "clearMeasured"}) plan->addAction(actions_[key]);
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  for (const char* key : {"runCpu", "runGpu", "cancel"}) run->addAction(actions_[key]);
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(actions_["about"]);
}

void MainWindow::buildStatusBar() {
  statusText_ = new QLabel(this);
  statusText_->setObjectName(QStringLiteral("statusText"));
  progress_ = new QProgressBar(this);
  progress_->setObjectName(QStringLiteral("jobProgress"));
  progress_->setMaximumWidth(180);
  progress_->setFormat(QStringLiteral("%p%"));
  progress_->hide();
  // A labelled button: a measured run stops after the op in flight and gives its memory back.
  cancelButton_ = new QToolButton(this);
  cancelButton_->setObjectName(QStringLiteral("cancelJob"));
  QAction* cancel = actions_["cancel"];
  cancel->setIconText(tr("Cancel"));  // what the button shows beside its icon
  cancel->setToolTip(
      tr("Stop the running job (Esc). A measurement stops after the op in flight and frees its memory."));
  cancelButton_->setDefaultAction(cancel);
  cancelButton_->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  cancelButton_->setAutoRaise(true);
  cancelButton_->hide();
  statusBar()->addWidget(statusText_, 1);
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancelButton_);
  connectJobs();
}

// The status bar follows the jobs: their labels and progress, a bar and a Cancel button while busy.
void MainWindow::connectJobs() {
  connect(jobs_, &JobRunner::started, this, [this](JobChannel, const QString& label) {
    lastProgressText_ = label + QStringLiteral("...");
    statusText_->setText(lastProgressText_);
    progress_->setRange(0, 0);  // busy until the job reports a fraction
  });
  connect(jobs_, &JobRunner::progress, this, [this](JobChannel, double fraction, const QString& text) {
    if (fraction < 0.0) {
      progress_->setRange(0, 0);
    } else {
      progress_->setRange(0, 1000);
      progress_->setValue(static_cast<int>(fraction * 1000.0));
    }
    if (text.isEmpty()) return;
    statusText_->setText(text);
    progress_->setToolTip(text);
    lastProgressText_ = text;
  });
  // A job's own result message replaces its progress text; one without shows that it is done.
  connect(jobs_, &JobRunner::finished, this, [this](JobChannel channel, bool delivered) {
    if (!lastProgressText_.isEmpty() && statusText_->text() == lastProgressText_)
      statusText_->setText(delivered ? tr("%1: done").arg(jobs_->label(channel))
                                     : tr("Cancelled the %1 job").arg(jobChannelName(channel)));
    lastProgressText_.clear();
  });
  connect(jobs_, &JobRunner::busyChanged, this, [this](bool busy) {
    progress_->setVisible(busy);
    cancelButton_->setVisible(busy);
    actions_["cancel"]->setEnabled(busy);
  });
  actions_["cancel"]->setEnabled(false);
}

void MainWindow::updateTitle() {
  QString name = tr("no chain");
  if (document_->hasChain()) {
    name = document_->filePath().isEmpty() ? QString::fromStdString(document_->chain().name)
                                           : QFileInfo(document_->filePath()).fileName();
  }
  setWindowTitle(tr("%1[*] - Remat Explorer").arg(name));
  setWindowModified(document_->hasChain() && !document_->undoStack()->isClean());
}

void MainWindow::updateActions() {
  const bool chain = document_->hasChain();
  for (const char* key :
       {"save", "saveAs", "exportPredicted", "exportPlan", "exportPng", "exportSvg", "removeLayer", "moveUp",
        "moveDown", "clearCheckpoints", "plan", "runCpu", "runGpu", "openTimeline", "openPlan"})
    actions_[key]->setEnabled(chain);
  actions_["addLayer"]->setEnabled(true);  // without a chain it starts one
  // Only a measurement of the plan shown goes next to its prediction.
  actions_["exportMeasured"]->setEnabled(chain && document_->measuredIsCurrent());
  actions_["clearMeasured"]->setEnabled(chain && document_->measured().has_value());
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) {
    for (const QUrl& url : event->mimeData()->urls()) {
      if (url.isLocalFile()) return event->acceptProposedAction();
    }
  }
}

void MainWindow::dropEvent(QDropEvent* event) {
  for (const QUrl& url : event->mimeData()->urls()) {
    if (!url.isLocalFile()) continue;
    files_->openDroppedFile(url.toLocalFile());
    event->acceptProposedAction();
    return;
  }
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (!files_->maySaveChanges()) return event->ignore();  // Cancel: the window stays, edits and all
  jobs_->cancelAll();
  QSettings().setValue(QStringLiteral("geometry"), saveGeometry());
  QMainWindow::closeEvent(event);
}

Status MainWindow::report(const Status& status, const QString& success) {
  if (!status) {
    if (status.code() == ErrorCode::Cancelled) {
      statusText_->setText(tr("Cancelled"));
    } else {
      showError(QString::fromStdString(status.message()));
    }
  } else if (!success.isEmpty()) {
    statusText_->setText(success);
  }
  return status;
}

void MainWindow::setStatusText(const QString& text) { statusText_->setText(text); }

void MainWindow::showError(const QString& text) {
  messageBar_->showError(text);
  statusText_->setText(text);
}

void MainWindow::showInfo(const QString& text) {
  messageBar_->showInfo(text);
  statusText_->setText(text);
}

}  // namespace remat::gui
