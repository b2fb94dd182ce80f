#pragma once
// Finds and loads the GPU module (the search order and the errors are those of devices.hpp).
// Internal to the devices stage.
#include <string>

#include "remat/base/status.hpp"
#include "remat/devices/gpu_module.hpp"

namespace remat {

// Where the module file is, without loading it: the first search path that exists, or the error
// loadGpuModule() would give for a missing module (no GPU backend, the paths tried).
Result<std::string> findGpuModule();

// The module's table; the module stays loaded for the life of the process. A failed attempt
// leaves nothing loaded, and a later call looks again (REMAT_GPU_MODULE may have changed).
Result<const GpuModule*> loadGpuModule();

}  // namespace remat
