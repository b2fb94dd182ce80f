// fp16-mixed's GradScaler hook (Device::unscaleGradients, core/src/exec/optimizer_run.cpp): a
// device without a GradScaler refuses it, naming itself, and the CPU backend, which refuses
// fp16-mixed (oneDNN 2.6), stops an fp16-mixed training step at prepare with that refusal's
// message, before any STEP could reach the hook. The GPU's scaler runs in tests/gpu/cuda_fp16_run_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chain_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/precision.hpp"

namespace remat {
namespace {

TEST(GradScalerHook, ADeviceWithoutAScalerRefusesNamingItself) {
  cpu::CpuDevice device;
  const std::vector<DeviceBuffer> grads(3);
  auto found = device.unscaleGradients(grads);
  ASSERT_FALSE(found.isOk());
  EXPECT_EQ(found.status().code(), ErrorCode::InvalidInput);
  EXPECT_NE(found.status().message().find("the cpu device has no GradScaler for fp16-mixed"), std::string::npos)
      << found.status().message();
}

TEST(GradScalerHook, TheCpuRefusesAnFp16MixedStepAtPrepare) {
  auto chain = parseChain(R"({
    "format": "remat-chain/1", "name": "mlp", "input": {"shape": [4, 16], "dtype": "float32"},
    "layers": [{"kind": "linear", "name": "fc1", "out_features": 8}, {"kind": "relu", "name": "relu"},
               {"kind": "linear", "name": "fc2", "out_features": 4}]})",
                          "grad_scaler_hook_test.cpp");
  ASSERT_TRUE(chain.isOk()) << chain.status().message();
  StepOptions step{OptimizerKind::Sgd, false, GradMode::Static};
  step.precision = Precision::Fp16Mixed;
  auto stepped = withStepOptions(*chain, step);
  ASSERT_TRUE(stepped.isOk()) << stepped.status().message();
  cpu::CpuDevice device;
  auto run = runPlan(*stepped, Plan{}, device);
  ASSERT_FALSE(run.isOk());
  EXPECT_EQ(run.status().code(), ErrorCode::InvalidInput);
  EXPECT_NE(run.status().message().find("precision fp16-mixed"), std::string::npos) << run.status().message();
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

}  // namespace
}  // namespace remat
