#pragma once
// Device buffers owned by RAII, so that every exit path (an error half-way through an op, a
// cancelled run, a failed profiler layer) gives back what it allocated and leaves the device
// holding what it held before.
//
// Contract, for both types:
//   - A buffer comes from one DeviceAllocator, which must outlive its owner. A handle is never
//     held twice.
//   - The destructor releases whatever is still held. Errors there are dropped: it runs on error
//     paths, where the first error is the one reported. Call release() / releaseAll() to see them.
//   - After release() the buffer is no longer held, whatever the outcome, so it is never released
//     twice.
//   - Handing a buffer over (OwnedBuffer::forget, OwnedBuffers::releaseToCaller) makes the caller
//     responsible for releasing it; OwnedBuffers::adopt takes one over.
#include <cstddef>
#include <cstdint>
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
// Not copyable and not movable: it is a scope's guard, not a container to pass around.
class OwnedBuffers {
 public:
  explicit OwnedBuffers(DeviceAllocator& allocator) : allocator_(allocator) {}
  ~OwnedBuffers();
  OwnedBuffers(const OwnedBuffers&) = delete;
  OwnedBuffers& operator=(const OwnedBuffers&) = delete;

  // Allocates `bytes` and holds the buffer. The allocator's error (OutOfMemory, ...) comes back
  // with `what` ("layer 3, forward workspace") in front.
  Result<DeviceBuffer> allocate(std::uint64_t bytes, std::string_view what);
  // Takes over a buffer the caller allocated from the same allocator. Internal error for an
  // invalid handle or one already held here.
  Status adopt(DeviceBuffer buffer);
  // Stops holding the buffer and returns it; the caller now releases it. Internal error when the
  // buffer is not held here.
  Result<DeviceBuffer> releaseToCaller(DeviceBuffer buffer);
  // Releases one held buffer now. Internal error when it is not held here; the allocator's error
  // otherwise (the buffer is no longer held either way).
  Status release(DeviceBuffer buffer);
  // Releases every held buffer now and returns the first error (all are attempted).
  Status releaseAll();

  bool holds(DeviceBuffer buffer) const;
  std::size_t size() const { return held_.size(); }

 private:
  DeviceAllocator& allocator_;
  std::vector<DeviceBuffer> held_;
};

}  // namespace remat
