#include "window/file_controller.hpp"

#include <QFile>
#include <QFileInfo>
#include <QMenu>
#include <QSettings>
#include <QSignalBlocker>
#include <QSpinBox>
#include <algorithm>

#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/timeline_files.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/input/input_file.hpp"
#include "remat/input/json_document.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/input/plan_file.hpp"
#include "remat/model/precision.hpp"
#include "remat/report/snapshot.hpp"
#include "remat/usecases/chain_source.hpp"
#include "views/import_bar.hpp"
#include "views/zoo_bar.hpp"
#include "window/main_window.hpp"
#include "window/plan_controller.hpp"

namespace remat::gui {
namespace {

constexpr int kMaxRecentFiles = 8;
const QString kRecentKey = QStringLiteral("recentFiles");

const QString kChainFilter =
    QObject::tr("Chains and ONNX models (*.json *.onnx);;Chain files (*.json);;ONNX models (*.onnx);;All files (*)");
const QString kSaveChainFilter = QObject::tr("Chain files (*.json);;All files (*)");

bool isBuiltIn(const QString& path) { return path.startsWith(QLatin1Char(':')); }

bool isOnnxModel(const QString& path) {
  return !isBuiltIn(path) && chainSourceKind(path.toStdString()) == ChainSourceKind::OnnxModel;
}

// A chain file or an ONNX model at the tool bar's sizes, through the use case the command line
// uses; a built-in example from the resources. Safe on a worker thread (core only).
Result<Chain> openChainPath(const QString& path, const ChainSourceOptions& options) {
  if (isBuiltIn(path)) {
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) return Status::io("cannot read '" + path.toStdString() + "'");
    return parseChain(file.readAll().toStdString(), path.toStdString());
  }
  const bool onnx = isOnnxModel(path);
  Result<Chain> chain = openChainSource(path.toStdString(), onnx ? options : ChainSourceOptions{});
  if (chain || !onnx) return chain;
  // The importer names the option; the explorer's field for it is in the tool bar.
  const std::string& message = chain.status().message();
  if (options.batch == 0 && (message.find("the batch dimension is symbolic") != std::string::npos ||
                             message.find("give its size with --batch N") != std::string::npos))
    return Status(chain.status().code(), message + " (the 'ONNX batch' field in the tool bar sets the batch)");
  for (const auto& [name, size] : options.dims)
    if (message.find("--dim " + name + "=N") != std::string::npos)
      return Status(chain.status().code(), message + " (the '" + name + "' field in the tool bar sets it)");
  return chain;
}

bool hasAttentionRule(const Chain& chain) {
  return std::any_of(chain.spec.layers.begin(), chain.spec.layers.end(),
                     [](const LayerSpec& layer) { return layer.kind == LayerKind::TransformerBlock; });
}

// A small convolutional chain to start editing from.
ChainSpec starterSpec() {
  ChainSpec spec;
  spec.name = "new_chain";
  spec.input.shape = {32, 3, 64, 64};
  auto layer = [](std::string name, LayerKind kind, std::int64_t channels = 0) {
    LayerSpec l;
    l.name = std::move(name);
    l.kind = kind;
    if (kind == LayerKind::Conv2d) {
      l.outChannels = channels;
      l.kernel = 3;
      l.padding = 1;
    } else if (kind == LayerKind::MaxPool) {
      l.kernel = 2;
      l.stride = 2;
    } else if (kind == LayerKind::Linear) {
      l.outFeatures = channels;
    }
    return l;
  };
  spec.layers = {layer("conv1", LayerKind::Conv2d, 32), layer("relu1", LayerKind::Relu),
                 layer("pool1", LayerKind::MaxPool),    layer("conv2", LayerKind::Conv2d, 64),
                 layer("relu2", LayerKind::Relu),       layer("pool2", LayerKind::MaxPool),
                 layer("flatten", LayerKind::Flatten),  layer("fc", LayerKind::Linear, 10)};
  return spec;
}

// Whether a JSON file is a chain file: it says so, or says no format at all. Read as strictly as the
// readers do: a hostile file must not get further here than there.
bool looksLikeChainFile(const QString& path) {
  auto text = readInputFile(path.toStdString(), kMaxTimelineFileBytes, "file");
  if (!text) return true;                      // the chain reader says what is wrong with it
  if (looksLikeSnapshot(*text)) return false;  // a PyTorch memory snapshot: JSON without a format, or a pickle
  auto document = JsonDocument::parse(std::move(text).value(), path.toStdString(), 8);
  if (!document || !document->root().is_object()) return true;
  const auto format = document->root().find("format");
  return format == document->root().end() || *format == kChainFormat;
}

}  // namespace

