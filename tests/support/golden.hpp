#pragma once
// Loads the memory model's test vectors, tests/data/golden.json (tests/data/README.md says where
// they come from and how to check them).
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace remat::testing {

inline std::string testDataPath(const std::string& relative) {
  return std::string(REMAT_TEST_DATA_DIR) + "/" + relative;
}

inline nlohmann::json loadGolden() {
  const std::string path = testDataPath("golden.json");
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

// The "examples" array, by value: `for (const auto& e : goldenExamples())` keeps it alive through
// the loop, where `for (const auto& e : loadGolden()["examples"])` would read a destroyed object.
inline nlohmann::json goldenExamples() { return loadGolden().at("examples"); }

}  // namespace remat::testing
