#pragma once
// The mixed-precision run tests' shared steps (tests/exec/mixed_precision_*_test.cpp,
// pure_bf16_run_test.cpp): a chain under a precision and step mode, every step mode's two steps
// measured as predicted, and the gradients of one precision against float32's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "chain_helpers.hpp"
#include "executor_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/precision.hpp"

namespace remat::testing {

// `chain` under `precision` and `step` (a test failure, and the chain as it was, when refused).
inline Chain withStep(const Chain& chain, Precision precision, StepOptions step) {
  step.precision = precision;
  auto stepped = withStepOptions(chain, step);
  EXPECT_TRUE(stepped.isOk()) << stepped.status().message();
  return stepped ? std::move(stepped).value() : chain;
}

using ChainMaker = Chain (*)(Precision, StepOptions);

// SGD, momentum, Adam and AdamW, foreach on and off, gradients static and made on backward: two
// steps of store-all and of optimal's plan under `precision`, each op measured as predicted, STEP
// included.
inline void expectEveryStepModeMeasured(ChainMaker make, Precision precision = Precision::Bf16Mixed) {
  cpu::CpuDevice device({.poisonMemory = true, .threads = 1});
  for (std::size_t mode = 0; mode < kStepModeCount; ++mode) {
    const Chain chain = fittedTo(make(precision, stepMode(mode)), device);
    SCOPED_TRACE(describeStepOptions(chain.step));
    ASSERT_EQ(chain.step.precision, precision);
    auto optimal = runPlanner(chain, "optimal");
    ASSERT_TRUE(optimal.isOk()) << optimal.status().message();
    for (const Plan& plan : {Plan{}, optimal->plan}) {
      auto interp = Interpreter::create(chain, device, seeded(mode));
      ASSERT_TRUE(interp.isOk()) << interp.status().message();
      EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
      auto run = (*interp)->run(plan, RunOptions{.steps = 2});
      ASSERT_TRUE(run.isOk()) << run.status().message();
      for (const Timeline& t : run->timelines) expectMatchesSimulation(chain, plan, t);
      EXPECT_EQ(run->timelines[0].entries.back().op.kind == OpKind::Step, hasOptimizerStep(chain.step));
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

// Each parameter layer's float32 gradient of one store-all step (layers without parameters left out).
inline std::vector<std::vector<float>> gradientsOf(const Chain& built, std::uint64_t seed) {
  cpu::CpuDevice device({.threads = 1});
  const Chain chain = fittedTo(built, device);
  auto interp = Interpreter::create(chain, device, seeded(seed));
  EXPECT_TRUE(interp.isOk()) << interp.status().message();
  if (!interp) return {};
  auto run = (*interp)->run(Plan{}, RunOptions{.captureGradients = true});
  EXPECT_TRUE(run.isOk()) << run.status().message();
  if (!run) return {};
  std::vector<std::vector<float>> out;
  for (const auto& bytes : run->parameterGradients) {
    std::vector<float> values(bytes.size() / sizeof(float));
    if (values.empty()) continue;
    std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
    out.push_back(std::move(values));
  }
  return out;
}

// Each parameter layer's relative difference (L2) of its float32 gradient under bf16-mixed from
// float32's, for the same weights and batch.
inline std::vector<double> relativeGradientDifferences(ChainMaker make, std::uint64_t seed) {
  const auto plain = gradientsOf(make(Precision::Fp32, {}), seed);
  const auto mixed = gradientsOf(make(Precision::Bf16Mixed, {}), seed);
  EXPECT_EQ(plain.size(), mixed.size());
  std::vector<double> out;
  for (std::size_t l = 0; l < std::min(plain.size(), mixed.size()); ++l) {
    EXPECT_EQ(plain[l].size(), mixed[l].size()) << "parameter layer " << l + 1;
    if (plain[l].size() != mixed[l].size()) continue;
    double difference = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < plain[l].size(); ++i) {
      difference += std::pow(double(mixed[l][i]) - plain[l][i], 2);
      norm += std::pow(double(plain[l][i]), 2);
    }
    out.push_back(std::sqrt(difference / norm));
  }
  return out;
}

}  // namespace remat::testing
