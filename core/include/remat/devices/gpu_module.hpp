#pragma once
// The interface between a program and the GPU module (libremat_gpu.so, built from gpu/): the one
// symbol the module exports, remat_gpu_module(), returns a table of what the loader
// (core/src/devices/) may call. The loader's side owns this interface; the module implements it
// (gpu/src/gpu_module.cpp).
//
// Both sides are built from the same sources by the same compiler, so the table passes C++ types
// (Status, Result, std::unique_ptr<Device>, DeviceOptions) by their C++ ABI. kGpuModuleAbiVersion
// stands for all of them: change it whenever GpuModule, DeviceOptions, the Device interface
// (exec/device.hpp) or Status / Result change, so that a stale module is refused instead of being
// called wrongly. abiVersion stays the table's first member in every version.
#include <cstdint>
#include <memory>

#include "remat/base/status.hpp"
#include "remat/devices/devices.hpp"
#include "remat/exec/device.hpp"

namespace remat {

inline constexpr std::uint32_t kGpuModuleAbiVersion = 2;  // 2: DeviceOptions::cpuThreads
inline constexpr const char kGpuModuleEntryPoint[] = "remat_gpu_module";

struct GpuModule {
  std::uint32_t abiVersion = kGpuModuleAbiVersion;
  // Whether a CUDA device can be used, and if not, why ("no CUDA device: <the runtime's reason>").
  Status (*available)(const DeviceOptions& options) = nullptr;
  // Opens the GPU DeviceOptions::gpuIndex names; the errors of `available` and CUDA's own.
  Result<std::unique_ptr<Device>> (*open)(const DeviceOptions& options) = nullptr;
};

}  // namespace remat

// The module's entry point: a table that lives as long as the module is loaded. Never null.
extern "C" __attribute__((visibility("default"))) const remat::GpuModule* remat_gpu_module();
