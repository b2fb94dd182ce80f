#pragma once
// Plan files: the JSON that `remat plan --json` and the explorer's File > Export plan write, read
// back (the explorer's File > Open plan, `remat simulate --plan`, `remat run --plan`). Of the file,
// `checkpoints` (layer numbers, 1..n-1) is required; `checkpoint_names` (the layers' names, null for
// an unknown one), `planner` and `chain` are read when present; the scores are not (they are
// recomputed from the chain). A plan is placed on a chain by its layer names when every name is a
// layer of that chain (the chain was edited: the checkpoints follow their layers), by its numbers
// otherwise; a plan that fits neither is refused with a placed message.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat {

inline constexpr std::uint64_t kMaxPlanFileBytes = std::uint64_t{16} << 20;  // 16 MiB

struct PlanFile {
  std::string source;   // the file, for messages
  std::string planner;  // "" when the file names none
  std::string chain;    // the chain's name when the file gives it, else ""
  std::vector<std::size_t> checkpoints;
  std::vector<std::optional<std::string>> checkpointNames;  // empty, or one per checkpoint
  std::string checkpointsPlace;                             // "plan.json:3:4": where `checkpoints` is, for messages
};

// `source` names the text in messages ("plan.json:3:18: ...").
Result<PlanFile> parsePlanFile(std::string text, const std::string& source);
// Reads at most kMaxPlanFileBytes.
Result<PlanFile> readPlanFile(const std::string& path);

struct PlacedPlan {
  std::vector<std::size_t> checkpoints;  // sorted, unique, within 1..n-1 of the chain
  bool byNames = false;                  // placed by the layers' names (else by their numbers)
};

// The file's checkpoints on `chain`, by names or by numbers as above.
Result<PlacedPlan> placePlan(const PlanFile& file, const Chain& chain);

}  // namespace remat
