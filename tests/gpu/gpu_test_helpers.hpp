#pragma once
// Shared by the GPU tests (tests/gpu): a run's parameter gradients against the CPU backend's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "remat/exec/interpreter.hpp"

namespace remat::gpu {

inline std::vector<float> asFloats(const std::vector<std::byte>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// Every layer's parameter gradients within 1e-4 of the CPU's (relative to the largest), and not
// all zero where the layer has parameters (all-zero gradients test nothing).
inline void expectGradientsNearTheCpus(const Chain& chain, const RunResult& gpuRun, const RunResult& cpuRun) {
  ASSERT_EQ(gpuRun.parameterGradients.size(), cpuRun.parameterGradients.size());
  for (std::size_t l = 0; l < chain.size(); ++l) {
    const std::vector<float> g = asFloats(gpuRun.parameterGradients[l]);
    const std::vector<float> c = asFloats(cpuRun.parameterGradients[l]);
    ASSERT_EQ(g.size(), c.size()) << "layer " << l + 1;
    double scale = 0.0, diff = 0.0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(c[i])));
      diff = std::max(diff, std::fabs(static_cast<double>(g[i]) - static_cast<double>(c[i])));
    }
    EXPECT_LE(diff, 1e-4 * scale + 1e-30) << "layer " << l + 1 << " ('" << chain.layers[l].name
                                          << "'): max |gpu - cpu| " << diff << ", max |cpu| " << scale;
    if (!c.empty()) {
      EXPECT_GT(scale, 0.0) << "layer " << l + 1 << ": all-zero gradients test nothing";
    }
  }
}

}  // namespace remat::gpu
