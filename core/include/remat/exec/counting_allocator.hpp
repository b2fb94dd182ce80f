#pragma once
// The bookkeeping every backend's allocator shares (device.hpp's contract): handles, exact byte
// counts of what is held, the peak window, and the check that a handle is one this allocator holds.
// A backend supplies only the memory behind a handle (CpuAllocator, gpu::CudaAllocator).
#include <cstdint>
#include <string>
#include <unordered_map>

#include "remat/exec/device.hpp"

namespace remat {

class CountingAllocator : public DeviceAllocator {
 public:
  std::uint64_t bytesHeld() const final { return heldBytes_; }
  std::uint64_t peakBytes() const final { return peakBytes_; }
  void resetPeak() override { peakBytes_ = heldBytes_; }
  std::size_t buffersHeld() const final { return blocks_.size(); }

  // The memory behind a handle (nullptr for a zero-byte buffer); Internal error for a handle this
  // allocator does not hold (never handed out, already freed, or with a different size).
  Result<void*> memoryOf(DeviceBuffer buffer) const;
  // "cpu", "gpu": the start of every message.
  const std::string& device() const { return device_; }

 protected:
  // `device` starts every message: "cpu", "gpu".
  explicit CountingAllocator(std::string device) : device_(std::move(device)) {}

  struct Block {
    void* data = nullptr;
    std::uint64_t bytes = 0;
  };
  // Counts memory the backend just obtained for `bytes` and returns its new handle.
  DeviceBuffer track(void* data, std::uint64_t bytes);
  // The block a release names, or the double-free error; the backend gives the memory back, then
  // calls untrack().
  Result<Block> blockToRelease(DeviceBuffer buffer) const;
  // Forgets a held handle and uncounts its bytes.
  void untrack(DeviceBuffer buffer);
  const std::unordered_map<std::uint64_t, Block>& blocks() const { return blocks_; }

 private:
  const Block* find(DeviceBuffer buffer) const;

  std::string device_;
  std::unordered_map<std::uint64_t, Block> blocks_;
  std::uint64_t nextId_ = 1;
  std::uint64_t heldBytes_ = 0;
  std::uint64_t peakBytes_ = 0;
};

}  // namespace remat
