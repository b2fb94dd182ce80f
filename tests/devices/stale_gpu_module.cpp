// A shared object that passes for the GPU module but has another ABI version: the loader must
// refuse it before calling anything in its table (devices_test).
#include "remat/devices/gpu_module.hpp"

namespace {

constexpr remat::GpuModule kStaleModule{remat::kGpuModuleAbiVersion + 1, nullptr, nullptr};

}  // namespace

extern "C" const remat::GpuModule* remat_gpu_module() { return &kStaleModule; }
