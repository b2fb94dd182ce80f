#include "run_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <memory>

#include "remat/cpu/cpu_device.hpp"
#include "remat/io/exporters.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/memory/simulator.hpp"
#if REMAT_HAVE_GPU
#include "remat/gpu/cuda_device.hpp"
#endif

namespace remat::gui {
namespace {

// The CPU reference allocates real memory: refuse a plan that would take more than three quarters
// of this machine's RAM instead of letting the system swap or kill the explorer.
std::uint64_t cpuCapacityBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(pageSize) / 4 * 3;
}

Result<std::unique_ptr<Device>> openDevice(const std::string& name, std::uint64_t predictedPeakBytes) {
  if (name == "cpu") {
    cpu::CpuDeviceOptions options;
    options.capacityBytes = cpuCapacityBytes();
    if (options.capacityBytes > 0 && predictedPeakBytes > options.capacityBytes)
      return Status::outOfMemory("the plan needs " + std::to_string(predictedPeakBytes >> 20) +
                                 " MiB, more than the CPU reference may use here (" +
                                 std::to_string(options.capacityBytes >> 20) + " MiB); try a smaller batch");
    return std::unique_ptr<Device>(std::make_unique<cpu::CpuDevice>(options));
  }
#if REMAT_HAVE_GPU
  if (name == "gpu") {
    Result<std::unique_ptr<gpu::CudaDevice>> device = gpu::createCudaDevice();
    if (!device) return device.status();
    REMAT_RETURN_IF_ERROR((*device)->checkFits(predictedPeakBytes));
    return std::unique_ptr<Device>(std::move(device).value());
  }
#endif
  return Status::invalid("this build cannot run on device '" + name + "'");
}

}  // namespace

QStringList measureDevices() {
  QStringList devices{QStringLiteral("cpu")};
#if REMAT_HAVE_GPU
  if (gpu::cudaDeviceAvailable().isOk()) devices << QStringLiteral("gpu");
#endif
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
  Result<std::unique_ptr<Device>> device = openDevice(request.device, predicted->peakBytes());
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

Status writeTimelineFile(const std::vector<Timeline>& timelines, const QString& path) {
  return writeTimelines(path.toStdString(), timelines);
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
