// The profiler over the Device interface, on the CPU: workspaces are what the device requires,
// times are positive milliseconds, the spec gets both, and no buffer outlives a run, failed or not.
#include "remat/exec/profiler.hpp"

#include <gtest/gtest.h>

#include <algorithm>

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

// Workspaces on the fly: an unprofiled chain (inferred wf = wb = 0, a block's bare arena) gets the
// CPU's needs written in; layers that already cover them, and larger stated workspaces, stay.
TEST(FitWorkspaces, RaisesWhatTheDeviceNeedsAndNothingElse) {
  const Chain chain = smallChain();
  cpu::CpuDevice device;
  auto fit = fitWorkspacesToDevice(chain, device);
  ASSERT_TRUE(fit.isOk()) << fit.status().message();
  ASSERT_EQ(fit->chain.size(), chain.size());
  EXPECT_FALSE(fit->raisedLayers.empty());
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    const std::uint64_t wf = *device.requiredWorkspaceBytes(l, Pass::Forward);
    const std::uint64_t wb = *device.requiredWorkspaceBytes(l, Pass::Backward);
    const LayerNumbers& fitted = fit->chain.at(l);
    EXPECT_EQ(fitted.fwdWorkspaceBytes, std::max(wf, chain.at(l).fwdWorkspaceBytes)) << "layer " << l;
    EXPECT_EQ(fitted.bwdWorkspaceBytes, std::max(wb, chain.at(l).bwdWorkspaceBytes)) << "layer " << l;
    const bool raised = wf > chain.at(l).fwdWorkspaceBytes || wb > chain.at(l).bwdWorkspaceBytes;
    EXPECT_EQ(raised, std::count(fit->raisedLayers.begin(), fit->raisedLayers.end(), l) == 1) << "layer " << l;
    EXPECT_EQ(fitted.outBytes, chain.at(l).outBytes);
  }
  // Fitting a fitted chain changes nothing.
  auto again = fitWorkspacesToDevice(fit->chain, device);
  ASSERT_TRUE(again.isOk());
  EXPECT_TRUE(again->raisedLayers.empty());
  // A chain that states more (say, a GPU profile) keeps it.
  ChainSpec generous = chain.spec;
  generous.layers[0].hasMeasuredWorkspace = true;
  generous.layers[0].numbers.fwdWorkspaceBytes = 1 << 24;
  generous.layers[0].numbers.bwdWorkspaceBytes = 1 << 24;
  auto stated = buildChain(generous);
  ASSERT_TRUE(stated.isOk());
  auto kept = fitWorkspacesToDevice(*stated, device);
  ASSERT_TRUE(kept.isOk());
  EXPECT_EQ(kept->chain.at(1).fwdWorkspaceBytes, 1u << 24);
  EXPECT_EQ(std::count(kept->raisedLayers.begin(), kept->raisedLayers.end(), 1u), 0);
  EXPECT_EQ(device.allocator().buffersHeld(), 0u) << "fitting allocates nothing";
}

TEST(Profiler, Median) {
  EXPECT_EQ(medianOf({}), 0.0);
  EXPECT_EQ(medianOf({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(medianOf({4.0, 1.0, 3.0, 2.0}), 2.5);
}

}  // namespace
}  // namespace remat
