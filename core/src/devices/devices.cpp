#include "remat/devices/devices.hpp"

#include <array>
#include <string>

#include "gpu_module_loader.hpp"
#include "remat/base/device_names.hpp"
#include "remat/cpu/cpu_device.hpp"

namespace remat {
namespace {

constexpr std::array<std::string_view, 2> kDeviceNames = {kCpuDeviceName, kGpuDeviceName};

Status unknownDevice(std::string_view name) {
  std::string known;
  for (std::string_view n : kDeviceNames) known += (known.empty() ? "" : ", ") + std::string(n);
  return Status::invalid("unknown device '" + std::string(name) + "' (expected one of: " + known + ")");
}

}  // namespace

std::span<const std::string_view> deviceNames() { return kDeviceNames; }

std::uint64_t defaultCpuCapacityBytes() { return cpu::physicalMemoryBytes() / 4 * 3; }

Result<std::unique_ptr<Device>> openDevice(std::string_view name, const DeviceOptions& options) {
  if (options.cpuThreads < 0)
    return Status::invalid("the CPU thread count must be 0 (every core) or more, got " +
                           std::to_string(options.cpuThreads));
  if (name == kCpuDeviceName) {
    cpu::CpuDeviceOptions cpuOptions;
    cpuOptions.capacityBytes = options.cpuCapacityBytes.value_or(defaultCpuCapacityBytes());
    cpuOptions.threads = options.cpuThreads;
    return std::unique_ptr<Device>(std::make_unique<cpu::CpuDevice>(cpuOptions));
  }
  if (name == kGpuDeviceName) {
    auto module = loadGpuModule();
    if (!module) return module.status();
    return (*module)->open(options);
  }
  return unknownDevice(name);
}

Status deviceInstalled(std::string_view name) {
  if (name == kCpuDeviceName) return Status::ok();
  if (name == kGpuDeviceName) return findGpuModule().status();
  return unknownDevice(name);
}

Status deviceAvailable(std::string_view name, const DeviceOptions& options) {
  if (name == kCpuDeviceName) return Status::ok();
  if (name == kGpuDeviceName) {
    auto module = loadGpuModule();
    if (!module) return module.status();
    return (*module)->available(options);
  }
  return unknownDevice(name);
}

}  // namespace remat
