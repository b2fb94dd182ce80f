#pragma once
// The main window's files: open a chain source (chain file, ONNX model, built-in example, zoo
// model, a new chain), save it, open a measured timeline, drops, the recent files, the ONNX
// batch field's re-import and the import bar's (an imported transformer's sizes and attention rule,
// re-imported in the background on JobChannel::Import). Chains come through the use case (usecases/chain_source.hpp).
#include <QString>
#include <QStringList>

#include "remat/base/status.hpp"
#include "remat/model/zoo.hpp"
#include "remat/usecases/chain_source.hpp"
#include "window/controller.hpp"

class QMenu;

namespace remat::gui {

class FileController : public WindowController {
 public:
  explicit FileController(MainWindow* window);

  // Chain files and ONNX models (imported at the ONNX batch field's batch); ":/..." a built-in example.
  Status openChainFile(const QString& path);
  Status loadZoo(const QString& name, const ZooOptions& options);
  Status newChain();
  Status saveChain(const QString& path);
  Status openMeasuredTimeline(const QString& path);
  // A plan file (remat/input/plan_file.hpp) applied to the chain shown (undoable): by its layers'
  // names when they match, else by numbers; the reader's placed message otherwise.
  Status openPlan(const QString& path);
  // A dropped file: an ONNX model or a chain file opens as a chain, anything else as a timeline.
  void openDroppedFile(const QString& path);
  QStringList recentFiles() const;
  // The ONNX batch field changed: re-import the ONNX model shown, unless it has edits.
  void onnxBatchChanged();
  // A dimension field or the attention box of the import bar changed: import the model again in the
  // background (JobChannel::Import; a newer change drops an older result), unless it has edits. A
  // size the importer refuses leaves the chain shown and its placed message in the message bar.
  void importFieldsChanged();

  // Before a chain with unsaved edits is replaced or the window closes: Save (to its file, or where
  // the save dialog says), Discard or Cancel, through the window's prompts. True: go on.
  bool maySaveChanges();
  // The menus' Open: asks to save edits first, and for a batch when an ONNX model has a symbolic one.
  void openChainAfterAsking(const QString& path);
  // openChainFile, and when an ONNX model fails for want of a batch, asks for one (the window's
  // prompts), sets the ONNX batch field to it and opens the model again.
  Status openChainAskingForBatch(const QString& path);

  void openDialog();
  void saveDialog();  // Save: to the chain's file, or ask where
  void saveAsDialog();
  void openTimelineDialog();
  void openPlanDialog();
  void setRecentMenu(QMenu* menu);

 private:
  // The document holds a new chain: say so, remember where it came from, plan it.
  void opened(const QString& onnxPath, const QString& message);
  // An opened or imported chain (or why not) for `path`: shown, or its error reported.
  Status accept(const QString& path, Result<Chain> chain);
  ChainSourceOptions importOptions() const;  // the ONNX batch field and the import bar
  void prepareImportBar(const QString& path);
  void addRecentFile(const QString& path);
  void rebuildRecentMenu();

  QString onnxPath_;        // the ONNX model the document was imported from, while it is
  QString failedOnnxPath_;  // the ONNX model whose last open failed: the batch field retries it
  QString importBarPath_;   // the ONNX model whose dimensions the import bar shows
  QMenu* recentMenu_ = nullptr;
};

}  // namespace remat::gui
