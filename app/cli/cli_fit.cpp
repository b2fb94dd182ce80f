// What `plan`, `run` and `tradeoff` share about memory budgets and recompute costs: `--fit
// CAPACITY` read as the budget planner's SIZE, and a recompute cost written with its unit.
#include <cstdio>

#include "cli.hpp"
#include "remat/devices/devices.hpp"
#include "remat/model/costs.hpp"

namespace remat::cli {

std::string formatRecomputeCost(const Chain& chain, double cost) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6g %s", cost, std::string(costUnitSymbol(chainCostUnit(chain))).c_str());
  return text;
}

std::string formatRecomputeShare(const Chain& chain, double cost) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * recomputeShare(chain, cost));
  return text;
}

std::string describeRecomputeCost(const Chain& chain, double cost) {
  return formatRecomputeCost(chain, cost) + " (" + formatRecomputeShare(chain, cost) + " of one forward pass)";
}

std::string describeCostUnit(const Chain& chain) {
  return "recompute cost in " + costUnitDescription(chain) + "; one forward pass costs " +
         formatRecomputeCost(chain, forwardCost(chain));
}

Result<FitBudget> fitBudget(const Chain& chain, const std::string& fit, const std::string& deviceName, Device* device) {
  std::uint64_t capacityBytes = 0;
  std::string capacityText;
  if (fit == "device") {
    std::unique_ptr<Device> opened;
    if (device == nullptr) {
      auto result = openDevice(deviceName);
      if (!result) return result.status().withContext("--fit device (--device " + deviceName + ")");
      opened = std::move(result).value();
      device = opened.get();
    }
    auto available = device->availableBytes();
    if (!available) return available.status().withContext("--fit device (--device " + deviceName + ")");
    capacityBytes = *available;
    capacityText = "the " + formatBytes(*available) + " " + device->name() + " has available";
  } else {
    auto capacity = parseByteSize(fit);
    if (!capacity) return capacity.status().withContext("--fit");
    capacityBytes = *capacity;
    capacityText = formatBytes(*capacity);
  }
  auto budget = budgetForCapacity(chain, capacityBytes, capacityText);
  if (!budget) return budget.status().withContext("--fit " + fit);
  return FitBudget{std::move(budget).value(), std::move(capacityText)};
}

Result<PlanReport> planToFit(const Chain& chain, const FitBudget& fit) {
  return remat::planToFit(chain, fit.budget, "--fit " + fit.capacityText);
}

}  // namespace remat::cli
