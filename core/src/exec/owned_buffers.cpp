#include "remat/exec/owned_buffers.hpp"

#include <algorithm>
#include <string>

namespace remat {
namespace {

std::string describeHandle(DeviceBuffer buffer) {
  return "buffer #" + std::to_string(buffer.id) + " (" + std::to_string(buffer.bytes) + " bytes)";
}

}  // namespace

OwnedBuffers::~OwnedBuffers() { (void)releaseAll(); }

Result<DeviceBuffer> OwnedBuffers::allocate(std::uint64_t bytes, std::string_view what) {
  auto buffer = allocator_.allocate(bytes);
  if (!buffer) return buffer.status().withContext(std::string(what));
  held_.push_back(*buffer);
  return *buffer;
}

Status OwnedBuffers::adopt(DeviceBuffer buffer) {
  if (!buffer.valid()) return Status::internal("OwnedBuffers: cannot adopt an invalid buffer");
  if (holds(buffer)) return Status::internal("OwnedBuffers: " + describeHandle(buffer) + " is already held");
  held_.push_back(buffer);
  return Status::ok();
}

Result<DeviceBuffer> OwnedBuffers::releaseToCaller(DeviceBuffer buffer) {
  auto it = std::find(held_.begin(), held_.end(), buffer);
  if (it == held_.end()) return Status::internal("OwnedBuffers: " + describeHandle(buffer) + " is not held here");
  held_.erase(it);
  return buffer;
}

Status OwnedBuffers::release(DeviceBuffer buffer) {
  auto handedOver = releaseToCaller(buffer);
  if (!handedOver) return handedOver.status();
  return allocator_.release(buffer);
}

Status OwnedBuffers::releaseAll() {
  Status first;
  // Newest first: the reverse of allocation order, as a stack of scopes would free them.
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
    Status status = allocator_.release(*it);
    if (first.isOk() && !status.isOk()) first = status;
  }
  held_.clear();
  return first;
}

bool OwnedBuffers::holds(DeviceBuffer buffer) const {
  return std::find(held_.begin(), held_.end(), buffer) != held_.end();
}

}  // namespace remat
