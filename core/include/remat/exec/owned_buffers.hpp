#pragma once
// Device buffers owned by RAII, so that every exit path (an error half-way through an op, a
// cancelled run) gives back what it allocated and leaves the device as it was found.
//
// Contract, for both types:
//   - A buffer comes from one DeviceAllocator, which must outlive its owner.
//   - The destructor releases whatever is still held. Errors there are dropped: it runs on error
//     paths, where the first error is the one reported. Call release() to see a release's error.
//   - After release() the buffer is no longer held, whatever the outcome, so it is never released
//     twice.
//   - forget() hands a buffer over to the caller, who then releases it; adopt() takes one over.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/exec/device.hpp"

namespace remat {

// One buffer, or none (the default). Movable, not copyable.
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  // Takes over `buffer`, a handle `allocator` handed out.
  OwnedBuffer(DeviceAllocator& allocator, DeviceBuffer buffer) : allocator_(&allocator), buffer_(buffer) {}
  // `what`, when given, prefixes the allocator's error ("allocating the static tensors: ...");
  // without it the allocator's error comes as it is, for callers that add context only on failure.
  static Result<OwnedBuffer> allocate(DeviceAllocator& allocator, std::uint64_t bytes, std::string_view what = {}) {
    auto buffer = allocator.allocate(bytes);
    if (!buffer) return what.empty() ? buffer.status() : buffer.status().withContext(std::string(what));
    return OwnedBuffer(allocator, *buffer);
  }
  ~OwnedBuffer() { (void)release(); }
  OwnedBuffer(OwnedBuffer&& other) noexcept
      : allocator_(std::exchange(other.allocator_, nullptr)), buffer_(std::exchange(other.buffer_, {})) {}
  // Releases what this held, then takes over `other`'s buffer.
  OwnedBuffer& operator=(OwnedBuffer&& other) noexcept {
    if (this != &other) {
      (void)release();
      allocator_ = std::exchange(other.allocator_, nullptr);
      buffer_ = std::exchange(other.buffer_, {});
    }
    return *this;
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;

  // The handle, still owned here; an invalid handle when nothing is held.
  DeviceBuffer get() const { return buffer_; }
  bool valid() const { return buffer_.valid(); }
  // Releases the buffer now (ok when nothing is held).
  Status release() {
    if (!buffer_.valid()) return Status::ok();
    return std::exchange(allocator_, nullptr)->release(std::exchange(buffer_, {}));
  }
  // Hands the buffer over to the caller; nothing is held afterwards.
  DeviceBuffer forget() {
    allocator_ = nullptr;
    return std::exchange(buffer_, {});
  }

 private:
  DeviceAllocator* allocator_ = nullptr;
  DeviceBuffer buffer_;
};

// A set of buffers of one allocator, for code that allocates several and hands some of them on.
// Lookups (forget, release) search from the newest buffer, so the usual last-in first-out use
// costs O(1) each.
class OwnedBuffers {
 public:
  explicit OwnedBuffers(DeviceAllocator& allocator) : allocator_(allocator) {}
  ~OwnedBuffers() {
    for (const DeviceBuffer& buffer : held_) (void)allocator_.release(buffer);
  }
  OwnedBuffers(const OwnedBuffers&) = delete;
  OwnedBuffers& operator=(const OwnedBuffers&) = delete;

  // `what` prefixes the allocator's error ("conv1 forward workspace: gpu: out of memory ...").
  Result<DeviceBuffer> allocate(std::uint64_t bytes, std::string_view what) {
    auto buffer = allocator_.allocate(bytes);
    if (!buffer) return buffer.status().withContext(std::string(what));
    held_.push_back(*buffer);
    return *buffer;
  }
  // Takes over `buffer`, a handle the same allocator handed out.
  void adopt(DeviceBuffer buffer) { held_.push_back(buffer); }
  // Hands `buffer` over to the caller; a buffer this set does not hold is ignored.
  void forget(DeviceBuffer buffer) { (void)take(buffer); }
  // Releases `buffer` now; Internal error when this set does not hold it.
  Status release(DeviceBuffer buffer) {
    if (!take(buffer))
      return Status::internal("releasing buffer " + std::to_string(buffer.id) + " of " + std::to_string(buffer.bytes) +
                              " bytes, which this set does not hold");
    return allocator_.release(buffer);
  }
  std::size_t size() const { return held_.size(); }

 private:
  // Removes `buffer` from the set; false when it is not there.
  bool take(DeviceBuffer buffer) {
    const auto newestFirst = std::find(held_.rbegin(), held_.rend(), buffer);
    if (newestFirst == held_.rend()) return false;
    held_.erase(std::next(newestFirst).base());
    return true;
  }

  DeviceAllocator& allocator_;
  std::vector<DeviceBuffer> held_;
};

}  // namespace remat