FileController::FileController(MainWindow* window) : WindowController(window) {}

void FileController::opened(const QString& onnxPath, const QString& message) {
  onnxPath_ = onnxPath;
  window_->showImportBar(!onnxPath.isEmpty());
  window_->plans()->forgetPlanningTime();
  window_->showInfo(message);
  window_->plans()->planOpenedChain();
}

ChainSourceOptions FileController::importOptions() const {
  const ImportBar* bar = window_->importBar();
  return ChainSourceOptions{
      .batch = window_->onnxBatch()->value(), .fusedAttention = bar->fusedAttention(), .dims = bar->dimensions()};
}

// A model other than the one the fields belong to: its own dimensions, keeping the sizes of the
// names it shares with the fields (two exports of one model, or the command line's --dim).
void FileController::prepareImportBar(const QString& path) {
  if (path == importBarPath_) return;
  importBarPath_ = path;
  QHash<QString, std::int64_t> sizes;
  for (const auto& [name, size] : window_->importBar()->dimensions()) sizes.insert(QString::fromStdString(name), size);
  QStringList names;
  if (auto listed = onnxSymbolicDimensions(path.toStdString()))
    for (const std::string& name : *listed) names << QString::fromStdString(name);
  window_->importBar()->setDimensions(names, sizes);
  window_->showImportBar(true);
}

Status FileController::openChainFile(const QString& path) {
  window_->jobs()->cancel(JobChannel::Import);  // an import in flight would replace this chain
  const bool onnx = isOnnxModel(path);
  if (onnx) prepareImportBar(path);
  return accept(path, openChainPath(path, importOptions()));
}

Status FileController::accept(const QString& path, Result<Chain> chain) {
  const bool onnx = isOnnxModel(path);
  failedOnnxPath_ = onnx && !chain ? path : QString();
  if (!chain) return window_->report(chain.status());
  const QString name = QString::fromStdString(chain->name);
  // An imported model has no chain file yet: Save asks where to write one.
  Document* document = window_->document();
  document->resetChain(std::move(chain).value(), onnx || isBuiltIn(path) ? QString() : path);
  addRecentFile(path);
  const Chain& shown = document->chain();
  if (onnx) {
    window_->importBar()->setAttentionEnabled(
        hasAttentionRule(shown), tr("%1 has no attention layer (transformer_block): the rule applies to transformers")
                                     .arg(QFileInfo(path).fileName()));
  }
  opened(onnx ? path : QString(), onnx ? tr("Imported %1: %2 layers, input %3")
                                             .arg(name)
                                             .arg(shown.size())
                                             .arg(QString::fromStdString(shapeToString(shown.inputShape)))
                                       : tr("Opened %1 (%2 layers)").arg(name).arg(shown.size()));
  return Status::ok();
}

