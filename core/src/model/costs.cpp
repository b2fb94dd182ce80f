#include "remat/model/costs.hpp"

namespace remat {

CostOrigin layerCostOrigin(const Chain& chain, std::size_t l) {
  const ChainLayer& layer = chain.layers[l - 1];
  if (layer.kind == LayerKind::Abstract) return CostOrigin::Stated;
  const bool profiled =
      layer.specIndex < chain.spec.layers.size() && chain.spec.layers[layer.specIndex].hasMeasuredCost;
  return profiled ? CostOrigin::Measured : CostOrigin::Estimated;
}

CostOrigins costOrigins(const Chain& chain) {
  CostOrigins origins;
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    switch (layerCostOrigin(chain, l)) {
      case CostOrigin::Stated: ++origins.stated; break;
      case CostOrigin::Measured: ++origins.measured; break;
      case CostOrigin::Estimated: ++origins.estimated; break;
    }
  }
  return origins;
}

CostUnit chainCostUnit(const Chain& chain) {
  const CostOrigins origins = costOrigins(chain);
  const std::size_t n = chain.size();
  if (origins.estimated == n && n > 0) return CostUnit::Gflop;
  if (origins.measured == n && n > 0) return CostUnit::Milliseconds;
  if (origins.stated == n) return CostUnit::Abstract;
  return CostUnit::Mixed;
}

std::string_view costUnitName(CostUnit unit) {
  switch (unit) {
    case CostUnit::Gflop: return "GFLOP";
    case CostUnit::Milliseconds: return "ms";
    case CostUnit::Abstract: return "units";
    case CostUnit::Mixed: return "mixed";
  }
  return "units";
}

std::string_view costUnitSymbol(CostUnit unit) {
  switch (unit) {
    case CostUnit::Gflop: return "GFLOP";
    case CostUnit::Milliseconds: return "ms";
    case CostUnit::Abstract:
    case CostUnit::Mixed: return "cost units";
  }
  return "cost units";
}

std::string costUnitDescription(const Chain& chain) {
  switch (chainCostUnit(chain)) {
    case CostUnit::Gflop: return "GFLOP (estimated from shapes)";
    case CostUnit::Milliseconds: return "ms (measured by remat profile)";
    case CostUnit::Abstract: return "cost units (stated by the abstract layers)";
    case CostUnit::Mixed: break;
  }
  const CostOrigins origins = costOrigins(chain);
  std::string parts;
  const auto add = [&parts](std::size_t count, const char* what) {
    if (count == 0) return;
    parts += (parts.empty() ? "" : ", ") + std::to_string(count) + (count == 1 ? " layer " : " layers ") + what;
  };
  add(origins.measured, "measured in ms");
  add(origins.estimated, "estimated in GFLOP");
  add(origins.stated, "abstract");
  return "cost units (mixed: " + parts + ")";
}

double forwardCost(const Chain& chain) {
  double cost = 0.0;
  for (const ChainLayer& layer : chain.layers) cost += layer.numbers.fwdCost;
  return cost;
}

double recomputeShare(const Chain& chain, double cost) {
  const double forward = forwardCost(chain);
  return forward > 0.0 ? cost / forward : 0.0;
}

}  // namespace remat
