#include "run_support.hpp"

#include <algorithm>
#include <memory>

#include "remat/devices/devices.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/io/exporters.hpp"
#include "remat/memory/simulator.hpp"

namespace remat::gui {
namespace {

// The device with the plan checked against what it can hold, before anything is allocated: the
// CPU reference may use three quarters of this machine's RAM (devices.hpp), so a plan too big for
// it is refused instead of letting the system swap or kill the explorer.
Result<std::unique_ptr<Device>> openDeviceFor(const std::string& name, std::uint64_t predictedPeakBytes) {
  Result<std::unique_ptr<Device>> device = openDevice(name);
  if (!device) return device.status();
  REMAT_RETURN_IF_ERROR((*device)->checkFits(predictedPeakBytes));
  return device;
}

}  // namespace

QStringList measureDevices() {
  QStringList devices;
  for (std::string_view name : deviceNames())
    if (deviceAvailable(name).isOk()) devices << QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
  return devices;
}

Result<Timeline> measurePlan(const RunRequest& request, const std::atomic<bool>* cancel,
                             const std::function<void(double, const QString&)>& progress) {
  auto cancelled = [cancel]() { return cancel && cancel->load(); };
  auto report = [&progress](double fraction, const QString& text) {
    if (progress) progress(fraction, text);
  };
  REMAT_RETURN_IF_ERROR(validatePlan(request.plan, request.chain.size()));
  Result<Simulation> predicted = simulate(request.chain, request.plan);
  if (!predicted) return predicted.status();
  const int steps = std::max(1, request.steps);
  report(0.0, QStringLiteral("Preparing %1").arg(QString::fromStdString(request.device)));
  Result<std::unique_ptr<Device>> device = openDeviceFor(request.device, predicted->peakBytes());
  if (!device) return device.status();
  Result<std::unique_ptr<Interpreter>> interpreter = Interpreter::create(request.chain, **device);
  if (!interpreter) return interpreter.status();
  if (cancelled()) return Status::cancelled();
  // Step by step, so a cancel lands between steps and progress moves.
  RunOptions options;
  options.steps = 1;
  options.planner = request.planner;
  Timeline last;
  for (int step = 0; step < steps; ++step) {
    report((step + 0.5) / steps, QStringLiteral("Running step %1 of %2").arg(step + 1).arg(steps));
    Result<RunResult> result = (*interpreter)->run(request.plan, options);
    if (!result) return result.status();
    if (result->timelines.empty()) return Status::internal("the interpreter returned no timeline");
    last = std::move(result->timelines.back());
    last.run = step;
    if (cancelled()) return Status::cancelled();
  }
  report(1.0, QStringLiteral("Measured"));
  return last;
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
