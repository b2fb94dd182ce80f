#pragma once
// OwnedBuffers: device buffers that go back to their allocator on every exit path. Code that
// allocates several buffers and may fail half way (a profiler layer, a step of the interpreter)
// holds them here, so an error leaves the device holding what it held before.
//
// Contract:
//   - Every buffer it holds was allocated from the one allocator it was made with, which must
//     outlive it. It never holds the same handle twice.
//   - The destructor releases every buffer still held; a release error there is dropped (nothing
//     useful can be done with it in a destructor). Call releaseAll() to see such errors.
//   - releaseToCaller() hands one buffer over: from then on the caller must release it.
//   - Not copyable and not movable: it is a scope's guard, not a container to pass around.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/exec/device.hpp"

namespace remat {

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
