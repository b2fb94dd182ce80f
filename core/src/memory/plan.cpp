#include "remat/memory/plan.hpp"

#include <charconv>

#include "remat/base/text.hpp"

namespace remat {

Status validatePlan(const Plan& plan, std::size_t layerCount) {
  const auto& c = plan.checkpoints;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c[i] < 1 || c[i] >= layerCount) {  // (not c + 1 > n: that wraps at SIZE_MAX)
      return Status::invalid("checkpoint " + std::to_string(c[i]) + " (position " + std::to_string(i + 1) +
                             ") is out of range: checkpoints must lie in 1.." +
                             (layerCount >= 2 ? std::to_string(layerCount - 1) : std::string("0 (none allowed)")) +
                             " for a chain of " + std::to_string(layerCount) + " layers");
    }
    if (i > 0 && c[i] <= c[i - 1]) {
      return Status::invalid("checkpoints must be sorted and unique: " + std::to_string(c[i]) + " (position " +
                             std::to_string(i + 1) + ") follows " + std::to_string(c[i - 1]));
    }
  }
  return Status::ok();
}

Result<Plan> parseCheckpointList(const std::string& text) {
  Plan plan;
  if (text.empty()) return plan;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    const std::size_t end = comma == std::string::npos ? text.size() : comma;
    std::string item = text.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    std::size_t value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      return Status::invalid(
          "checkpoint list " + quoteText(text) + ": item " + std::to_string(plan.checkpoints.size() + 1) + " (" +
          quoteText(item, 40) + ") is not " +
          (ec == std::errc::result_out_of_range ? "a layer number (too large)" : "a non-negative integer"));
    }
    plan.checkpoints.push_back(value);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return plan;
}

std::string formatCheckpointList(const Plan& plan) {
  std::string out;
  for (std::size_t i = 0; i < plan.checkpoints.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(plan.checkpoints[i]);
  }
  return out;
}

}  // namespace remat
