#pragma once
// A plan is a checkpoint set C, a subset of {1..n-1} (docs/memory-model.md section 2).
#include <cstdint>
#include <string>
#include <vector>

#include "remat/base/status.hpp"

namespace remat {

struct Plan {
  std::vector<std::size_t> checkpoints;  // sorted, unique, each in 1..n-1
  bool operator==(const Plan&) const = default;
};

// Checks that the checkpoints are sorted, unique and within 1..n-1; the error names the offending
// position and value.
Status validatePlan(const Plan& plan, std::size_t layerCount);

// "3,7,12" -> {3, 7, 12}; "" -> {} (store all). Rejects anything else with a message.
Result<Plan> parseCheckpointList(const std::string& text);
std::string formatCheckpointList(const Plan& plan);

}  // namespace remat
