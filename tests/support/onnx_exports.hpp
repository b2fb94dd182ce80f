#pragma once
// The committed torch exports of tests/data/onnx/<family>/: their manifest (a JSON object whose
// "models" list names each file with what torch says of it) and their import into a chain.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/chain.hpp"

namespace remat::testing {

// The "models" list of `manifestPath`.
inline std::vector<nlohmann::json> exportManifest(const std::string& manifestPath) {
  std::ifstream in(manifestPath);
  return nlohmann::json::parse(in).at("models").get<std::vector<nlohmann::json>>();
}

// The chain of the export at `path` with its batch set to `batch`; a failed import or build is a
// test failure and gives an empty chain.
inline Chain importedExport(const std::string& path, std::int64_t batch) {
  auto result = importOnnxFile(path, {.batch = batch});
  EXPECT_TRUE(result.isOk()) << result.status().message();
  if (!result) return {};
  auto chain = buildChain(result->spec);
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain ? *chain : Chain{};
}

}  // namespace remat::testing
