#pragma once
// The explorer's main window: a chain (file, zoo or edited in the layer table), its plan on the
// checkpoint strip and memory chart, a comparison of two planners, and measured runs. Long work
// runs on the JobRunner; errors go to the message bar and the status bar, never a crash. The window
// builds the widgets, actions, menus and toolbars; what the actions do belongs to its controllers:
// files (file_controller), planning (plan_controller), measuring (measure_controller) and exports
// (export_controller).
#include <QMainWindow>
#include <functional>
#include <optional>

#include "remat/base/status.hpp"
#include "window/prompts.hpp"

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
class ExportController;
class FileController;
class ImportBar;
class JobRunner;
class LayerPanel;
class MeasureController;
class MessageBar;
class PlanController;
class PlannerPicker;
class PlanView;
class StepBar;
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
  ZooBar* zooBar() const { return zooBar_; }
  // An imported transformer's dimension fields (`sequence`) and attention rule, after the ONNX
  // batch field; shown while an ONNX model is open (or just failed to open).
  ImportBar* importBar() const { return importBar_; }
  void showImportBar(bool shown);
  StepBar* stepBar() const { return stepBar_; }

  // What the menus do, callable directly (tests, the command line). Errors are also shown.
  FileController* files() const { return files_; }
  PlanController* plans() const { return plans_; }
  MeasureController* measuring() const { return measuring_; }
  ExportController* exports() const { return exports_; }
  // The questions the window asks (save where, save changes, a batch size): tests replace them.
  Prompts& prompts() { return prompts_; }

  // How the controllers speak: an error in the message bar and the status line, a success text in
  // the status line; the status itself is returned.
  Status report(const Status& status, const QString& success = {});
  void showError(const QString& text);
  void showInfo(const QString& text);
  void setStatusText(const QString& text);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void buildCentralWidget();
  void connectViews();
  // Actions by key (actions_), grouped by the menu they belong to.
  QAction* defineAction(const QString& key, const QString& text, const QString& icon, const QKeySequence& shortcut,
                        const QString& tip, std::function<void()> slot);
  void buildActions();
  void buildFileActions();
  void buildExportActions();
  void buildEditActions();
  void buildPlanActions();
  void buildRunActions();
  void buildHelpActions();
  void buildMenus();
  void buildToolBars();  // main_window_toolbars.cpp
  void fitToolBarRows();
  void buildOnnxBatchField(QToolBar* bar);
  void buildStepBar(QToolBar* bar);  // and its link to the document
  void buildStatusBar();
  void connectJobs();
  void updateTitle();
  void updateActions();

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
  QToolBar* onnxToolBar_ = nullptr;  // the ONNX batch and the import bar
  QToolBar* stepToolBar_ = nullptr;
  QSpinBox* onnxBatch_;
  ImportBar* importBar_ = nullptr;
  QAction* importBarAction_ = nullptr;  // the import bar's place in its toolbar (hidden without a model)
  StepBar* stepBar_ = nullptr;
  PlannerPicker* plannerPicker_;
  QLabel* statusText_;
  QProgressBar* progress_;
  QToolButton* cancelButton_;
  QString lastProgressText_;
  QHash<QString, QAction*> actions_;
  FileController* files_;
  PlanController* plans_;
  MeasureController* measuring_;
  ExportController* exports_;
  Prompts prompts_ = Prompts::dialogs();
  bool geometryRestored_ = false;
  int shownUndoIndex_ = 0;  // the undo stack's index the status text last spoke of
};

}  // namespace remat::gui
