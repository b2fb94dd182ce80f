#pragma once
// Reference values made with Debian's PyTorch by a committed script (scripts/make-*-reference.py),
// read by the tests that check our kernels' values and gradients against PyTorch's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace remat::test {

// tests/data/<folder>/torch_reference.json, parsed once per folder.
inline const nlohmann::json& torchReference(const std::string& folder) {
  static std::map<std::string, nlohmann::json> parsed;
  auto it = parsed.find(folder);
  if (it == parsed.end()) {
    std::ifstream in(std::string(REMAT_TEST_DATA_DIR) + "/" + folder + "/torch_reference.json");
    it = parsed.emplace(folder, nlohmann::json::parse(in)).first;
  }
  return it->second;
}

// scripts/torch_reference_values.py's spread(): count values scale * sin(1.3 i + phase) (computed
// in double as Python does, then float32 as torch.tensor makes them), for references that leave
// their inputs and parameters out.
inline std::vector<float> spread(std::size_t count, double phase, double scale) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>(scale * std::sin(1.3 * double(i) + phase));
  return values;
}

// |a - b| <= 1e-4 * the reference tensor's largest magnitude: relative to its scale, since single
// elements near zero (sigmoid's far tail) have no meaningful relative error.
inline void expectCloseToTorch(const std::vector<float>& got, const nlohmann::json& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-12;
  for (const nlohmann::json& v : want) scale = std::max(scale, std::abs(v.get<double>()));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double w = want[i].get<double>();
    if (std::abs(double(got[i]) - w) > 1e-4 * scale && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", PyTorch " << w;
  }
  EXPECT_EQ(bad, 0u) << what;
}

}  // namespace remat::test
