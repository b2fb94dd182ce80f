#pragma once
// Loads shared/spec/examples/golden.json for tests.
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace remat::testing {

inline std::string specPath(const std::string& relative) { return std::string(REMAT_SPEC_DIR) + "/" + relative; }

inline nlohmann::json loadGolden() {
  std::ifstream in(specPath("examples/golden.json"));
  if (!in) throw std::runtime_error("cannot open " + specPath("examples/golden.json"));
  return nlohmann::json::parse(in);
}

// The "examples" array, by value: `for (const auto& e : goldenExamples())` keeps it alive through
// the loop, where `for (const auto& e : loadGolden()["examples"])` would read a destroyed object.
inline nlohmann::json goldenExamples() { return loadGolden().at("examples"); }

}  // namespace remat::testing
