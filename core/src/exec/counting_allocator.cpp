#include "remat/exec/counting_allocator.hpp"

namespace remat {

const CountingAllocator::Block* CountingAllocator::find(DeviceBuffer buffer) const {
  auto it = blocks_.find(buffer.id);
  if (it == blocks_.end() || it->second.bytes != buffer.bytes) return nullptr;
  return &it->second;
}

Result<void*> CountingAllocator::memoryOf(DeviceBuffer buffer) const {
  const Block* block = find(buffer);
  if (block == nullptr)
    return Status::internal(device_ + ": buffer #" + std::to_string(buffer.id) + " (" + std::to_string(buffer.bytes) +
                            " bytes) is not held: used after free, or never allocated");
  return block->data;
}

DeviceBuffer CountingAllocator::track(void* data, std::uint64_t bytes) {
  const DeviceBuffer buffer{nextId_++, bytes};
  blocks_.emplace(buffer.id, Block{data, bytes});
  heldBytes_ += bytes;
  if (heldBytes_ > peakBytes_) peakBytes_ = heldBytes_;
  return buffer;
}

Result<CountingAllocator::Block> CountingAllocator::blockToRelease(DeviceBuffer buffer) const {
  const Block* block = find(buffer);
  if (block == nullptr)
    return Status::internal(device_ + ": release of buffer #" + std::to_string(buffer.id) + " (" +
                            std::to_string(buffer.bytes) + " bytes), which is not held (double free?)");
  return *block;
}

void CountingAllocator::untrack(DeviceBuffer buffer) {
  auto it = blocks_.find(buffer.id);
  if (it == blocks_.end()) return;
  heldBytes_ -= it->second.bytes;
  blocks_.erase(it);
}

}  // namespace remat
