#pragma once
// Shared by the GPU tests that run whole chains on a real device (cuda_*_test.cpp): opening a
// device, every plan against the model's prediction and store-all, and store-all's gradients
// against the CPU backend's. Callers skip first where no GPU is usable (cudaDeviceAvailable).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "executor_helpers.hpp"
#include "gpu_test_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/gpu/cuda_device.hpp"

namespace remat::gpu {

// A device on the GPU, or null (failing the test, with the reason) where it cannot be created.
inline std::unique_ptr<CudaDevice> openCudaDevice() {
  auto device = createCudaDevice({});
  EXPECT_TRUE(device.isOk()) << device.status().message();
  return device.isOk() ? std::move(device).value() : nullptr;
}

// On a fresh device, every planner's plan measures the prediction op by op and reproduces
// store-all's gradients bit for bit (testing::expectEveryPlanReproducesStoreAll).
inline void expectEveryPlanReproducesStoreAllOnTheGpu(const Chain& built, std::uint64_t seed) {
  auto device = openCudaDevice();
  ASSERT_NE(device, nullptr);
  const Chain chain = testing::fittedTo(built, *device);
  testing::expectEveryPlanReproducesStoreAll(chain, *device, seed);
}

// Store-all's parameter gradients on a fresh device within 1e-4 of the CPU's from the same seeded
// inputs (expectGradientsNearTheCpus).
inline void expectStoreAllGradientsNearTheCpus(const Chain& chain, std::uint64_t seed) {
  const RunOptions options{.captureGradients = true};
  cpu::CpuDevice cpu;
  auto cpuRun = runPlan(testing::fittedTo(chain, cpu), Plan{}, cpu, testing::seeded(seed), options);
  ASSERT_TRUE(cpuRun.isOk()) << cpuRun.status().message();
  auto device = openCudaDevice();
  ASSERT_NE(device, nullptr);
  auto gpuRun = runPlan(testing::fittedTo(chain, *device), Plan{}, *device, testing::seeded(seed), options);
  ASSERT_TRUE(gpuRun.isOk()) << gpuRun.status().message();
  expectGradientsNearTheCpus(chain, *gpuRun, *cpuRun);
}

}  // namespace remat::gpu
