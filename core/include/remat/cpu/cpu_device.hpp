#pragma once
// The CPU backend: an allocator over malloc with exact byte counting and float32 kernels for every
// layer kind, on oneDNN (convolution, pooling, batch norm, matmul, relu / relu6) and own kernels
// where no oneDNN primitive fits (dropout, the residual add, max pooling's backward, adaptive
// average pooling, the loss seed, abstract layers). Every kernel runs on the device's fixed number
// of threads and is deterministic at that count, so a recomputed forward reproduces the original
// bit for bit and every plan computes store-all's gradients. Kernels use no tensor memory of their
// own: every scratch byte a primitive needs (oneDNN's user-managed scratchpad, reordered weights)
// lies in the workspace the interpreter allocated, and requiredWorkspaceBytes() says how much
// (see device.hpp). No oneDNN type appears here.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "remat/base/device_names.hpp"
#include "remat/exec/counting_allocator.hpp"
#include "remat/exec/device.hpp"

namespace remat::cpu {

struct CpuDeviceOptions {
  // Fills every buffer with NaN (float 0x7FC00000) when it is allocated and again when it is freed,
  // so a kernel that reads memory it did not write, or memory already freed, produces NaNs. Tests
  // turn it on; it costs a pass over each buffer.
  bool poisonMemory = false;
  // Refuses allocations that would take bytesHeld() above this (0: no limit), returning
  // OutOfMemory: a simulated device capacity.
  std::uint64_t capacityBytes = 0;
  // Freed blocks are kept for reuse by allocations of the same rounded size (as CUDA caching
  // allocators do), up to this many bytes; the counts (bytesHeld, peakBytes) never include them.
  // Steps of one chain allocate the same sizes again and again, so this saves the page faults of
  // fresh memory. 0 disables the cache.
  std::uint64_t cacheBytes = std::uint64_t{1} << 30;
  // The threads every kernel runs on (0: every core). Results, and the scratch some primitives
  // need, depend on it, so it is fixed for the device's life.
  int threads = 0;
};

// Exact byte counting over aligned malloc. Handles are checked on every use.
class CpuAllocator final : public CountingAllocator {
 public:
  explicit CpuAllocator(CpuDeviceOptions options = {});
  ~CpuAllocator() override;
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;

  Result<DeviceBuffer> allocate(std::uint64_t bytes) override;
  Status release(DeviceBuffer buffer) override;
  // Bytes of freed blocks kept for reuse (not counted as held).
  std::uint64_t bytesCached() const { return cachedBytes_; }
  // Returns every cached block to the system.
  void releaseCache();

  // The memory behind a handle; Internal error for a handle this allocator does not hold (never
  // handed out, already freed, or with a different size).
  Result<std::byte*> resolve(DeviceBuffer buffer) const;

 private:
  CpuDeviceOptions options_;
  std::unordered_map<std::uint64_t, std::vector<std::byte*>> cache_;  // by rounded size
  std::uint64_t cachedBytes_ = 0;
};

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(CpuDeviceOptions options = {});
  ~CpuDevice() override;
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  std::string name() const override { return std::string(kCpuDeviceName); }
  DeviceAllocator& allocator() override;
  Status prepare(const Chain& chain) override;
  Result<std::uint64_t> requiredWorkspaceBytes(std::size_t layer, Pass pass) const override;
  Status upload(DeviceBuffer dst, TensorRole role, std::size_t layer, std::span<const std::byte> src) override;
  Status download(DeviceBuffer src, TensorRole role, std::size_t layer, std::span<std::byte> dst) override;
  Status fill(DeviceBuffer dst, std::uint8_t value) override;
  Result<std::uint64_t> checksum(DeviceBuffer buffer) override;  // in place, no copy
  Status forward(const ForwardCall& call) override;
  Status backward(const BackwardCall& call) override;
  Status lossSeed(const SeedCall& call) override;
  // SGD, momentum, Adam, AdamW in plain loops (optimizer_step.cpp).
  Status optimizerStep(const OptimizerCall& call) override;
  Status accumulateGradient(std::size_t layer, DeviceBuffer dst, DeviceBuffer src) override;
  Status synchronize() override { return Status::ok(); }
  // capacityBytes less what is held; without a capacity, this machine's physical memory less it.
  Result<std::uint64_t> availableBytes() const override;
  // "cpu: oneDNN 2.6.3 kernels, 2 threads, capacity 24.0 GiB"
  std::string describe() const override;
  int threads() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// OK when oneDNN runs bfloat16 convolutions and matmuls on this CPU (2.6: AVX-512 CPUs); otherwise
// InvalidInput saying which instruction set this CPU has and what to run instead. CpuDevice::prepare
// refuses a bf16 or bf16-mixed chain with real layers with it; tests that run bfloat16 on the CPU
// skip with its message.
Status cpuBfloat16Support();

// This machine's physical memory (sysconf); 0 when the system does not say.
std::uint64_t physicalMemoryBytes();

}  // namespace remat::cpu
