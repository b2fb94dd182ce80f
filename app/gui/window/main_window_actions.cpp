// MainWindow: what its menu entries do (files, zoo, planners, runs, exports).
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QSpinBox>
#include <QTabWidget>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "charts/memory_chart.hpp"
#include "common/units.hpp"
#include "document/document.hpp"
#include "document/job_runner.hpp"
#include "document/plan_export.hpp"
#include "document/plan_jobs.hpp"
#include "document/run_support.hpp"
#include "remat/devices/devices.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/input/input_file.hpp"
#include "remat/input/json_document.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/report/snapshot.hpp"
#include "views/message_bar.hpp"
#include "views/plan_view.hpp"
#include "views/planner_picker.hpp"
#include "views/zoo_bar.hpp"
#include "window/main_window.hpp"

namespace remat::gui {
namespace {

const QString kChainFilter =
    QObject::tr("Chains and ONNX models (*.json *.onnx);;Chain files (*.json);;ONNX models (*.onnx);;All files (*)");
const QString kSaveChainFilter = QObject::tr("Chain files (*.json);;All files (*)");
const QString kTimelineFilter = QObject::tr(
    "Timelines and PyTorch memory snapshots (*.csv *.json *.pickle *.pkl);;CSV timeline (*.csv);;JSON timeline "
    "(*.json);;PyTorch memory snapshot (*.pickle *.pkl *.snapshot.json);;All files (*)");
const QString kTimelineExportFilter = QObject::tr(
    "CSV timeline (*.csv);;Chrome trace (*.trace.json);;JSON timeline (*.json);;PyTorch memory snapshot "
    "(*.pickle);;PyTorch memory snapshot, JSON (*.snapshot.json)");

bool isOnnxModel(const QString& path) { return !path.startsWith(QLatin1Char(':')) && isOnnxFile(path.toStdString()); }

// An ONNX model at `batch` (0: as exported), through the importer the command line uses.
Result<Chain> importOnnx(const QString& path, int batch) {
  auto imported = importOnnxFile(path.toStdString(), OnnxImportOptions{batch});
  if (!imported) {
    if (batch > 0) return imported.status();
    return Status(imported.status().code(),
                  imported.status().message() + " (the 'ONNX batch' field in the tool bar sets the batch)");
  }
  return buildChain(imported->spec);
}

Result<Chain> loadChainFromPath(const QString& path) {
  if (!path.startsWith(QLatin1Char(':'))) return loadChainFile(path.toStdString());
  QFile file(path);  // a built-in example in the resources
  if (!file.open(QIODevice::ReadOnly)) return Status::io("cannot read '" + path.toStdString() + "'");
  return parseChain(file.readAll().toStdString(), path.toStdString());
}

// A small convolutional chain to start editing from.
ChainSpec starterSpec() {
  ChainSpec spec;
  spec.name = "new_chain";
  spec.input.shape = {32, 3, 64, 64};
  auto conv = [](std::string name, std::int64_t channels) {
    LayerSpec l;
    l.name = std::move(name);
    l.kind = LayerKind::Conv2d;
    l.outChannels = channels;
    l.kernel = 3;
    l.padding = 1;
    return l;
  };
  auto simple = [](std::string name, LayerKind kind) {
    LayerSpec l;
    l.name = std::move(name);
    l.kind = kind;
    if (kind == LayerKind::MaxPool) {
      l.kernel = 2;
      l.stride = 2;
    }
    return l;
  };
  spec.layers = {conv("conv1", 32),
                 simple("relu1", LayerKind::Relu),
                 simple("pool1", LayerKind::MaxPool),
                 conv("conv2", 64),
                 simple("relu2", LayerKind::Relu),
                 simple("pool2", LayerKind::MaxPool),
                 simple("flatten", LayerKind::Flatten)};
  LayerSpec fc;
  fc.name = "fc";
  fc.kind = LayerKind::Linear;
  fc.outFeatures = 10;
  spec.layers.push_back(fc);
  return spec;
}

}  // namespace

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

Status MainWindow::openChainFile(const QString& path) {
  const bool onnx = isOnnxModel(path);
  Result<Chain> chain = onnx ? importOnnx(path, onnxBatch_->value()) : loadChainFromPath(path);
  if (!chain) return report(chain.status());
  const QString name = QString::fromStdString(chain->name);
  // An imported model has no chain file yet: Save asks where to write one.
  document_->resetChain(std::move(chain).value(), onnx || path.startsWith(QLatin1Char(':')) ? QString() : path);
  onnxPath_ = onnx ? path : QString();
  lastPlanned_.reset();
  addRecentFile(path);
  const Chain& opened = document_->chain();
  showInfo(onnx ? tr("Imported %1: %2 layers, batch %3").arg(name).arg(opened.size()).arg(opened.inputShape.at(0))
                : tr("Opened %1 (%2 layers)").arg(name).arg(opened.size()));
  planOpenedChain();
  return Status::ok();
}

Status MainWindow::loadZoo(const QString& name, const ZooOptions& options) {
  Result<ChainSpec> spec = zooChain(name.toStdString(), options);
  if (!spec) return report(spec.status());
  Result<Chain> chain = buildChain(*spec);
  if (!chain) return report(chain.status());
  document_->resetChain(std::move(chain).value(), QString());
  onnxPath_.clear();
  lastPlanned_.reset();
  zooBar_->setModelName(name);
  zooBar_->setOptions(options);
  showInfo(tr("Loaded %1: batch %2, %3 px, %4 layers")
               .arg(name)
               .arg(options.batch)
               .arg(options.resolution)
               .arg(document_->chain().size()));
  planOpenedChain();
  return Status::ok();
}

Status MainWindow::newChain() {
  Result<Chain> chain = buildChain(starterSpec());
  if (!chain) return report(chain.status());
  document_->resetChain(std::move(chain).value(), QString());
  onnxPath_.clear();
  lastPlanned_.reset();
  showInfo(tr("A new chain: edit it in the layer table (double-click a cell)"));
  planOpenedChain();
  return Status::ok();
}

Status MainWindow::saveChain(const QString& path) {
  if (!document_->hasChain()) return report(Status::invalid("no chain to save"));
  REMAT_RETURN_IF_ERROR(report(saveChainFile(document_->chain().spec, path.toStdString())));
  document_->setFilePath(path);
  document_->undoStack()->setClean();
  addRecentFile(path);
  statusText_->setText(tr("Saved %1").arg(path));
  return Status::ok();
}

Status MainWindow::openMeasuredTimeline(const QString& path) {
  if (!document_->hasChain()) return report(Status::invalid("open a chain before its measured timeline"));
  Result<Timeline> timeline = readTimelineFile(path);
  if (!timeline) return report(timeline.status());
  // A file says which planner it ran but not the checkpoints: it belongs to the plan shown when it
  // has that plan's ops, and is stale (another plan or chain) otherwise.
  const auto& predicted = document_->simulation().timeline.entries;
  const bool samePlan =
      std::equal(predicted.begin(), predicted.end(), timeline->entries.begin(), timeline->entries.end(),
                 [](const TimelineEntry& a, const TimelineEntry& b) { return a.op == b.op; });
  const std::size_t measuredOps = timeline->entries.size();
  const QString planner = QString::fromStdString(timeline->planner);
  if (samePlan) {
    document_->setMeasured(std::move(timeline).value());
    showInfo(tr("Opened the measured timeline %1").arg(QFileInfo(path).fileName()));
  } else {
    document_->setMeasured(std::move(timeline).value(),
                           MeasuredOrigin{std::nullopt, planner, document_->chainRevision()});
    showInfo(tr("Opened %1: its %2 ops are not the %3 ops of the plan shown (a different plan or chain?); "
                "drawn grey as stale, and not exported with this plan")
                 .arg(QFileInfo(path).fileName())
                 .arg(measuredOps)
                 .arg(predicted.size()));
  }
  return Status::ok();
}

void MainWindow::openFileFromDrop(const QString& path) {
  const QString lower = path.toLower();
  if (isOnnxModel(path)) {
    (void)openChainFile(path);
    return;
  }
  if (lower.endsWith(QLatin1String(".csv")) || lower.endsWith(QLatin1String(".pickle")) ||
      lower.endsWith(QLatin1String(".pkl"))) {
    (void)openMeasuredTimeline(path);
    return;
  }
  // A JSON file is a chain when it says so; anything else is tried as a timeline.
  // Read as strictly as the readers do: a hostile file must not get further here than there.
  bool chain = true;
  if (auto text = readInputFile(path.toStdString(), kMaxTimelineFileBytes, "file")) {
    if (looksLikeSnapshot(*text)) {  // a PyTorch memory snapshot: JSON without a format, or a pickle
      chain = false;
    } else if (auto document = JsonDocument::parse(std::move(text).value(), path.toStdString(), 8)) {
      const auto format = document->root().is_object() ? document->root().find("format") : document->root().end();
      chain = !document->root().is_object() || format == document->root().end() || *format == kChainFormat;
    }
  }
  if (chain) {
    (void)openChainFile(path);
  } else {
    (void)openMeasuredTimeline(path);
  }
}

void MainWindow::runPlanner(const QString& name) { startPlanJob(name, PlanApply::Undoable); }

void MainWindow::planOpenedChain() { startPlanJob(plannerPicker_->plannerName(), PlanApply::Opening); }

void MainWindow::startPlanJob(const QString& name, PlanApply apply) {
  if (!document_->hasChain()) return showError(tr("Open a chain or pick a zoo model first"));
  const Chain chain = document_->chain();
  const std::string planner = name.toStdString();
  jobs_->start<Result<SimulatedPlan>>(
      JobChannel::Plan, tr("Planning with %1").arg(name),
      [chain, planner](const JobRunner::Control& control) {
        control.progress(-1.0);
        const QString text = QStringLiteral("Planning with %1").arg(QString::fromStdString(planner));
        return planAndSimulate(chain, planner, control.cancelFlag(),
                               [&control, &text](double fraction) { control.progress(fraction, text); });
      },
      [this, name, apply](Result<SimulatedPlan> planned) {
        if (!planned) return (void)report(planned.status());
        const PlanReport& r = planned->report;
        const Status applied =
            apply == PlanApply::Opening ? document_->setOpeningPlan(r.plan, name) : document_->applyPlan(r.plan, name);
        if (!report(applied)) return;
        lastPlanned_ = LastPlanned{name, r.plan.checkpoints, r.planSeconds};
        // Fast planners take microseconds: say so rather than "0.00 ms".
        const double planMs = r.planSeconds * 1e3;
        const QString planTime =
            planMs < 0.1 ? tr("%1 us").arg(planMs * 1e3, 0, 'f', 1) : tr("%1 ms").arg(planMs, 0, 'f', 2);
        statusText_->setText(tr("Showing the %1 plan: %2 checkpoints, peak %3, planned in %4")
                                 .arg(name)
                                 .arg(r.plan.checkpoints.size())
                                 .arg(charts::formatBytes(r.peakBytes()), planTime));
      });
}

void MainWindow::measure(const QString& device) {
  if (!document_->hasChain()) return showError(tr("Open a chain or pick a zoo model first"));
  if (!measureDevices().contains(device)) {
    const Status missing = deviceInstalled(device.toStdString());
    return showError(tr("This program cannot run on '%1': %2")
                         .arg(device, QString::fromStdString(missing.isOk() ? "unknown device" : missing.message())));
  }
  RunRequest request{document_->chain(), document_->plan(), document_->planSource().toStdString(), device.toStdString(),
                     1};
  // The result belongs to this plan and chain, whatever is shown when it arrives.
  const MeasuredOrigin origin = document_->currentOrigin();
  jobs_->start<Result<Measurement>>(
      JobChannel::Run, tr("Measuring on %1").arg(device),
      [request](const JobRunner::Control& control) {
        return measurePlan(request, control.cancelFlag(),
                           [&control](double fraction, const QString& text) { control.progress(fraction, text); });
      },
      [this, device, origin](Result<Measurement> measured) {
        if (!measured) return (void)report(measured.status());
        showMeasurement(device, origin, std::move(measured).value());
      });
}

void MainWindow::showMeasurement(const QString& device, const MeasuredOrigin& origin, Measurement measured) {
  const std::uint64_t measuredPeak = measured.timeline.dynamicPeakBytes();
  QString message =
      tr("Measured on %1: dynamic peak %2 (predicted %3)")
          .arg(device, charts::formatBytes(measuredPeak), charts::formatBytes(measured.predictedDynamicPeakBytes));
  const bool unchanged =
      origin.plan && *origin.plan == document_->plan() && origin.chainRevision == document_->chainRevision();
  // The prediction the run was measured against counts the device's workspaces: write them into
  // the chain (one undoable edit), unless the chain or plan changed while it ran.
  const std::size_t fitted = measured.fittedLayers.size();
  const QString layers = fitted == 1 ? tr("1 layer") : tr("%1 layers").arg(fitted);
  if (unchanged && fitted > 0) {
    if (!report(document_->editChain(measured.chain.spec, tr("%1 workspaces for %2").arg(device.toUpper(), layers))))
      return;
    document_->setMeasured(std::move(measured.timeline));
    message += tr("; the %1 kernels' scratch is now in the wf / wb of %2 (undo to remove it)").arg(device, layers);
  } else {
    document_->setMeasured(std::move(measured.timeline), origin);
  }
  if (!document_->measuredIsCurrent()) message += tr("; the plan changed while it ran, so it is shown grey as stale");
  showInfo(message);
}

double MainWindow::planSecondsForCurrentPlan() const {
  if (lastPlanned_ && lastPlanned_->planner == document_->planSource() &&
      lastPlanned_->checkpoints == document_->plan().checkpoints)
    return lastPlanned_->planSeconds;
  return 0.0;
}

Status MainWindow::exportPredictedTimeline(const QString& path) {
  if (!document_->hasChain()) return report(Status::invalid("no chain: nothing to export"));
  return report(writeTimelineFile({document_->simulation().timeline}, path, exportWriteOptions()),
                tr("Exported %1").arg(path));
}

Status MainWindow::exportMeasuredTimeline(const QString& path) {
  if (!document_->measured()) return report(Status::invalid("no measured timeline: run the plan or open one first"));
  // Never a prediction of one plan next to a measurement of another.
  if (!document_->measuredIsCurrent())
    return report(Status::invalid("the measured timeline is of plan '" +
                                  document_->measuredOrigin().planSource.toStdString() + "', not of the plan shown ('" +
                                  document_->planSource().toStdString() +
                                  "'): measure this plan, or undo back to that one; nothing was written"));
  // With the prediction next to it, as `remat run --timeline` writes them. Readers group rows by
  // (planner, source, run): an overlay that is itself a prediction of the same plan gets its own source.
  const Timeline& predicted = document_->simulation().timeline;
  Timeline overlay = *document_->measured();
  if (overlay.planner == predicted.planner && overlay.source == predicted.source && overlay.run == predicted.run)
    overlay.source = "overlay";
  return report(writeTimelineFile({predicted, overlay}, path, exportWriteOptions()), tr("Exported %1").arg(path));
}

Status MainWindow::exportPlanJson(const QString& path) {
  if (!document_->hasChain()) return report(Status::invalid("no chain: nothing to export"));
  return report(writePlanJson(path, document_->simulation(), document_->planSource(), planSecondsForCurrentPlan(),
                              document_->chain().name, exportWriteOptions()),
                tr("Exported %1").arg(path));
}

WriteOptions MainWindow::exportWriteOptions() const {
  WriteOptions options;
  if (!document_->filePath().isEmpty() && !document_->filePath().startsWith(QLatin1Char(':')))
    options.inputs.push_back(document_->filePath().toStdString());
  return options;
}

Status MainWindow::exportChartPng(const QString& path) {
  return report(planView_->chart()->exportPng(path, exportWriteOptions()), tr("Exported %1").arg(path));
}

Status MainWindow::exportChartSvg(const QString& path) {
  return report(planView_->chart()->exportSvg(path, exportWriteOptions()), tr("Exported %1").arg(path));
}

void MainWindow::openDialog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open chain or ONNX model"), QString(), kChainFilter);
  if (!path.isEmpty()) (void)openChainFile(path);
}

