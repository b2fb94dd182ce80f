#pragma once
// Small builders shared by core tests.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "remat/chain.hpp"
#include "remat/chain_file.hpp"

namespace remat::testing {

inline LayerNumbers numbers(std::uint64_t a, bool in = true, bool out = false, std::uint64_t e = 0,
                            std::uint64_t wf = 0, std::uint64_t wb = 0) {
  LayerNumbers m;
  m.outBytes = a;
  m.needsInput = in;
  m.needsOutput = out;
  m.extraBytes = e;
  m.fwdWorkspaceBytes = wf;
  m.bwdWorkspaceBytes = wb;
  return m;
}

// Builds a chain from a chain-file JSON object (golden.json's "chain" entries); fails the test on error.
inline Chain chainFromJson(const nlohmann::json& j) {
  auto spec = chainSpecFromJson(j, "golden.json");
  EXPECT_TRUE(spec.isOk()) << spec.status().message();
  auto chain = buildChain(spec.value());
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return std::move(chain).value();
}

}  // namespace remat::testing
