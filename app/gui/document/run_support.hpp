#pragma once
// Measuring a plan on a device (the CPU backend; the GPU when built with CUDA and one is present)
// through the use case (usecases/measuring.hpp), with the explorer's progress text. Runs on
// JobRunner threads; plain values in and out.
#include <QString>
#include <QStringList>
#include <atomic>
#include <functional>
#include <vector>

#include "remat/base/device_names.hpp"
#include "remat/base/status.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat::gui {

struct RunRequest {
  Chain chain;
  Plan plan;
  std::string planner;  // written into the measured timeline
  std::string device = std::string(kCpuDeviceName);
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

// The progress text of a run (what measurePlan reports), with the time left (negative: none shown);
// without it, RunProgress's own estimate.
QString runProgressText(const RunProgress& progress, const std::vector<std::string>& layerNames);
QString runProgressText(const RunProgress& progress, const std::vector<std::string>& layerNames, double secondsLeft);

// The time left of a run by its rate since the first op that did work: that op carries one-time
// costs (the kernels' set-up, the arena's first touch) which a rate from the start would spread
// over the whole run (an hour said for a 23 s run). Nothing until 2% more of the work is done.
class RunEstimate {
 public:
  double secondsLeft(const RunProgress& progress);  // negative: no estimate yet

 private:
  bool started_ = false;
  double startSeconds_ = 0.0;
  double startFraction_ = 0.0;
};

}  // namespace remat::gui
