// OwnedBuffer and OwnedBuffers give back every byte on every exit path, hand buffers over only
// when asked, and never release a buffer twice.
#include "remat/exec/owned_buffers.hpp"

#include <gtest/gtest.h>

#include "remat/cpu/cpu_device.hpp"

namespace remat {
namespace {

TEST(OwnedBuffer, ReleasesOnDestructionAndOnMoveAssignment) {
  cpu::CpuAllocator allocator;
  {
    auto a = OwnedBuffer::allocate(allocator, 100);
    ASSERT_TRUE(a.isOk()) << a.status().message();
    EXPECT_EQ(allocator.bytesHeld(), 100u);
    auto b = OwnedBuffer::allocate(allocator, 40);
    ASSERT_TRUE(b.isOk()) << b.status().message();
    *a = std::move(*b);  // a's 100 bytes go back, a now owns b's 40
    EXPECT_EQ(allocator.bytesHeld(), 40u);
    EXPECT_FALSE(b->valid());
    EXPECT_EQ(a->get().bytes, 40u);
  }
  EXPECT_EQ(allocator.bytesHeld(), 0u);
  EXPECT_EQ(allocator.buffersHeld(), 0u);
}

TEST(OwnedBuffer, ReleaseNowForgetAndAnEmptyBuffer) {
  cpu::CpuAllocator allocator;
  DeviceBuffer handedOver;
  {
    auto released = OwnedBuffer::allocate(allocator, 8);
    ASSERT_TRUE(released.isOk());
    EXPECT_TRUE(released->release().isOk());
    EXPECT_FALSE(released->valid());
    EXPECT_TRUE(released->release().isOk()) << "nothing held: nothing to release";
    auto forgotten = OwnedBuffer::allocate(allocator, 16);
    ASSERT_TRUE(forgotten.isOk());
    handedOver = forgotten->forget();
    EXPECT_FALSE(forgotten->valid());
    OwnedBuffer empty;
    EXPECT_FALSE(empty.valid());
  }
  EXPECT_EQ(allocator.bytesHeld(), 16u) << "a forgotten buffer is the caller's";
  EXPECT_TRUE(allocator.release(handedOver).isOk());
}

TEST(OwnedBuffer, AllocationErrorsNameWhatWasAllocated) {
  cpu::CpuAllocator allocator({.capacityBytes = 64});
  auto tooBig = OwnedBuffer::allocate(allocator, 65, "conv1 workspace");
  ASSERT_FALSE(tooBig.isOk());
  EXPECT_EQ(tooBig.status().code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(tooBig.status().message().rfind("conv1 workspace: ", 0), 0u) << tooBig.status().message();
  auto bare = OwnedBuffer::allocate(allocator, 65);
  ASSERT_FALSE(bare.isOk());
  EXPECT_EQ(bare.status().message().find("workspace"), std::string::npos) << bare.status().message();
  EXPECT_EQ(allocator.bytesHeld(), 0u);
}

TEST(OwnedBuffers, ReleasesWhatItStillHolds) {
  cpu::CpuAllocator allocator;
  DeviceBuffer kept;
  {
    OwnedBuffers buffers(allocator);
    auto a = buffers.allocate(10, "a");
    auto b = buffers.allocate(20, "b");
    auto c = buffers.allocate(30, "c");
    ASSERT_TRUE(a.isOk() && b.isOk() && c.isOk());
    EXPECT_EQ(buffers.size(), 3u);
    EXPECT_TRUE(buffers.release(*a).isOk()) << "the oldest, not only the newest";
    EXPECT_EQ(allocator.bytesHeld(), 50u);
    buffers.forget(*c);
    kept = *c;
    EXPECT_EQ(buffers.size(), 1u);
  }
  EXPECT_EQ(allocator.bytesHeld(), 30u) << "only the forgotten buffer outlives the set";
  {
    OwnedBuffers buffers(allocator);
    buffers.adopt(kept);
  }
  EXPECT_EQ(allocator.bytesHeld(), 0u) << "an adopted buffer is released with the set";
}

TEST(OwnedBuffers, NeverReleasesABufferTwice) {
  cpu::CpuAllocator allocator({.capacityBytes = 100});
  OwnedBuffers buffers(allocator);
  auto a = buffers.allocate(10, "a");
  ASSERT_TRUE(a.isOk());
  EXPECT_TRUE(buffers.release(*a).isOk());
  const Status again = buffers.release(*a);
  EXPECT_EQ(again.code(), ErrorCode::Internal);
  EXPECT_NE(again.message().find("does not hold"), std::string::npos) << again.message();
  buffers.forget(*a);  // not held: ignored
  auto tooBig = buffers.allocate(101, "activations of layer 3");
  ASSERT_FALSE(tooBig.isOk());
  EXPECT_EQ(tooBig.status().message().rfind("activations of layer 3: ", 0), 0u) << tooBig.status().message();
  EXPECT_EQ(buffers.size(), 0u);
  EXPECT_EQ(allocator.bytesHeld(), 0u);
}

}  // namespace
}  // namespace remat