void FileController::importFieldsChanged() {
  // The model that just failed to open, else the one shown: import it again at the new sizes.
  const QString path = failedOnnxPath_.isEmpty() ? onnxPath_ : failedOnnxPath_;
  if (path.isEmpty() || path != importBarPath_) return;
  if (!window_->document()->undoStack()->isClean()) {
    window_->showInfo(tr("The new sizes apply when %1 is opened again (the chain has edits)").arg(path));
    return;
  }
  const ChainSourceOptions options = importOptions();
  QStringList sizes;
  for (const auto& [name, size] : options.dims)
    sizes << QStringLiteral("%1=%2").arg(QString::fromStdString(name)).arg(size);
  sizes << (options.fusedAttention.value_or(true) ? tr("fused attention") : tr("math attention"));
  // On the Import channel: a newer change drops this result (stale), so typing 2048 digit by digit
  // shows 2048's chain, never 204's.
  window_->jobs()->start<Result<Chain>>(
      JobChannel::Import, tr("Importing %1 (%2)").arg(QFileInfo(path).fileName(), sizes.join(QStringLiteral(", "))),
      [path, options](const JobRunner::Control&) { return openChainPath(path, options); },
      [this, path](Result<Chain> chain) {
        if (!window_->document()->undoStack()->isClean() && chain) {
          window_->showInfo(tr("The import of %1 was not applied: the chain has edits since").arg(path));
          return;
        }
        (void)accept(path, std::move(chain));
      });
}

Status FileController::loadZoo(const QString& name, const ZooOptions& options) {
  window_->jobs()->cancel(JobChannel::Import);  // an import in flight would replace this chain
  Result<Chain> built = openZooChain(name.toStdString(), options);
  if (!built) return window_->report(built.status());
  // A zoo model has no dtype of its own: the step bar's precision, pure or mixed, decides it.
  Result<Chain> chain = withStepOptions(std::move(built).value(), window_->document()->stepOptions());
  if (!chain) return window_->report(chain.status());
  window_->document()->resetChain(std::move(chain).value(), QString());
  window_->zooBar()->setModelName(name);
  window_->zooBar()->setOptions(options);
  const Chain& shown = window_->document()->chain();
  const bool tokens = shown.inputShape.size() == 2;  // token ids [batch, sequence]
  opened(QString(), tr("Loaded %1: batch %2, %3, %4 layers")
                        .arg(name)
                        .arg(options.batch)
                        .arg(tokens ? tr("%1 tokens").arg(shown.inputShape[1]) : tr("%1 px").arg(options.resolution))
                        .arg(shown.size()));
  return Status::ok();
}

Status FileController::newChain() {
  window_->jobs()->cancel(JobChannel::Import);
  Result<Chain> chain = buildChain(starterSpec());
  if (!chain) return window_->report(chain.status());
  window_->document()->resetChain(std::move(chain).value(), QString());
  opened(QString(), tr("A new chain: edit it in the layer table (double-click a cell)"));
  return Status::ok();
}

Status FileController::saveChain(const QString& path) {
  Document* document = window_->document();
  if (!document->hasChain()) return window_->report(Status::invalid("no chain to save"));
  REMAT_RETURN_IF_ERROR(window_->report(saveChainFile(document->chain().spec, path.toStdString())));
  document->setFilePath(path);
  document->undoStack()->setClean();
  addRecentFile(path);
  window_->setStatusText(tr("Saved %1").arg(path));
  return Status::ok();
}

Status FileController::openMeasuredTimeline(const QString& path) {
  Document* document = window_->document();
  if (!document->hasChain()) return window_->report(Status::invalid("open a chain before its measured timeline"));
  Result<Timeline> timeline = readTimelineFile(path);
  if (!timeline) return window_->report(timeline.status());
  // A file says which planner it ran but not the checkpoints: it belongs to the plan shown when it
  // has that plan's ops, and is stale (another plan or chain) otherwise.
  const auto& predicted = document->simulation().timeline.entries;
  const bool samePlan =
      std::equal(predicted.begin(), predicted.end(), timeline->entries.begin(), timeline->entries.end(),
                 [](const TimelineEntry& a, const TimelineEntry& b) { return a.op == b.op; });
  const std::size_t measuredOps = timeline->entries.size();
  const QString planner = QString::fromStdString(timeline->planner);
  if (samePlan) {
    document->setMeasured(std::move(timeline).value());
    window_->showInfo(tr("Opened the measured timeline %1").arg(QFileInfo(path).fileName()));
    return Status::ok();
  }
  document->setMeasured(std::move(timeline).value(), MeasuredOrigin{std::nullopt, planner, document->chainRevision()});
  window_->showInfo(tr("Opened %1: its %2 ops are not the %3 ops of the plan shown (a different plan or chain?); "
                       "drawn grey as stale, and not exported with this plan")
                        .arg(QFileInfo(path).fileName())
                        .arg(measuredOps)
                        .arg(predicted.size()));
  return Status::ok();
}

