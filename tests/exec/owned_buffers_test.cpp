// OwnedBuffers over the CPU's allocator: what it holds goes back on every exit path, a buffer
// handed to the caller stays allocated, and misuse is an error rather than a double free.
#include "remat/exec/owned_buffers.hpp"

#include <gtest/gtest.h>

#include "remat/cpu/cpu_device.hpp"

namespace remat {
namespace {

TEST(OwnedBuffers, ReleasesWhatItHoldsWhenItGoesOutOfScope) {
  cpu::CpuAllocator allocator;
  {
    OwnedBuffers owned(allocator);
    ASSERT_TRUE(owned.allocate(1000, "a").isOk());
    ASSERT_TRUE(owned.allocate(0, "empty").isOk());
    EXPECT_EQ(owned.size(), 2u);
    EXPECT_EQ(allocator.bytesHeld(), 1000u);
  }
  EXPECT_EQ(allocator.bytesHeld(), 0u);
  EXPECT_EQ(allocator.buffersHeld(), 0u);
}

TEST(OwnedBuffers, ABufferHandedToTheCallerOutlivesTheScope) {
  cpu::CpuAllocator allocator;
  DeviceBuffer kept;
  {
    OwnedBuffers owned(allocator);
    auto buffer = owned.allocate(64, "kept");
    ASSERT_TRUE(buffer.isOk());
    ASSERT_TRUE(owned.allocate(32, "dropped").isOk());
    auto handed = owned.releaseToCaller(*buffer);
    ASSERT_TRUE(handed.isOk());
    kept = *handed;
    EXPECT_FALSE(owned.holds(kept));
    EXPECT_FALSE(owned.releaseToCaller(kept).isOk()) << "a buffer is handed over once";
  }
  EXPECT_EQ(allocator.bytesHeld(), 64u);
  OwnedBuffers adopter(allocator);
  ASSERT_TRUE(adopter.adopt(kept).isOk());
  EXPECT_EQ(adopter.adopt(kept).code(), ErrorCode::Internal) << "the same handle twice";
  EXPECT_EQ(adopter.adopt(DeviceBuffer{}).code(), ErrorCode::Internal);
  ASSERT_TRUE(adopter.release(kept).isOk());
  EXPECT_EQ(allocator.bytesHeld(), 0u);
  EXPECT_EQ(adopter.release(kept).code(), ErrorCode::Internal) << "no longer held";
}

TEST(OwnedBuffers, AllocationErrorsNameWhatWasAllocated) {
  cpu::CpuAllocator allocator({.capacityBytes = 100});
  OwnedBuffers owned(allocator);
  ASSERT_TRUE(owned.allocate(80, "first").isOk());
  auto tooMuch = owned.allocate(40, "layer 2, forward workspace");
  ASSERT_FALSE(tooMuch.isOk());
  EXPECT_EQ(tooMuch.status().code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(tooMuch.status().message().rfind("layer 2, forward workspace: ", 0), 0u) << tooMuch.status().message();
  EXPECT_EQ(owned.size(), 1u);
}

TEST(OwnedBuffers, ReleaseAllTriesEveryBufferAndReportsTheFirstError) {
  cpu::CpuAllocator allocator;
  OwnedBuffers owned(allocator);
  auto a = owned.allocate(16, "a");
  auto b = owned.allocate(16, "b");
  ASSERT_TRUE(a.isOk() && b.isOk());
  ASSERT_TRUE(allocator.release(*b).isOk());  // freed behind its back: releasing it again fails
  const Status status = owned.releaseAll();
  EXPECT_EQ(status.code(), ErrorCode::Internal) << status.message();
  EXPECT_EQ(owned.size(), 0u);
  EXPECT_EQ(allocator.buffersHeld(), 0u) << "a was still released";
}

}  // namespace
}  // namespace remat
