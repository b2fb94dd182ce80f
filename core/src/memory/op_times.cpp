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

CostUnit layerCostUnit(const Chain& chain, std::size_t l) {
  const ChainLayer& layer = chain.layers[l - 1];
  if (layer.kind == LayerKind::Abstract) return CostUnit::Milliseconds;
  const bool profiled =
      layer.specIndex < chain.spec.layers.size() && chain.spec.layers[layer.specIndex].hasMeasuredCost;
  return profiled ? CostUnit::Milliseconds : CostUnit::Gflop;
}

double opMicroseconds(const Chain& chain, const Op& op, const OpTimeModel& model) {
  if (op.kind == OpKind::Seed) return 0.0;
  const LayerNumbers& numbers = chain.at(op.layer);
  const double cost = op.kind == OpKind::B ? numbers.bwdCost : numbers.fwdCost;
  if (layerCostUnit(chain, op.layer) == CostUnit::Milliseconds) return cost * kMicrosecondsPerMillisecond;
  return cost / model.gflopPerSecond * kMicrosecondsPerSecond;
}

Status modelOpTimes(const Chain& chain, Timeline& timeline, const OpTimeModel& model) {
  if (!(model.gflopPerSecond > 0.0))
    return Status::invalid("the assumed device speed must be positive, not " + std::to_string(model.gflopPerSecond) +
                           " GFLOP/s");
  for (std::size_t i = 0; i < timeline.entries.size(); ++i) {
    const Op& op = timeline.entries[i].op;
    if (op.kind != OpKind::Seed && (op.layer < 1 || op.layer > chain.size()))
      return Status::invalid("timeline op " + std::to_string(i) + " (" + opLabel(op) + ") is not a layer of chain '" +
                             chain.name + "' (1.." + std::to_string(chain.size()) + ")");
  }
  for (TimelineEntry& entry : timeline.entries) entry.timeUs = opMicroseconds(chain, entry.op, model);
  return Status::ok();
}

std::string describeOpTimeModel(const Chain& chain, const OpTimeModel& model) {
  bool gflop = false;
  bool profiled = false;
  bool stated = false;
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    if (layerCostUnit(chain, l) == CostUnit::Gflop) {
      gflop = true;
    } else if (chain.layers[l - 1].kind == LayerKind::Abstract) {
      stated = true;
    } else {
      profiled = true;
    }
  }
  std::string text;
  const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : " + ") + part; };
  if (gflop) add("GFLOP at " + speedText(model.gflopPerSecond));
  if (profiled) add("profiled ms");
  if (stated) add("stated costs as ms");
  return text;
}

}  // namespace remat
