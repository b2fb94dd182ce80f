// OwnedBuffer and OwnedBuffers over the CPU's allocator: what they hold goes back on every exit
// path, a buffer handed to the caller stays allocated, and misuse is an error rather than a double
// free.
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

TEST(OwnedBuffers, NeverReleasesABufferTwice) {
  cpu::CpuAllocator allocator({.capacityBytes = 100});
  OwnedBuffers buffers(allocator);
  auto a = buffers.allocate(10, "a");
  ASSERT_TRUE(a.isOk());
  EXPECT_TRUE(buffers.release(*a).isOk());
  const Status again = buffers.release(*a);
  EXPECT_EQ(again.code(), ErrorCode::Internal);
  EXPECT_NE(again.message().find("not held"), std::string::npos) << again.message();
  EXPECT_FALSE(buffers.releaseToCaller(*a).isOk()) << "not held: refused, not released";
  auto tooBig = buffers.allocate(101, "activations of layer 3");
  ASSERT_FALSE(tooBig.isOk());
  EXPECT_EQ(tooBig.status().message().rfind("activations of layer 3: ", 0), 0u) << tooBig.status().message();
  EXPECT_EQ(buffers.size(), 0u);
  EXPECT_EQ(allocator.bytesHeld(), 0u);
}

}  // namespace
}  // namespace remat
