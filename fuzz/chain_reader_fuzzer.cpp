// libFuzzer target: chain files (remat-chain/1). Any text either loads, and then writes back to
// text that loads to the same chain, or is refused with a placed, bounded message; small chains
// that load are also simulated and planned, so shape inference's numbers meet the simulator.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_checks.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/planners/planners.hpp"

namespace {

constexpr const char* kSource = "fuzz.json";
constexpr std::size_t kMaxPlannedLayers = 200;  // dp is cubic: keep each input fast

void checkLoaded(const remat::Chain& chain) {
  const std::string text = remat::chainSpecToText(chain.spec);
  auto again = remat::parseChain(text, "again.json");
  if (!again) remat::fuzz::fail("a written chain does not load", again.status().message());
  if (remat::chainSpecToJson(again->spec) != remat::chainSpecToJson(chain.spec))
    remat::fuzz::fail("a written chain loads as another chain", text.substr(0, 2000));
  if (chain.size() > kMaxPlannedLayers) return;
  auto simulation = remat::simulate(chain, remat::Plan{});
  if (!simulation) remat::fuzz::fail("a loaded chain does not simulate", simulation.status().message());
  for (const char* planner : {"linear", "optimal", "dp", "greedy"}) {
    auto planned = remat::runPlanner(chain, planner);
    if (!planned) remat::fuzz::fail("a planner fails on a loaded chain", planned.status().message());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto chain = remat::parseChain(text, kSource);
  if (chain) {
    checkLoaded(*chain);
  } else {
    remat::fuzz::checkMessage(chain.status().message(), kSource);
  }
  return 0;
}
