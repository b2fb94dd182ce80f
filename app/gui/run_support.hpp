#pragma once
// Measuring a plan on a device (the CPU reference; the GPU when built with CUDA and one is present)
// and reading / writing timelines in the formats of `remat run --timeline`. Runs on JobRunner
// threads; plain values in and out.
#include <QString>
#include <QStringList>
#include <atomic>
#include <functional>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/io/atomic_file.hpp"
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

// The devices this build can run on: "cpu", and "gpu" when built with CUDA and a device answers.
QStringList measureDevices();

// Runs the plan for request.steps steps and returns the last step's measured timeline.
// progress(fraction, text) is called from the calling thread; cancel is polled between ops.
Result<Timeline> measurePlan(const RunRequest& request, const std::atomic<bool>* cancel,
                             const std::function<void(double, const QString&)>& progress);

// Timeline files (core's exporters): ".csv" (long layout), ".trace.json" (Chrome trace, write
// only) and ".json" (remat-timeline/1). A file may hold several timelines; reading picks the first
// measured one (a `remat run --timeline` file holds the prediction too), else the first.
Status writeTimelineFile(const std::vector<Timeline>& timelines, const QString& path, const WriteOptions& options = {});
Result<Timeline> readTimelineFile(const QString& path);

}  // namespace remat::gui
