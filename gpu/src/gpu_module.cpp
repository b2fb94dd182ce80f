// The GPU module's one exported symbol (core/include/remat/devices/gpu_module.hpp): the table
// through which `remat` and the explorer open the CUDA backend after loading this shared object.
#include "remat/devices/gpu_module.hpp"

#include "remat/gpu/cuda_device.hpp"

namespace remat::gpu {
namespace {

CudaDeviceOptions cudaOptions(const DeviceOptions& options) {
  CudaDeviceOptions cuda;
  cuda.deviceIndex = options.gpuIndex;
  cuda.deterministic = options.deterministic;
  cuda.allowTf32 = options.allowTf32;
  cuda.workspacePolicy = options.profileWorkspaces ? WorkspacePolicy::Profile : WorkspacePolicy::Chain;
  cuda.workspaceCapBytes = options.workspaceCapBytes;
  return cuda;
}

Status moduleDeviceAvailable(const DeviceOptions& options) { return cudaDeviceAvailable(options.gpuIndex); }

Result<std::unique_ptr<Device>> moduleOpenDevice(const DeviceOptions& options) {
  auto device = createCudaDevice(cudaOptions(options));
  if (!device) return device.status();
  return std::unique_ptr<Device>(std::move(device).value());
}

constexpr GpuModule kModule{kGpuModuleAbiVersion, &moduleDeviceAvailable, &moduleOpenDevice};

}  // namespace
}  // namespace remat::gpu

extern "C" const remat::GpuModule* remat_gpu_module() { return &remat::gpu::kModule; }
