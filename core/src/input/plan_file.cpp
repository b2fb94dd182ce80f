// Plan files (plan_file.hpp): strict JSON through JsonDocument, then the checkpoints placed on a
// chain by its layers' names or numbers.
#include "remat/input/plan_file.hpp"

#include <algorithm>
#include <map>

#include "remat/base/text.hpp"
#include "remat/input/input_file.hpp"
#include "remat/input/json_document.hpp"
#include "remat/input/json_fields.hpp"

namespace remat {
namespace {

constexpr std::size_t kPlanJsonDepth = 8;

Status readCheckpoints(io::FieldReader& r, PlanFile& plan) {
  const nlohmann::json* list = r.member("checkpoints");
  if (!list) return r.error("checkpoints", "is missing (a list of layer numbers)");
  plan.checkpointsPlace = r.document().where(*list);
  if (!list->is_array())
    return r.error("checkpoints", "must be a list of layer numbers, not " + r.document().describe(*list));
  for (std::size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& value = (*list)[i];
    if (!value.is_number_unsigned())
      return r.error("checkpoints",
                     "item " + std::to_string(i) + " must be a layer number, not " + r.document().describe(value));
    plan.checkpoints.push_back(value.get<std::size_t>());
  }
  return Status::ok();
}

Status readCheckpointNames(io::FieldReader& r, PlanFile& plan) {
  const nlohmann::json* names = r.member("checkpoint_names");
  if (!names) return Status::ok();
  if (!names->is_array() || names->size() != plan.checkpoints.size())
    return r.error("checkpoint_names", "must be a list of " + std::to_string(plan.checkpoints.size()) +
                                           " layer names (one per checkpoint), not " + r.document().describe(*names));
  for (std::size_t i = 0; i < names->size(); ++i) {
    const nlohmann::json& name = (*names)[i];
    if (name.is_null()) {
      plan.checkpointNames.emplace_back(std::nullopt);
    } else if (name.is_string()) {
      plan.checkpointNames.emplace_back(name.get<std::string>());
    } else {
      return r.error("checkpoint_names",
                     "item " + std::to_string(i) + " must be a layer name or null, not " + r.document().describe(name));
    }
  }
  return Status::ok();
}

// Sorted, unique, each in 1..n-1; the message names the first that is not.
Status checkNumbers(const PlanFile& file, const std::vector<std::size_t>& checkpoints, const Chain& chain) {
  const std::size_t n = chain.size();
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    const std::size_t layer = checkpoints[i];
    std::string why;
    if (layer < 1 || layer + 1 > n)
      why = "layer " + std::to_string(layer) + " is not a checkpoint of chain " + quoteText(chain.name, 40) + " (its " +
            std::to_string(n) + " layers allow 1.." + std::to_string(n > 0 ? n - 1 : 0) + ")";
    else if (i > 0 && layer <= checkpoints[i - 1])
      why = "layer " + std::to_string(layer) + " comes after layer " + std::to_string(checkpoints[i - 1]) +
            " (checkpoints are sorted and unique)";
    if (!why.empty())
      return Status::invalid(file.checkpointsPlace + ": checkpoints[" + std::to_string(i) + "]: " + why);
  }
  return Status::ok();
}

// The layer numbers of the file's names, when every name is exactly one layer's of the chain.
std::optional<std::vector<std::size_t>> byNames(const PlanFile& file, const Chain& chain) {
  if (file.checkpointNames.empty()) return std::nullopt;
  std::map<std::string, std::size_t> layers;  // name -> layer number (1-based); 0: the name repeats
  for (std::size_t l = 0; l < chain.layers.size(); ++l) {
    auto [it, inserted] = layers.emplace(chain.layers[l].name, l + 1);
    if (!inserted) it->second = 0;
  }
  std::vector<std::size_t> numbers;
  for (const std::optional<std::string>& name : file.checkpointNames) {
    const auto it = name ? layers.find(*name) : layers.end();
    if (it == layers.end() || it->second == 0) return std::nullopt;
    numbers.push_back(it->second);
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

}  // namespace

Result<PlanFile> parsePlanFile(std::string text, const std::string& source) {
  auto document = JsonDocument::parse(std::move(text), source, kPlanJsonDepth);
  if (!document) return document.status();
  if (!document->root().is_object())
    return Status::invalid(document->where(document->root()) +
                           ": a plan file is a JSON object (as `remat plan --json` writes), not " +
                           document->describe(document->root()));
  io::FieldReader r(*document, document->root(), "");
  PlanFile plan;
  plan.source = source;
  REMAT_RETURN_IF_ERROR(readCheckpoints(r, plan));
  REMAT_RETURN_IF_ERROR(readCheckpointNames(r, plan));
  if (r.has("planner")) REMAT_RETURN_IF_ERROR(r.readString("planner", plan.planner, false));
  if (r.has("chain")) REMAT_RETURN_IF_ERROR(r.readString("chain", plan.chain, false));
  return plan;
}

Result<PlanFile> readPlanFile(const std::string& path) {
  auto text = readInputFile(path, kMaxPlanFileBytes, "plan file");
  if (!text) return text.status();
  return parsePlanFile(std::move(text).value(), path);
}

Result<PlacedPlan> placePlan(const PlanFile& file, const Chain& chain) {
  if (std::optional<std::vector<std::size_t>> named = byNames(file, chain)) {
    if (checkNumbers(file, *named, chain).isOk() && std::adjacent_find(named->begin(), named->end()) == named->end())
      return PlacedPlan{std::move(named).value(), true};
  }
  const Status numbers = checkNumbers(file, file.checkpoints, chain);
  if (!numbers) {
    if (file.checkpointNames.empty()) return numbers;
    return Status::invalid(numbers.message() + "; nor do its checkpoint_names all name layers of that chain");
  }
  return PlacedPlan{file.checkpoints, false};
}

}  // namespace remat
