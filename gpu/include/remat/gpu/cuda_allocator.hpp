#pragma once
// The GPU allocator: a dedicated CUDA memory pool (cudaMemPoolCreate) with stream-ordered
// allocations (cudaMallocFromPoolAsync / cudaFreeAsync) and a release threshold of "never", so
// memory stays reserved between steps and a measured step is not disturbed by the driver. It
// counts the bytes asked for exactly (device.hpp's contract) and also reads the pool's own
// counters (used and reserved, with their high-water marks) so tests and the GPU check can compare
// the model with what the device really did.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "remat/base/device_names.hpp"
#include "remat/exec/counting_allocator.hpp"
#include "remat/gpu/cuda_resources.hpp"

namespace remat::gpu {

using MemPool = UniqueHandle<cudaMemPool_t, cudaMemPoolDestroy>;

struct PoolMemoryStats {
  std::uint64_t usedBytes = 0;          // handed out by the pool (its rounding included)
  std::uint64_t usedHighBytes = 0;      // high-water mark of usedBytes since the last reset
  std::uint64_t reservedBytes = 0;      // backing memory the pool holds
  std::uint64_t reservedHighBytes = 0;  // high-water mark of reservedBytes since the last reset
};

struct DeviceMemoryInfo {
  std::uint64_t freeBytes = 0;  // cudaMemGetInfo
  std::uint64_t totalBytes = 0;
};

Result<DeviceMemoryInfo> queryDeviceMemory();

class CudaAllocator final : public CountingAllocator {
 public:
  // A new pool on `device` whose allocations are ordered on `stream`; the stream must outlive the
  // allocator.
  static Result<std::unique_ptr<CudaAllocator>> create(int device, cudaStream_t stream);
  ~CudaAllocator() override;  // frees what is still held, then destroys the pool
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  Result<DeviceBuffer> allocate(std::uint64_t bytes) override;
  Status release(DeviceBuffer buffer) override;
  // Also resets the pool's high-water marks, so both windows start together (the interpreter
  // calls it before every op); the marks of the window that ends are folded into the long window
  // below first.
  void resetPeak() override;
  // memoryOf() (CountingAllocator) gives the device pointer behind a handle.

  // The pool's counters now; the high-water marks cover the window since the last resetPeak().
  Result<PoolMemoryStats> poolStats() const;
  Status resetPoolHighWater();
  // A long window over many resetPeak() windows (a whole step or run): its high-water marks are
  // the largest of every short window's since beginLongWindow().
  Status beginLongWindow();
  Result<PoolMemoryStats> longWindowStats() const;
  // Gives the pool's reserved but unused memory back to the device (after the stream's work is
  // done), so the next window's reserved high-water mark starts from what is in use.
  Status trim();
  // Bytes this process could still get: the device's free memory plus what the pool has reserved
  // but not handed out.
  Result<std::uint64_t> availableBytes() const;

 private:
  CudaAllocator(MemPool pool, cudaStream_t stream)
      : CountingAllocator(std::string(kGpuDeviceName)), pool_(std::move(pool)), stream_(stream) {}
  MemPool pool_;
  cudaStream_t stream_ = nullptr;
  std::uint64_t foldedUsedHighBytes_ = 0;
  std::uint64_t foldedReservedHighBytes_ = 0;
};

}  // namespace remat::gpu
