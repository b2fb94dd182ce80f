// libFuzzer target: the plan file reader (plan_file.hpp), the JSON that `remat plan --json` and the
// explorer's Export plan write. What it accepts is placed on two chains (six layers named l1..l6,
// and one whose names repeat); a placed plan is sorted, unique and within 1..n-1, and a refusal's
// message (reading or placing) starts with the file name, is bounded and holds no control character.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_checks.hpp"
#include "remat/input/plan_file.hpp"
#include "remat/model/chain.hpp"

namespace {

remat::Chain sixLayers(bool repeatNames) {
  remat::Chain chain =
      remat::makeAbstractChain("six", 1000, std::vector<remat::LayerNumbers>(6, remat::LayerNumbers{.outBytes = 64}));
  for (std::size_t i = 0; i < chain.layers.size(); ++i)
    chain.layers[i].name = repeatNames ? "l" + std::to_string(i % 3 + 1) : "l" + std::to_string(i + 1);
  return chain;
}

void checkPlaced(const remat::PlacedPlan& placed, const remat::Chain& chain) {
  for (std::size_t i = 0; i < placed.checkpoints.size(); ++i) {
    const std::size_t layer = placed.checkpoints[i];
    if (layer < 1 || layer + 1 > chain.size())
      remat::fuzz::fail("a placed checkpoint is out of range", std::to_string(layer));
    if (i > 0 && layer <= placed.checkpoints[i - 1])
      remat::fuzz::fail("placed checkpoints are not sorted and unique", std::to_string(layer));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const remat::Chain chains[] = {sixLayers(false), sixLayers(true)};
  const std::string source = "fuzz.json";
  auto file = remat::parsePlanFile(std::string(reinterpret_cast<const char*>(data), size), source);
  if (!file) {
    remat::fuzz::checkMessage(file.status().message(), source);
    return 0;
  }
  for (const remat::Chain& chain : chains) {
    auto placed = remat::placePlan(*file, chain);
    if (placed) {
      checkPlaced(*placed, chain);
    } else {
      remat::fuzz::checkMessage(placed.status().message(), source);
    }
  }
  return 0;
}
