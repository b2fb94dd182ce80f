#include "document/run_support.hpp"

#include <algorithm>
#include <memory>

#include "remat/devices/devices.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/exec/profiler.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/report/exporters.hpp"

namespace remat::gui {

QStringList measureDevices() {
  QStringList devices;
  for (std::string_view name : deviceNames())
    if (deviceInstalled(name).isOk()) devices << QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
  return devices;
}

QString runProgressText(const RunProgress& progress, const std::vector<std::string>& layerNames) {
  QString text = QStringLiteral("op %1 of %2: %3")
                     .arg(progress.opIndex + 1)
                     .arg(progress.opCount)
                     .arg(QString::fromStdString(opLabel(progress.op, layerNames)));
  if (progress.steps > 1) text += QStringLiteral(", step %1 of %2").arg(progress.step + 1).arg(progress.steps);
  const double left = progress.secondsLeft();
  if (left >= 0.0) text += QStringLiteral(", about %1 s left").arg(left, 0, 'f', left < 10.0 ? 1 : 0);
  return text;
}

namespace {

// Calls `report` before an op at most every 50 ms: enough for a moving bar, without flooding the
// GUI thread's queue on chains of thousands of tiny ops.
class ThrottledProgress {
 public:
  ThrottledProgress(const std::function<void(double, const QString&)>& report, const QString& prefix,
                    std::vector<std::string> layerNames)
      : report_(report), prefix_(prefix), layerNames_(std::move(layerNames)) {}
  void operator()(const RunProgress& progress) {
    if (!report_ || (reported_ && progress.elapsedSeconds - lastSeconds_ < 0.05)) return;
    report_(progress.fraction(), prefix_ + runProgressText(progress, layerNames_));
    lastSeconds_ = progress.elapsedSeconds;
    reported_ = true;
  }

 private:
  const std::function<void(double, const QString&)>& report_;
  QString prefix_;
  std::vector<std::string> layerNames_;
  double lastSeconds_ = 0.0;
  bool reported_ = false;
};

std::vector<std::string> layerNamesOf(const Chain& chain) {
  std::vector<std::string> names;
  for (const ChainLayer& layer : chain.layers) names.push_back(layer.name);
  return names;
}

}  // namespace

Result<Measurement> measurePlan(const RunRequest& request, const std::atomic<bool>* cancel,
                                const std::function<void(double, const QString&)>& progress) {
  REMAT_RETURN_IF_ERROR(validatePlan(request.plan, request.chain.size()));
  const QString device = QString::fromStdString(request.device);
  if (progress) progress(-1.0, QStringLiteral("Preparing the %1 kernels").arg(device));
  Result<std::unique_ptr<Device>> opened = openDevice(request.device);
  if (!opened) return opened.status();
  Device& on = **opened;
  // An unprofiled chain (every zoo model) gets the device's workspaces on the fly, so the
  // prediction it is measured against counts the kernels' scratch.
  Result<WorkspaceFit> fit = fitWorkspacesToDevice(request.chain, on);
  if (!fit) return fit.status();
  Measurement measurement;
  measurement.chain = std::move(fit->chain);
  measurement.fittedLayers = std::move(fit->raisedLayers);
  Result<Simulation> predicted = simulate(measurement.chain, request.plan);
  if (!predicted) return predicted.status();
  measurement.predictedDynamicPeakBytes = predicted->dynamicPeakBytes;
  // The CPU may use three quarters of this machine's RAM (devices.hpp): a plan too big for it is
  // refused before anything is allocated instead of letting the system swap or kill the explorer.
  REMAT_RETURN_IF_ERROR(on.checkFits(predicted->peakBytes()));
  Result<std::unique_ptr<Interpreter>> interpreter = Interpreter::create(measurement.chain, on);
  if (!interpreter) return interpreter.status();
  ThrottledProgress throttled(progress, QStringLiteral("Measuring on %1: ").arg(device),
                              layerNamesOf(measurement.chain));
  RunOptions options;
  options.steps = std::max(1, request.steps);
  options.planner = request.planner;
  options.cancel = cancel;
  options.progress = [&throttled](const RunProgress& p) { throttled(p); };
  Result<RunResult> result = (*interpreter)->run(request.plan, options);
  if (!result) return result.status();
  if (result->timelines.empty()) return Status::internal("the interpreter returned no timeline");
  measurement.timeline = std::move(result->timelines.back());
  if (progress) progress(1.0, QStringLiteral("Measured"));
  return measurement;
}

Status writeTimelineFile(const std::vector<Timeline>& timelines, const QString& path, const WriteOptions& options) {
  return writeTimelines(path.toStdString(), timelines, options);
}

Result<Timeline> readTimelineFile(const QString& path) {
  Result<std::vector<Timeline>> timelines = readTimelines(path.toStdString());
  if (!timelines) return timelines.status();
  if (timelines->empty()) return Status::invalid(path.toStdString() + ": the file holds no timeline");
  // `remat run --timeline` writes the prediction next to the measurement: overlay the measurement.
  for (Timeline& timeline : *timelines)
    if (timeline.source != "predicted") return std::move(timeline);
  return std::move(timelines->front());
}

}  // namespace remat::gui
