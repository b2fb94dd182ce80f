#include "remat/gpu/cuda_allocator.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {

namespace {

Result<std::uint64_t> poolAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute, const char* name) {
  std::uint64_t value = 0;
  Status status = cudaStatus(cudaMemPoolGetAttribute(pool, attribute, &value), name, __FILE__, __LINE__);
  if (!status) return status;
  return static_cast<std::uint64_t>(value);
}

}  // namespace

Result<DeviceMemoryInfo> queryDeviceMemory() {
  std::size_t freeBytes = 0, totalBytes = 0;
  REMAT_CUDA_CHECK(cudaMemGetInfo(&freeBytes, &totalBytes));
  return DeviceMemoryInfo{freeBytes, totalBytes};
}

Result<std::unique_ptr<CudaAllocator>> CudaAllocator::create(int device, cudaStream_t stream) {
  cudaMemPoolProps props;
  std::memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t raw = nullptr;
  REMAT_CUDA_CHECK(cudaMemPoolCreate(&raw, &props));
  MemPool pool(raw);
  // Never give memory back on synchronisation: a step's allocations then find it reserved.
  std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
  REMAT_CUDA_CHECK(cudaMemPoolSetAttribute(pool.get(), cudaMemPoolAttrReleaseThreshold, &threshold));
  return std::unique_ptr<CudaAllocator>(new CudaAllocator(std::move(pool), stream));
}

CudaAllocator::~CudaAllocator() {
  for (const auto& [id, block] : blocks())
    if (block.data != nullptr) (void)cudaFreeAsync(block.data, stream_);
  (void)cudaStreamSynchronize(stream_);
}

Result<DeviceBuffer> CudaAllocator::allocate(std::uint64_t bytes) {
  void* data = nullptr;
  if (bytes > 0) {
    if (bytes > std::numeric_limits<std::size_t>::max())
      return Status::outOfMemory("gpu: cannot allocate " + std::to_string(bytes) + " bytes");
    const cudaError_t error = cudaMallocFromPoolAsync(&data, static_cast<std::size_t>(bytes), pool_.get(), stream_);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();  // an allocation failure is not sticky; clear it for later calls
      std::string message = "gpu: allocating " + std::to_string(bytes) + " bytes failed (" + cudaGetErrorName(error) +
                            "), " + std::to_string(bytesHeld()) + " bytes held by this run";
      if (auto info = queryDeviceMemory())
        message += ", " + std::to_string(info->freeBytes) + " bytes free on the device";
      if (error == cudaErrorMemoryAllocation) return Status::outOfMemory(std::move(message));
      return Status::internal(std::move(message));
    }
  }
  return track(data, bytes);
}

Status CudaAllocator::release(DeviceBuffer buffer) {
  auto block = blockToRelease(buffer);
  if (!block) return block.status();
  if (block->data != nullptr) REMAT_CUDA_CHECK(cudaFreeAsync(block->data, stream_));
  untrack(buffer);
  return Status::ok();
}

void CudaAllocator::resetPeak() {
  CountingAllocator::resetPeak();
  // The exact count above is what the contract promises; the pool's marks are a cross-check, so a
  // failure to read or reset them is not worth failing an op for.
  if (auto stats = poolStats()) {
    foldedUsedHighBytes_ = std::max(foldedUsedHighBytes_, stats->usedHighBytes);
    foldedReservedHighBytes_ = std::max(foldedReservedHighBytes_, stats->reservedHighBytes);
  }
  (void)resetPoolHighWater();
}

Status CudaAllocator::beginLongWindow() {
  foldedUsedHighBytes_ = 0;
  foldedReservedHighBytes_ = 0;
  return resetPoolHighWater();
}

Result<PoolMemoryStats> CudaAllocator::longWindowStats() const {
  auto stats = poolStats();
  if (!stats) return stats.status();
  PoolMemoryStats out = *stats;
  out.usedHighBytes = std::max(out.usedHighBytes, foldedUsedHighBytes_);
  out.reservedHighBytes = std::max(out.reservedHighBytes, foldedReservedHighBytes_);
  return out;
}

Result<PoolMemoryStats> CudaAllocator::poolStats() const {
  PoolMemoryStats stats;
  auto used = poolAttribute(pool_.get(), cudaMemPoolAttrUsedMemCurrent, "cudaMemPoolAttrUsedMemCurrent");
  if (!used) return used.status();
  auto usedHigh = poolAttribute(pool_.get(), cudaMemPoolAttrUsedMemHigh, "cudaMemPoolAttrUsedMemHigh");
  if (!usedHigh) return usedHigh.status();
  auto reserved = poolAttribute(pool_.get(), cudaMemPoolAttrReservedMemCurrent, "cudaMemPoolAttrReservedMemCurrent");
  if (!reserved) return reserved.status();
  auto reservedHigh = poolAttribute(pool_.get(), cudaMemPoolAttrReservedMemHigh, "cudaMemPoolAttrReservedMemHigh");
  if (!reservedHigh) return reservedHigh.status();
  stats.usedBytes = *used;
  // A mark reset to zero stays there until the next allocation: never report less than current.
  stats.usedHighBytes = std::max(*usedHigh, *used);
  stats.reservedBytes = *reserved;
  stats.reservedHighBytes = std::max(*reservedHigh, *reserved);
  return stats;
}

Status CudaAllocator::resetPoolHighWater() {
  std::uint64_t zero = 0;
  REMAT_CUDA_CHECK(cudaMemPoolSetAttribute(pool_.get(), cudaMemPoolAttrUsedMemHigh, &zero));
  zero = 0;
  REMAT_CUDA_CHECK(cudaMemPoolSetAttribute(pool_.get(), cudaMemPoolAttrReservedMemHigh, &zero));
  return Status::ok();
}

Status CudaAllocator::trim() {
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  REMAT_CUDA_CHECK(cudaMemPoolTrimTo(pool_.get(), 0));
  return Status::ok();
}

Result<std::uint64_t> CudaAllocator::availableBytes() const {
  auto info = queryDeviceMemory();
  if (!info) return info.status();
  auto stats = poolStats();
  if (!stats) return stats.status();
  const std::uint64_t idle = stats->reservedBytes > stats->usedBytes ? stats->reservedBytes - stats->usedBytes : 0;
  return info->freeBytes + idle;
}

}  // namespace remat::gpu
