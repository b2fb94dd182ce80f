#pragma once
// The CUDA backend of the device interface (remat/exec/device.hpp): a dedicated memory pool with
// exact byte counts, cuDNN for convolution, pooling and batch normalisation, cuBLAS for linear layers
// and own kernels for the rest, all float32 NCHW on one stream. Activations and parameters are
// stored in the canonical layout, so upload and download are plain copies.
#include <cstdint>
#include <memory>
#include <string>

#include "remat/base/device_names.hpp"
#include "remat/exec/device.hpp"
#include "remat/gpu/cuda_allocator.hpp"

namespace remat::gpu {

// How convolution algorithms are chosen.
enum class WorkspacePolicy {
  // Within the chain's wf / wb (for blocks: what is left after the arena), so the workspaces the
  // interpreter allocates are exactly what the model predicted. An unprofiled chain has wf = wb = 0
  // and gets the zero-workspace algorithms.
  Chain,
  // cuDNN's best-ranked algorithm within workspaceCapBytes, whatever the chain says: what
  // `remat profile` measures and writes into the chain file.
  Profile,
};

struct CudaDeviceOptions {
  int deviceIndex = 0;
  // Only algorithms whose results do not depend on scheduling (no atomics): recomputed tensors and
  // gradients are then bitwise identical across plans.
  bool deterministic = true;
  // TF32 tensor cores for convolutions and GEMMs (PyTorch's cudnn.allow_tf32); off: exact float32.
  bool allowTf32 = false;
  WorkspacePolicy workspacePolicy = WorkspacePolicy::Chain;
  std::uint64_t workspaceCapBytes = 1ull << 30;
};

struct CudaDeviceInfo {
  int deviceIndex = 0;
  std::string name;  // "NVIDIA H200"
  int computeMajor = 0, computeMinor = 0;
  std::uint64_t totalBytes = 0;
  int driverVersion = 0, runtimeVersion = 0;
  std::size_t cudnnVersion = 0;
  std::string describe() const;  // one line
};

class CudaDevice final : public Device {
 public:
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string name() const override { return std::string(kGpuDeviceName); }
  DeviceAllocator& allocator() override;
  Status prepare(const Chain& chain) override;
  Result<std::uint64_t> requiredWorkspaceBytes(std::size_t layer, Pass pass) const override;
  Status upload(DeviceBuffer dst, TensorRole role, std::size_t layer, std::span<const std::byte> src) override;
  Status download(DeviceBuffer src, TensorRole role, std::size_t layer, std::span<std::byte> dst) override;
  Status fill(DeviceBuffer dst, std::uint8_t value) override;
  Status forward(const ForwardCall& call) override;
  Status backward(const BackwardCall& call) override;
  Status lossSeed(const SeedCall& call) override;
  Status optimizerStep(const OptimizerCall& call) override;
  Status accumulateGradient(std::size_t layer, DeviceBuffer dst, DeviceBuffer src) override;
  // fp16-mixed's GradScaler (cuda_device.cpp): unscale_ with the inf/NaN check, then the scale's
  // update (halved on inf/NaN; doubled after 2,000 steps without).
  Result<bool> unscaleGradients(std::span<const DeviceBuffer> grads) override;
  Status synchronize() override;
  // fp16-mixed with an optimizer: the GradScaler's current scale (2^16 after prepare), and
  // scaler.update(new_scale)'s override (positive, finite); an error for other chains.
  Result<float> lossScale() const;
  Status setLossScale(float scale);

  CudaAllocator& cudaAllocator();
  const CudaDeviceInfo& info() const;
  const CudaDeviceOptions& options() const;
  cudaStream_t stream() const;

  // The device's free memory plus what the pool has reserved but not handed out
  // (CudaAllocator::availableBytes); Device::checkFits() compares a plan's peak with it.
  Result<std::uint64_t> availableBytes() const override;
  std::string describe() const override { return info().describe(); }
  // The prepared layer's kernels in words: the chosen convolution algorithms and workspaces.
  Result<std::string> describeLayer(std::size_t layer) const override;
  // Between two CUDA events on the device's stream: the GPU's time for what body issued.
  Result<double> timeMs(const std::function<Status()>& body) override;

  struct Impl;

 private:
  explicit CudaDevice(std::unique_ptr<Impl> impl);
  friend Result<std::unique_ptr<CudaDevice>> createCudaDevice(const CudaDeviceOptions& options);
  std::unique_ptr<Impl> impl_;
};

// Opens the device: a stream, the cuDNN and cuBLAS handles and the memory pool. Without a usable
// GPU: InvalidInput "no CUDA device: <the runtime's reason>".
Result<std::unique_ptr<CudaDevice>> createCudaDevice(const CudaDeviceOptions& options = {});

// Whether a CUDA device can be used at all, and if not, why ("no CUDA device: ..."); cheap, opens
// nothing but the runtime. Tests use it to skip.
Status cudaDeviceAvailable(int deviceIndex = 0);

}  // namespace remat::gpu
