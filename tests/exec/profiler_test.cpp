// The profiler over the Device interface, on the CPU: workspaces are what the device requires,
// times are positive milliseconds, the spec gets both, and no buffer outlives a run, failed or not.
#include "remat/exec/profiler.hpp"

#include <gtest/gtest.h>

#include "chain_helpers.hpp"
#include "remat/cpu/cpu_device.hpp"

namespace remat {
namespace {

Chain smallChain() {
  auto chain =
      testing::chainFromLayers({2, 3, 8, 8}, {testing::convSpec(4, 3, 1, 1), testing::layerSpec("r", LayerKind::Relu),
                                              testing::blockSpec(LayerKind::BasicBlock, 4, 1)});
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? std::move(chain).value() : Chain{};
}

TEST(Profiler, WritesTheCpuWorkspacesAndTimesIntoTheSpec) {
  const Chain chain = smallChain();
  cpu::CpuDevice device;
  auto profile = profileChain(chain, device, {.repeats = 3});
  ASSERT_TRUE(profile.isOk()) << profile.status().message();
  EXPECT_EQ(profile->device, device.describe());
  ASSERT_EQ(profile->layers.size(), chain.size());
  for (const LayerProfile& p : profile->layers) {
    auto wf = device.requiredWorkspaceBytes(p.layer, Pass::Forward);
    auto wb = device.requiredWorkspaceBytes(p.layer, Pass::Backward);
    ASSERT_TRUE(wf.isOk() && wb.isOk());
    EXPECT_EQ(p.fwdWorkspaceBytes, *wf) << p.name;
    EXPECT_EQ(p.bwdWorkspaceBytes, *wb) << p.name;
    EXPECT_GT(p.fwdMs, 0.0) << p.name;
    EXPECT_GT(p.bwdMs, 0.0) << p.name;
    const LayerSpec& spec = profile->spec.layers[chain.layers[p.layer - 1].specIndex];
    EXPECT_TRUE(spec.hasMeasuredWorkspace && spec.hasMeasuredCost) << p.name;
    EXPECT_EQ(spec.numbers.fwdCost, p.fwdMs) << p.name;
  }
  EXPECT_GT(profile->layers.back().fwdWorkspaceBytes, 0u) << "a residual block's arena";
  EXPECT_EQ(device.allocator().buffersHeld(), 0u);
}

TEST(Profiler, AFailedLayerLeavesNothingAllocated) {
  const Chain chain = smallChain();
  // Room for the input and the first layer, not for the block's arena.
  cpu::CpuDevice device({.capacityBytes = chain.inputBytes + 4 * chain.outBytes(1)});
  auto profile = profileChain(chain, device, {.repeats = 1});
  ASSERT_FALSE(profile.isOk());
  EXPECT_EQ(profile.status().code(), ErrorCode::OutOfMemory) << profile.status().message();
  EXPECT_NE(profile.status().message().find("profiling layer "), std::string::npos) << profile.status().message();
  EXPECT_EQ(device.allocator().buffersHeld(), 0u);
  EXPECT_EQ(device.allocator().bytesHeld(), 0u);
}

TEST(Profiler, RefusesZeroRepeats) {
  cpu::CpuDevice device;
  EXPECT_EQ(profileChain(smallChain(), device, {.repeats = 0}).status().code(), ErrorCode::InvalidInput);
}

TEST(Profiler, Median) {
  EXPECT_EQ(medianOf({}), 0.0);
  EXPECT_EQ(medianOf({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(medianOf({4.0, 1.0, 3.0, 2.0}), 2.5);
}

}  // namespace
}  // namespace remat
