#pragma once
// Measuring a plan on a device (the CPU backend; the GPU when built with CUDA and one is present)
// and reading / writing timelines in the formats of `remat run --timeline`. Runs on JobRunner
// threads; plain values in and out.
#include <QString>
#include <QStringList>
#include <atomic>
#include <functional>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat::gui {

struct RunRequest {
  Chain chain;
  Plan plan;
  std::string planner;  // written into the measured timeline
  std::string device = "cpu";
  int steps = 1;
};

// What a measurement gives back: the last step's timeline, and the chain it was predicted on, which
// has the device's workspaces written in (fitWorkspacesToDevice) where the request's chain had
// less: fittedLayers lists those layers (empty: the request's chain as it was).
struct Measurement {
  Timeline timeline;
  Chain chain;
  std::vector<std::size_t> fittedLayers;
  std::uint64_t predictedDynamicPeakBytes = 0;  // of `chain` under the plan
};

// The devices this program has the code for: "cpu", and "gpu" when the GPU module file is there
// (deviceInstalled: nothing is loaded; whether a GPU answers is found out when a run opens it).
QStringList measureDevices();

// Fits the chain's workspaces to the device, then runs the plan for request.steps steps.
// progress(fraction, text) is called from the calling thread at most every 50 ms with the op count
// and an estimate of the time left ("op 37 of 98: B(12) conv4, about 8 s left"); cancel is checked
// before every op, so a cancel stops the run after the op in flight, having freed every byte.
Result<Measurement> measurePlan(const RunRequest& request, const std::atomic<bool>* cancel,
                                const std::function<void(double, const QString&)>& progress);

// The progress text of a run (what measurePlan reports).
QString runProgressText(const RunProgress& progress, const std::vector<std::string>& layerNames);

// Timeline files (core's exporters): ".csv" (long layout), ".trace.json" (Chrome trace, write
// only) and ".json" (remat-timeline/1). A file may hold several timelines; reading picks the first
// measured one (a `remat run --timeline` file holds the prediction too), else the first.
Status writeTimelineFile(const std::vector<Timeline>& timelines, const QString& path, const WriteOptions& options = {});
Result<Timeline> readTimelineFile(const QString& path);

}  // namespace remat::gui