void MainWindow::saveAsDialog() {
  if (!document_->hasChain()) return;
  const QString suggested = document_->filePath().isEmpty()
                                ? QString::fromStdString(document_->chain().name) + QStringLiteral(".json")
                                : document_->filePath();
  const QString path = QFileDialog::getSaveFileName(this, tr("Save chain"), suggested, kSaveChainFilter);
  if (!path.isEmpty()) (void)saveChain(path);
}

void MainWindow::openTimelineDialog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open measured timeline"), QString(), kTimelineFilter);
  if (!path.isEmpty()) (void)openMeasuredTimeline(path);
}

void MainWindow::exportDialog(ExportKind kind) {
  if (!document_->hasChain()) return;
  // What the dialog asks for and which export writes the chosen file.
  struct Target {
    QString title;
    QString suffix;
    QString filter;
    Status (MainWindow::*write)(const QString& path) = nullptr;
  };
  const Target target = [&]() -> Target {
    switch (kind) {
      case ExportKind::PredictedTimeline:
        return {tr("Export predicted timeline"), ".csv", kTimelineExportFilter, &MainWindow::exportPredictedTimeline};
      case ExportKind::MeasuredTimeline:
        return {tr("Export measured timeline"), ".csv", kTimelineExportFilter, &MainWindow::exportMeasuredTimeline};
      case ExportKind::PlanJson:
        return {tr("Export plan"), "_plan.json", tr("JSON (*.json)"), &MainWindow::exportPlanJson};
      case ExportKind::ChartPng: return {tr("Export chart"), ".png", tr("PNG (*.png)"), &MainWindow::exportChartPng};
      case ExportKind::ChartSvg: return {tr("Export chart"), ".svg", tr("SVG (*.svg)"), &MainWindow::exportChartSvg};
    }
    return {};
  }();
  if (!target.write) return;
  const QString stem = QString::fromStdString(document_->chain().name) + QLatin1Char('_') + document_->planSource();
  const QString path = QFileDialog::getSaveFileName(this, target.title, stem + target.suffix, target.filter);
  if (!path.isEmpty()) (void)(this->*target.write)(path);
}

}  // namespace remat::gui
