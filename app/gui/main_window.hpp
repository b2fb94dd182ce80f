#pragma once
// The explorer's main window: a chain (file, zoo or edited in the layer table), its plan on the
// checkpoint strip and memory chart, a comparison of two planners, and measured runs. Long work
// runs on the JobRunner; errors go to the message bar and the status bar, never a crash.
#include <QMainWindow>
#include <functional>
#include <optional>

#include "remat/base/status.hpp"
#include "remat/io/atomic_file.hpp"
#include "remat/model/zoo.hpp"

class QAction;
class QKeySequence;
class QLabel;
class QMenu;
class QProgressBar;
class QTabWidget;
class QToolButton;

namespace remat::gui {

class CompareView;
class Document;
class JobRunner;
class LayerPanel;
class MessageBar;
class PlannerPicker;
class PlanView;
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
  LayerPanel* layerPanel() const { return layerPanel_; }
  MessageBar* messageBar() const { return messageBar_; }
  PlannerPicker* plannerPicker() const { return plannerPicker_; }
  QTabWidget* tabs() const { return tabs_; }

  // What the menus do, callable directly (tests, the command line). Errors are also shown.
  Status openChainFile(const QString& path);
  Status loadZoo(const QString& name, const ZooOptions& options);
  Status newChain();
  Status saveChain(const QString& path);
  Status openMeasuredTimeline(const QString& path);
  void runPlanner(const QString& name);  // background; the result is applied as an undoable edit
  void measure(const QString& device);   // background; the result overlays the prediction
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

 private:
  void buildCentralWidget();
  void connectViews();
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
  void buildToolBars();
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
  ZooBar* zooBar_;
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
};

}  // namespace remat::gui