Status FileController::openPlan(const QString& path) {
  Document* document = window_->document();
  if (!document->hasChain()) return window_->report(Status::invalid("open a chain before a plan for it"));
  Result<PlanFile> file = readPlanFile(path.toStdString());
  if (!file) return window_->report(file.status());
  Result<PlacedPlan> placed = placePlan(*file, document->chain());
  if (!placed) return window_->report(placed.status());
  const QString planner = file->planner.empty() ? QStringLiteral("plan file") : QString::fromStdString(file->planner);
  const std::size_t count = placed->checkpoints.size();
  REMAT_RETURN_IF_ERROR(window_->report(document->applyPlan(Plan{std::move(placed->checkpoints)}, planner)));
  window_->showInfo(tr("Opened the plan %1: %2 checkpoints, placed by the layers' %3")
                        .arg(QFileInfo(path).fileName())
                        .arg(count)
                        .arg(placed->byNames ? tr("names") : tr("numbers")));
  return Status::ok();
}

void FileController::openDroppedFile(const QString& path) {
  const QString lower = path.toLower();
  const bool timeline = lower.endsWith(QLatin1String(".csv")) || lower.endsWith(QLatin1String(".pickle")) ||
                        lower.endsWith(QLatin1String(".pkl"));
  const bool chain = isOnnxModel(path) || (!timeline && looksLikeChainFile(path));
  if (chain) {
    openChainAfterAsking(path);
  } else {
    (void)openMeasuredTimeline(path);
  }
}

void FileController::onnxBatchChanged() {
  // The model that just failed to open (for want of a batch, say), else the one shown: open it again.
  const QString path = failedOnnxPath_.isEmpty() ? onnxPath_ : failedOnnxPath_;
  if (path.isEmpty()) return;
  if (!window_->document()->undoStack()->isClean()) {
    window_->showInfo(tr("The new batch applies when %1 is opened again (the chain has edits)").arg(path));
    return;
  }
  (void)openChainFile(path);
}

Status FileController::openChainAskingForBatch(const QString& path) {
  Status opened = openChainFile(path);
  // Core's importer says which size it wants: the batch, then each other symbolic dimension.
  for (int asked = 0; !opened && isOnnxModel(path) && asked <= window_->importBar()->dimensionNames().size(); ++asked) {
    const std::string& message = opened.message();
    QSpinBox* field = nullptr;
    QString what;
    // A CNN's importer and a transformer's word it differently.
    const bool wantsBatch = message.find("the batch dimension is symbolic") != std::string::npos ||
                            message.find("give its size with --batch N") != std::string::npos;
    if (window_->onnxBatch()->value() == 0 && wantsBatch) {
      field = window_->onnxBatch();
      what = tr("a symbolic batch dimension.\nImport it at batch:");
    }
    for (const QString& name : window_->importBar()->dimensionNames())
      if (!field && message.find(("--dim " + name + "=N").toStdString()) != std::string::npos) {
        field = window_->importBar()->field(name);
        what = tr("a symbolic dimension '%1' (for token ids [batch, sequence], the sequence length).\nImport it at %1:")
                   .arg(name);
      }
    if (!field) return opened;
    const std::optional<int> size =
        window_->prompts().askInt(window_, field == window_->onnxBatch() ? tr("Batch size") : tr("Dimension size"),
                                  tr("%1 has %2").arg(QFileInfo(path).fileName(), what), 1);
    if (!size) return opened;
    {
      const QSignalBlocker blocker(field);  // one import, not two
      field->setValue(*size);
    }
    opened = openChainFile(path);
  }
  return opened;
}

