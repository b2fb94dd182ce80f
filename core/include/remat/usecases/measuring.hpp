#pragma once
// The use case "measure a plan on a device", as every front end offers it (`remat run`, the
// explorer's Measure, the GPU check): fit the chain's workspaces to the device's kernels
// (fitWorkspacesToDevice, exec/profiler.hpp: before planning, so the plan and its prediction count
// the kernels' scratch), predict, check that the prediction fits, run the steps, and compare every
// step's measured timeline with the prediction.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/exec/device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat {

// How the measured steps compare with the prediction, op by op.
struct PredictionCheck {
  std::uint64_t measuredDynamicPeakBytes = 0;  // the largest over the steps
  // Per step: the first op whose footprint or live-after differs from the prediction (0 when the op
  // sequences differ in length); npos when the step equals the prediction byte for byte.
  std::vector<std::size_t> firstMismatch;
  std::size_t mismatchedSteps() const;
  bool matches() const { return mismatchedSteps() == 0; }
  // The first mismatch of the first step that has one; npos when every step matches.
  std::size_t firstMismatchOfAnyStep() const;
};

PredictionCheck checkPrediction(const Timeline& predicted, const std::vector<Timeline>& measured);

// The first op whose measured footprint or live-after differs from the prediction, or npos.
std::size_t firstMismatch(const Timeline& predicted, const Timeline& measured);

struct MeasureOptions {
  int steps = 1;
  std::string planner = "checkpoints";  // the name of the plan, written into every timeline
  std::uint64_t seed = 0;               // of the input batch, parameters, labels and dropout masks
  const std::atomic<bool>* cancel = nullptr;
  std::function<void(const RunProgress&)> progress = {};
  // Called after the fit check, right before the steps (the GPU check opens its pool's window).
  std::function<Status()> beforeRun = {};
};

struct MeasuredPlan {
  Simulation predicted;  // its timeline named after the plan
  RunResult run;         // one measured timeline per step
  PredictionCheck check;
};

// Measures `plan` on `device` for a chain that already has the device's workspaces: predicts,
// refuses a prediction over what the device can hold (Device::checkFits) before allocating, then
// runs the steps on a new interpreter.
Result<MeasuredPlan> measurePlan(Device& device, const Chain& chain, const Plan& plan, const MeasureOptions& options);

// The steps of a predicted plan on an interpreter that is kept for several plans (the GPU check):
// options.beforeRun, the steps, the comparison. The caller checked that the prediction fits.
Result<MeasuredPlan> runPredictedPlan(Interpreter& interpreter, Simulation predicted, const MeasureOptions& options);

}  // namespace remat
