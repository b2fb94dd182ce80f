// bf16 and bf16-mixed on a CPU without oneDNN's bfloat16 kernels (no AVX-512): CpuDevice::prepare
// refuses them by name, with the instruction set and what to run instead; a CPU with them prepares
// them. Abstract layers are bytes and need no kernels either way.
#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/model/precision.hpp"
#include "remat/model/random_chain.hpp"

namespace remat {
namespace {

Chain stepped(const Chain& chain, Precision precision) {
  auto out = withStepOptions(chain, {.optimizer = OptimizerKind::None, .precision = precision});
  EXPECT_TRUE(out.isOk()) << out.status().message();
  return out.isOk() ? std::move(out).value() : chain;
}

TEST(CpuBfloat16Support, PreparesOrRefusesByName) {
  const Chain resnet = testing::zooBuilt("resnet18", ZooOptions{.batch = 2, .resolution = 32, .numClasses = 10});
  const Status support = cpu::cpuBfloat16Support();
  for (Precision precision : {Precision::Bf16Mixed, Precision::Bf16}) {
    cpu::CpuDevice device;
    const Status prepared = device.prepare(stepped(resnet, precision));
    if (support.isOk()) {
      EXPECT_TRUE(prepared.isOk()) << prepared.message();
      continue;
    }
    EXPECT_EQ(prepared.code(), ErrorCode::InvalidInput);
    EXPECT_NE(prepared.message().find("precision " + std::string(precisionName(precision)) + " on the cpu: oneDNN"),
              std::string::npos)
        << prepared.message();
    EXPECT_NE(prepared.message().find("(its instruction set: "), std::string::npos) << prepared.message();
    EXPECT_NE(prepared.message().find("run fp32 on this CPU"), std::string::npos) << prepared.message();
  }
  cpu::CpuDevice device;
  const Status fp32 = device.prepare(stepped(resnet, Precision::Fp32));
  EXPECT_TRUE(fp32.isOk()) << fp32.message();
}

TEST(CpuBfloat16Support, AbstractChainsNeedNoKernels) {
  const Chain plain = makeRandomChain(mixedRandomChainOptions(5, 77));
  cpu::CpuDevice device;
  const Status prepared = device.prepare(stepped(plain, Precision::Bf16));
  EXPECT_TRUE(prepared.isOk()) << prepared.message();
}

}  // namespace
}  // namespace remat
