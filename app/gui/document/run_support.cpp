#include "document/run_support.hpp"

#include <algorithm>
#include <memory>

#include "remat/base/duration.hpp"
#include "remat/devices/devices.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/exec/profiler.hpp"
#include "remat/usecases/measuring.hpp"

namespace remat::gui {

QStringList measureDevices() {
  QStringList devices;
  for (std::string_view name : deviceNames())
    if (deviceInstalled(name).isOk()) devices << QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
  return devices;
}

QString runProgressText(const RunProgress& progress, const std::vector<std::string>& layerNames) {
  return runProgressText(progress, layerNames, progress.secondsLeft());
}

double RunEstimate::secondsLeft(const RunProgress& progress) {
  const double done = progress.fraction();
  if (!started_) {
    if (done <= 0.0) return -1.0;
    started_ = true;
    startSeconds_ = progress.elapsedSeconds;
    startFraction_ = done;
    return -1.0;
  }
  const double since = done - startFraction_;
  if (since < 0.02) return -1.0;
  return (progress.elapsedSeconds - startSeconds_) * (1.0 - done) / since;
}

QString runProgressText(const RunProgress& progress, const std::vector<std::string>& layerNames, double left) {
  QString text = QStringLiteral("op %1 of %2: %3")
                     .arg(progress.opIndex + 1)
                     .arg(progress.opCount)
                     .arg(QString::fromStdString(opLabel(progress.op, layerNames)));
  if (progress.steps > 1) text += QStringLiteral(", step %1 of %2").arg(progress.step + 1).arg(progress.steps);
  const std::string leftText = formatTimeLeft(left);
  if (!leftText.empty()) text += QStringLiteral(", ") + QString::fromStdString(leftText);
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
    const double left = estimate_.secondsLeft(progress);  // sees every op, reported or not
    if (!report_ || (reported_ && progress.elapsedSeconds - lastSeconds_ < 0.05)) return;
    report_(progress.fraction(), prefix_ + runProgressText(progress, layerNames_, left));
    lastSeconds_ = progress.elapsedSeconds;
    reported_ = true;
  }

 private:
  const std::function<void(double, const QString&)>& report_;
  QString prefix_;
  std::vector<std::string> layerNames_;
  RunEstimate estimate_;
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
  // An unprofiled chain (every zoo model) gets the device's workspaces on the fly, so the
  // prediction it is measured against counts the kernels' scratch.
  Result<WorkspaceFit> fit = fitWorkspacesToDevice(request.chain, **opened);
  if (!fit) return fit.status();
  Measurement measurement;
  measurement.chain = std::move(fit->chain);
  measurement.fittedLayers = std::move(fit->raisedLayers);
  ThrottledProgress throttled(progress, QStringLiteral("Measuring on %1: ").arg(device),
                              layerNamesOf(measurement.chain));
  MeasureOptions options;
  options.steps = std::max(1, request.steps);
  options.planner = request.planner;
  options.cancel = cancel;
  options.progress = [&throttled](const RunProgress& p) { throttled(p); };
  // The CPU may use three quarters of this machine's RAM (devices.hpp): the use case refuses a plan
  // too big for it before anything is allocated, instead of letting the system swap or kill the
  // explorer.
  Result<MeasuredPlan> measured = remat::measurePlan(**opened, measurement.chain, request.plan, options);
  if (!measured) return measured.status();
  if (measured->run.timelines.empty()) return Status::internal("the interpreter returned no timeline");
  measurement.predictedDynamicPeakBytes = measured->predicted.dynamicPeakBytes;
  measurement.timeline = std::move(measured->run.timelines.back());
  if (progress) progress(1.0, QStringLiteral("Measured"));
  return measurement;
}

}  // namespace remat::gui
