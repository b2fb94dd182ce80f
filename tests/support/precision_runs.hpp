#pragma once
// The mixed-precision run tests' shared steps (tests/exec/mixed_precision_*_test.cpp,
// pure_bf16_run_test.cpp, convnext_bf16_run_test.cpp, transformer_pure_bf16_run_test.cpp): a chain
// under a precision and step mode, every step mode's two steps measured as predicted, a zoo model's
// store-all and sqrt's plan, and the gradients of one precision against float32's; and any chain's
// every plan on a poisoning CPU device (the float32 run tests' blocks, layer kinds and models).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
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

// The step modes `modes` (stepMode's numbering) of the chain `make` builds under `precision`: two
// steps of store-all and of optimal's plan each, each op measured as predicted, STEP included.
inline void expectStepModesMeasured(const std::function<Chain(Precision, StepOptions)>& make, Precision precision,
                                    const std::vector<std::size_t>& modes, int threads) {
  cpu::CpuDevice device({.poisonMemory = true, .threads = threads});
  for (std::size_t mode : modes) {
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

// `built` (a test failure when refused) fitted to a poisoning CPU device: store-all and every
// planner's plan measured as predicted, each reproducing store-all's gradients.
inline void expectEveryPlanOnCpu(const Result<Chain>& built, std::uint64_t seed) {
  ASSERT_TRUE(built.isOk()) << built.status().message();
  cpu::CpuDevice device({.poisonMemory = true});
  const Chain chain = fittedTo(*built, device);
  expectEveryPlanReproducesStoreAll(chain, device, seed);
}

// The chain `make` builds under `precision`, fitted to a poisoning CPU device on one thread (one
// thread: the bfloat16 sums' order, hence the gradients, fixed): store-all and every planner's plan
// measured as predicted, each reproducing store-all's gradients; the device holds nothing after.
inline void expectEveryPlanMeasuredOnOneThread(ChainMaker make, Precision precision, std::uint64_t seed) {
  cpu::CpuDevice device({.poisonMemory = true, .threads = 1});
  const Chain chain = fittedTo(make(precision, {}), device);
  SCOPED_TRACE(chain.name + " " + std::string(precisionName(precision)));
  ASSERT_EQ(chain.step.precision, precision);
  expectEveryPlanReproducesStoreAll(chain, device, seed);
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

// SGD, momentum, Adam and AdamW, foreach on and off, gradients static and made on backward, on one
// thread.
inline void expectEveryStepModeMeasured(ChainMaker make, Precision precision = Precision::Bf16Mixed) {
  std::vector<std::size_t> modes(kStepModeCount);
  for (std::size_t mode = 0; mode < kStepModeCount; ++mode) modes[mode] = mode;
  expectStepModesMeasured(make, precision, modes, 1);
}

// Each layer's gradient bytes of one store-all step, as the run returns them (float32's or pure
// bf16's bfloat16 ones; empty for a layer without parameters).
inline std::vector<std::vector<std::byte>> gradientBytesOf(const Chain& built, std::uint64_t seed) {
  cpu::CpuDevice device({.threads = 1});
  const Chain chain = fittedTo(built, device);
  auto interp = Interpreter::create(chain, device, seeded(seed));
  EXPECT_TRUE(interp.isOk()) << interp.status().message();
  if (!interp) return {};
  auto run = (*interp)->run(Plan{}, RunOptions{.captureGradients = true});
  EXPECT_TRUE(run.isOk()) << run.status().message();
  return run ? run->parameterGradients : std::vector<std::vector<std::byte>>{};
}

// Each parameter layer's float32 gradient of one store-all step (layers without parameters left out).
inline std::vector<std::vector<float>> gradientsOf(const Chain& built, std::uint64_t seed) {
  std::vector<std::vector<float>> out;
  for (const auto& bytes : gradientBytesOf(built, seed)) {
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

// Element i of float32 gradient bytes, or of bfloat16 ones (`half`).
inline double gradientValue(const std::vector<std::byte>& bytes, std::size_t i, bool half) {
  if (!half) {
    float value = 0.0f;
    std::memcpy(&value, bytes.data() + 4 * i, 4);
    return value;
  }
  std::uint16_t bits = 0;
  std::memcpy(&bits, bytes.data() + 2 * i, 2);
  const std::uint32_t word = static_cast<std::uint32_t>(bits) << 16;
  float value = 0.0f;
  std::memcpy(&value, &word, 4);
  return value;
}

// The relative difference (L2) of one layer's bfloat16 gradient bytes from its float32 ones.
inline double relativeHalfDifference(const std::vector<std::byte>& plain, const std::vector<std::byte>& half) {
  double difference = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < plain.size() / 4; ++i) {
    difference += std::pow(gradientValue(half, i, true) - gradientValue(plain, i, false), 2);
    norm += std::pow(gradientValue(plain, i, false), 2);
  }
  return std::sqrt(difference / norm);
}

// Each parameter layer's relative difference of its bfloat16 gradient bytes from float32's (a layer
// without parameters left out), each half float32's size.
inline std::vector<double> relativeHalfDifferences(const std::vector<std::vector<std::byte>>& plain,
                                                   const std::vector<std::vector<std::byte>>& half) {
  EXPECT_EQ(plain.size(), half.size());
  std::vector<double> out;
  for (std::size_t l = 0; l < std::min(plain.size(), half.size()); ++l) {
    if (plain[l].empty()) continue;
    EXPECT_EQ(plain[l].size(), half[l].size() * 2) << "layer " << l + 1;
    out.push_back(relativeHalfDifference(plain[l], half[l]));
  }
  return out;
}

// A zoo model under `precision` in each step mode: store-all and sqrt's plan, each from the same
// initial weights, each op as predicted, sqrt's gradients bitwise store-all's.
inline void expectZooSqrtReproducesStoreAll(const Chain& zoo, Precision precision, std::vector<StepOptions> steps) {
  cpu::CpuDevice device;
  for (const StepOptions& step : steps) {
    const Chain chain = fittedTo(withStep(zoo, precision, step), device);
    SCOPED_TRACE(describeStepOptions(chain.step));
    auto sqrt = runPlanner(chain, "sqrt");
    ASSERT_TRUE(sqrt.isOk()) << sqrt.status().message();
    ASSERT_FALSE(sqrt->plan.checkpoints.empty());
    std::vector<std::vector<std::uint64_t>> digests;
    for (const Plan& plan : {Plan{}, sqrt->plan}) {
      auto interp = Interpreter::create(chain, device, seeded(3));
      ASSERT_TRUE(interp.isOk()) << interp.status().message();
      EXPECT_EQ((*interp)->staticBytes(), chain.staticBytes());
      auto run = (*interp)->run(plan, RunOptions{.digestGradients = true});
      ASSERT_TRUE(run.isOk()) << run.status().message();
      expectMatchesSimulation(chain, plan, run->timelines[0]);
      digests.push_back(run->parameterGradientDigests);
    }
    EXPECT_EQ(digests[0], digests[1]);
  }
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

}  // namespace remat::testing
