#pragma once
// The explorer's main window: a chain (file, zoo or edited in the layer table), its plan on the
// checkpoint strip and memory chart, a comparison of two planners, and measured runs. Long work
// runs on the JobRunner; errors go to the message bar and the status bar, never a crash.
#include <QMainWindow>
#include <functional>
#include <optional>

#include "remat/base/status.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/model/zoo.hpp"

class QAction;
class QKeySequence;
class QLabel;
class QMenu;
class QProgressBar;
class QSpinBox;
class QTabWidget;
class QToolBar;
class QToolButton;

namespace remat::gui {

class CompareView;
class Document;
class JobRunner;
class LayerPanel;
struct Measurement;
struct MeasuredOrigin;
class MessageBar;
class PlannerPicker;
class PlanView;
class TradeoffView;
class ZooBar;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  Document* document() const { return document_; }
  JobRunner* jobs() const { return jobs_; }
  PlanView* planView() const { return planView_; }
  CompareView* compareView() const { return compareView_; }
  TradeoffView* tradeoffView() const { return tradeoffView_; }
  LayerPanel* layerPanel() const { return layerPanel_; }
  MessageBar* messageBar() const { return messageBar_; }
  PlannerPicker* plannerPicker() const { return plannerPicker_; }
  QTabWidget* tabs() const { return tabs_; }
  QAction* action(const QString& key) const { return actions_.value(key); }
  // The zoo bar sits on its own toolbar row when the window is too narrow for one row.
  bool toolBarsOnTwoRows() const;
  bool geometryRestored() const { return geometryRestored_; }  // the last session's size and place
  // The batch an opened ONNX model gets (0: as exported); changing it re-imports the model.
  QSpinBox* onnxBatch() const { return onnxBatch_; }

  // What the menus do, callable directly (tests, the command line). Errors are also shown.
  // openChainFile takes chain files and ONNX models (imported at the ONNX batch field's batch).
  Status openChainFile(const QString& path);
  Status loadZoo(const QString& name, const ZooOptions& options);
  Status newChain();
  Status saveChain(const QString& path);
  Status openMeasuredTimeline(const QString& path);
  void runPlanner(const QString& name);  // background; the result is applied as an undoable edit
  void measure(const QString& device);   // background; the result overlays the prediction
  void showMeasurement(const QString& device, const MeasuredOrigin& origin, Measurement measured);
  // The cheapest plan whose total peak fits in capacityBytes (the budget planner, in the
  // background, applied as an undoable edit); the plan view's capacity line follows.
  void fitCapacity(std::uint64_t capacityBytes);
  Status exportPredictedTimeline(const QString& path);
  Status exportMeasuredTimeline(const QString& path);  // predicted and measured, in one file
  Status exportPlanJson(const QString& path);
  Status exportChartPng(const QString& path);
  Status exportChartSvg(const QString& path);
  QStringList recentFiles() const;

  void showError(const QString& text);
  void showInfo(const QString& text);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void buildCentralWidget();
  void connectViews();
  void connectTradeoff();  // main_window_tradeoff.cpp
  // Actions by key (actions_), grouped by the menu they belong to.
  QAction* defineAction(const QString& key, const QString& text, const QString& icon, const QKeySequence& shortcut,
                        const QString& tip, std::function<void()> slot);
  void buildActions();
  void buildFileActions();
  void buildEditActions();
  void buildPlanActions();
  void buildRunActions();
  void buildHelpActions();
  void buildMenus();
  void buildToolBars();  // main_window_toolbars.cpp
  void fitToolBarRows();
  void buildOnnxBatchField(QToolBar* bar);
  void buildStatusBar();
  void updateTitle();
  void updateActions();
  void addRecentFile(const QString& path);
  void rebuildRecentMenu();
  void openFileFromDrop(const QString& path);
  Status report(const Status& status, const QString& success = {});
  // A chain was just opened: plan it with the picked planner (background, no undo step).
  void planOpenedChain();
  enum class PlanApply { Undoable, Opening };
  void startPlanJob(const QString& name, PlanApply apply);
  double planSecondsForCurrentPlan() const;
  // Exports never replace the chain file the document was read from.
  WriteOptions exportWriteOptions() const;
  // File dialogs behind the menu entries.
  void openDialog();
  void saveAsDialog();
  void openTimelineDialog();
  enum class ExportKind { PredictedTimeline, MeasuredTimeline, PlanJson, ChartPng, ChartSvg };
  void exportDialog(ExportKind kind);

  Document* document_;
  JobRunner* jobs_;
  MessageBar* messageBar_;
  QTabWidget* tabs_;
  LayerPanel* layerPanel_;
  PlanView* planView_;
  CompareView* compareView_;
  TradeoffView* tradeoffView_;
  ZooBar* zooBar_;
  QToolBar* mainToolBar_ = nullptr;
  QToolBar* zooToolBar_ = nullptr;
  QSpinBox* onnxBatch_;
  QString onnxPath_;  // the ONNX model the document was imported from, while it is
  PlannerPicker* plannerPicker_;
  QLabel* statusText_;
  QProgressBar* progress_;
  QToolButton* cancelButton_;
  QString lastProgressText_;
  QMenu* recentMenu_ = nullptr;
  QHash<QString, QAction*> actions_;
  // Planning time of the last planner result, while the document still holds its plan.
  struct LastPlanned {
    QString planner;
    std::vector<std::size_t> checkpoints;
    double planSeconds = 0.0;
  };
  std::optional<LastPlanned> lastPlanned_;
  bool geometryRestored_ = false;
  int shownUndoIndex_ = 0;  // the undo stack's index the status text last spoke of
};

}  // namespace remat::gui