bool FileController::maySaveChanges() {
  Document* document = window_->document();
  if (!document->hasChain() || document->undoStack()->isClean()) return true;
  const QString name = QString::fromStdString(document->chain().name);
  switch (window_->prompts().saveChanges(window_, tr("The chain '%1' has unsaved edits.").arg(name))) {
    case SaveChangesAnswer::Discard: return true;
    case SaveChangesAnswer::Cancel: return false;
    case SaveChangesAnswer::Save: break;
  }
  saveDialog();
  return window_->document()->undoStack()->isClean();  // not saved (cancelled, an error): stay
}

void FileController::openChainAfterAsking(const QString& path) {
  if (maySaveChanges()) (void)openChainAskingForBatch(path);
}

void FileController::openDialog() {
  if (!maySaveChanges()) return;
  const QString path = window_->prompts().openFile(window_, tr("Open chain or ONNX model"), kChainFilter);
  if (!path.isEmpty()) (void)openChainAskingForBatch(path);
}

void FileController::saveDialog() {
  if (window_->document()->filePath().isEmpty()) return saveAsDialog();
  (void)saveChain(window_->document()->filePath());
}

void FileController::saveAsDialog() {
  const Document* document = window_->document();
  if (!document->hasChain()) return;
  const QString suggested = document->filePath().isEmpty()
                                ? QString::fromStdString(document->chain().name) + QStringLiteral(".json")
                                : document->filePath();
  const SaveTarget target = window_->prompts().saveFile(window_, tr("Save chain"), suggested, kSaveChainFilter,
                                                        kSaveChainFilter.section(";;", 0, 0));
  if (!target.path.isEmpty()) (void)saveChain(target.path);
}

void FileController::openTimelineDialog() {
  const QString path = window_->prompts().openFile(window_, tr("Open measured timeline"), timelineOpenFilter());
  if (!path.isEmpty()) (void)openMeasuredTimeline(path);
}

void FileController::openPlanDialog() {
  if (!window_->document()->hasChain()) return;
  const QString path = window_->prompts().openFile(window_, tr("Open plan"), tr("Plans (*.json);;All files (*)"));
  if (!path.isEmpty()) (void)openPlan(path);
}

QStringList FileController::recentFiles() const { return QSettings().value(kRecentKey).toStringList(); }

void FileController::setRecentMenu(QMenu* menu) {
  recentMenu_ = menu;
  rebuildRecentMenu();
}

void FileController::addRecentFile(const QString& path) {
  if (isBuiltIn(path)) return;  // built-in examples are not recent files
  QStringList files = recentFiles();
  const QString absolute = QFileInfo(path).absoluteFilePath();
  files.removeAll(absolute);
  files.prepend(absolute);
  while (files.size() > kMaxRecentFiles) files.removeLast();
  QSettings().setValue(kRecentKey, files);
  rebuildRecentMenu();
}

void FileController::rebuildRecentMenu() {
  if (!recentMenu_) return;
  recentMenu_->clear();
  const QStringList files = recentFiles();
  for (const QString& file : files) {
    recentMenu_->addAction(QFileInfo(file).fileName(), this, [this, file]() { openChainAfterAsking(file); })
        ->setToolTip(file);
  }
  if (files.isEmpty()) recentMenu_->addAction(tr("(none)"))->setEnabled(false);
  recentMenu_->addSeparator();
  recentMenu_->addAction(tr("Clear list"), this, [this]() {
    QSettings().remove(kRecentKey);
    rebuildRecentMenu();
  });
}

}  // namespace remat::gui
