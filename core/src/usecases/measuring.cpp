#include "remat/usecases/measuring.hpp"

#include <algorithm>

#include "remat/usecases/planning.hpp"

namespace remat {

std::size_t firstMismatch(const Timeline& predicted, const Timeline& measured) {
  if (predicted.entries.size() != measured.entries.size()) return 0;
  for (std::size_t i = 0; i < predicted.entries.size(); ++i) {
    const TimelineEntry& p = predicted.entries[i];
    const TimelineEntry& m = measured.entries[i];
    if (!(p.op == m.op) || p.footprintBytes != m.footprintBytes || p.liveAfterBytes != m.liveAfterBytes) return i;
  }
  return std::string::npos;
}

std::size_t PredictionCheck::mismatchedSteps() const {
  return static_cast<std::size_t>(std::count_if(firstMismatch.begin(), firstMismatch.end(),
                                                [](std::size_t op) { return op != std::string::npos; }));
}

std::size_t PredictionCheck::firstMismatchOfAnyStep() const {
  for (std::size_t op : firstMismatch)
    if (op != std::string::npos) return op;
  return std::string::npos;
}

PredictionCheck checkPrediction(const Timeline& predicted, const std::vector<Timeline>& measured) {
  PredictionCheck check;
  for (const Timeline& step : measured) {
    check.measuredDynamicPeakBytes = std::max(check.measuredDynamicPeakBytes, step.dynamicPeakBytes());
    check.firstMismatch.push_back(firstMismatch(predicted, step));
  }
  return check;
}

Result<MeasuredPlan> runPredictedPlan(Interpreter& interpreter, Simulation predicted, const MeasureOptions& options) {
  if (options.beforeRun) REMAT_RETURN_IF_ERROR(options.beforeRun());
  RunOptions run;
  run.steps = options.steps;
  run.planner = options.planner;
  run.cancel = options.cancel;
  run.progress = options.progress;
  Result<RunResult> result = interpreter.run(predicted.plan, run);
  if (!result) return result.status();
  MeasuredPlan measured{std::move(predicted), std::move(result).value(), {}};
  measured.check = checkPrediction(measured.predicted.timeline, measured.run.timelines);
  return measured;
}

Result<MeasuredPlan> measurePlan(Device& device, const Chain& chain, const Plan& plan, const MeasureOptions& options) {
  Result<Simulation> predicted = scorePlan(chain, plan, options.planner);
  if (!predicted) return predicted.status();
  REMAT_RETURN_IF_ERROR(device.checkFits(predicted->peakBytes()));
  InterpreterOptions init;
  init.seed = options.seed;
  Result<std::unique_ptr<Interpreter>> interpreter = Interpreter::create(chain, device, init);
  if (!interpreter) return interpreter.status();
  return runPredictedPlan(**interpreter, std::move(predicted).value(), options);
}

}  // namespace remat
