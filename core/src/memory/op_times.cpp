#include "remat/memory/op_times.hpp"

#include <cstdio>

namespace remat {
namespace {

constexpr double kMicrosecondsPerMillisecond = 1e3;
constexpr double kMicrosecondsPerSecond = 1e6;

// "10 TFLOP/s", "500 GFLOP/s": the speed as people say it.
std::string speedText(double gflopPerSecond) {
  char text[64];
  if (gflopPerSecond >= 1000.0) {
    std::snprintf(text, sizeof text, "%g TFLOP/s", gflopPerSecond / 1000.0);
  } else {
    std::snprintf(text, sizeof text, "%g GFLOP/s", gflopPerSecond);
  }
  return text;
}

}  // namespace

double opMicroseconds(const Chain& chain, const Op& op, const OpTimeModel& model) {
  if (!op.hasLayer()) return 0.0;  // SEED; STEP has no cost in the chain (an estimate of 0)
  const LayerNumbers& numbers = chain.at(op.layer);
  const double cost = op.kind == OpKind::B ? numbers.bwdCost : numbers.fwdCost;
  // Measured and stated costs are read as milliseconds; only estimated GFLOP need the speed.
  if (layerCostOrigin(chain, op.layer) != CostOrigin::Estimated) return cost * kMicrosecondsPerMillisecond;
  return cost / model.gflopPerSecond * kMicrosecondsPerSecond;
}

Status modelOpTimes(const Chain& chain, Timeline& timeline, const OpTimeModel& model) {
  if (!(model.gflopPerSecond > 0.0))
    return Status::invalid("the assumed device speed must be positive, not " + std::to_string(model.gflopPerSecond) +
                           " GFLOP/s");
  for (std::size_t i = 0; i < timeline.entries.size(); ++i) {
    const Op& op = timeline.entries[i].op;
    if (op.hasLayer() && (op.layer < 1 || op.layer > chain.size()))
      return Status::invalid("timeline op " + std::to_string(i) + " (" + opLabel(op) + ") is not a layer of chain '" +
                             chain.name + "' (1.." + std::to_string(chain.size()) + ")");
  }
  for (TimelineEntry& entry : timeline.entries) entry.timeUs = opMicroseconds(chain, entry.op, model);
  return Status::ok();
}

std::string describeOpTimeModel(const Chain& chain, const OpTimeModel& model) {
  const CostOrigins origins = costOrigins(chain);
  const bool gflop = origins.estimated > 0;
  const bool profiled = origins.measured > 0;
  const bool stated = origins.stated > 0;
  std::string text;
  const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : " + ") + part; };
  if (gflop) add("GFLOP at " + speedText(model.gflopPerSecond));
  if (profiled) add("profiled ms");
  if (stated) add("stated costs as ms");
  return text;
}

}  // namespace remat
