#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "remat/cpu/cpu_device.hpp"

namespace remat::cpu {
namespace {

constexpr std::size_t kAlignment = 64;  // a cache line; also enough for any vector load

void poison(std::byte* data, std::uint64_t bytes) {
  // Quiet NaN 0x7FC00000, little-endian; trailing bytes of a size that is not a multiple of 4 get
  // the pattern's prefix. Written by doubling copies: memcpy speed, no per-byte loop.
  static constexpr unsigned char kNaN[4] = {0x00, 0x00, 0xC0, 0x7F};
  const std::uint64_t first = bytes < 4 ? bytes : 4;
  std::memcpy(data, kNaN, first);
  for (std::uint64_t done = first; done < bytes;) {
    const std::uint64_t chunk = done < bytes - done ? done : bytes - done;
    std::memcpy(data + done, data, chunk);
    done += chunk;
  }
}

// What is really reserved for a block of `bytes` (the cache's key); the counts stay exact.
std::uint64_t roundedSize(std::uint64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

CpuAllocator::CpuAllocator(CpuDeviceOptions options)
    : CountingAllocator(std::string(kCpuDeviceName)), options_(options) {}

CpuAllocator::~CpuAllocator() {
  for (const auto& [id, block] : blocks()) std::free(block.data);
  releaseCache();
}

void CpuAllocator::releaseCache() {
  for (auto& [size, list] : cache_)
    for (std::byte* data : list) std::free(data);
  cache_.clear();
  cachedBytes_ = 0;
  // glibc keeps freed blocks below its (adaptive) mmap threshold in its heap; give them back to the
  // system, so a cancelled or finished measurement leaves the process as small as it found it.
  malloc_trim(0);
}

Result<DeviceBuffer> CpuAllocator::allocate(std::uint64_t bytes) {
  const std::uint64_t held = bytesHeld();
  if (options_.capacityBytes != 0 && (bytes > options_.capacityBytes || held > options_.capacityBytes - bytes))
    return Status::outOfMemory("cpu: allocating " + std::to_string(bytes) + " bytes would exceed the capacity of " +
                               std::to_string(options_.capacityBytes) + " bytes (" + std::to_string(held) + " held)");
  std::byte* data = nullptr;
  if (bytes > 0) {
    // aligned_alloc needs a size that is a multiple of the alignment; the count stays exact.
    const std::uint64_t rounded = roundedSize(bytes);
    if (rounded < bytes || rounded > static_cast<std::uint64_t>(SIZE_MAX))
      return Status::outOfMemory("cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    auto cached = cache_.find(rounded);
    if (cached != cache_.end() && !cached->second.empty()) {
      data = cached->second.back();
      cached->second.pop_back();
      cachedBytes_ -= rounded;
    } else {
      data = static_cast<std::byte*>(std::aligned_alloc(kAlignment, static_cast<std::size_t>(rounded)));
    }
    if (data == nullptr)
      return Status::outOfMemory("cpu: malloc of " + std::to_string(bytes) + " bytes failed (" + std::to_string(held) +
                                 " bytes held)");
    if (options_.poisonMemory) poison(data, bytes);
  }
  return track(data, bytes);
}

Status CpuAllocator::release(DeviceBuffer buffer) {
  auto block = blockToRelease(buffer);
  if (!block) return block.status();
  auto* data = static_cast<std::byte*>(block->data);
  if (options_.poisonMemory) poison(data, block->bytes);
  const std::uint64_t rounded = roundedSize(block->bytes);
  if (data != nullptr && rounded <= options_.cacheBytes - std::min(options_.cacheBytes, cachedBytes_)) {
    cache_[rounded].push_back(data);
    cachedBytes_ += rounded;
  } else {
    std::free(data);
  }
  untrack(buffer);
  return Status::ok();
}

Result<std::byte*> CpuAllocator::resolve(DeviceBuffer buffer) const {
  auto data = memoryOf(buffer);
  if (!data) return data.status();
  return static_cast<std::byte*>(*data);
}

}  // namespace remat::cpu
