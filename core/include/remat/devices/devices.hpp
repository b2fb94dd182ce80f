#pragma once
// Opening a device by name: the one factory behind `--device cpu|gpu`, the explorer's Measure
// action and the tests. "cpu" is the CPU backend (cpu::CpuDevice, oneDNN), always there. "gpu"
// is the CUDA backend, which lives in a separate shared object, the GPU module (libremat_gpu.so,
// gpu_module.hpp), loaded with dlopen() on the first "gpu" request only: a program that plans,
// simulates or runs on the CPU never loads CUDA, cuDNN or cuBLAS, and starts on machines that
// do not have them.
//
// Where the GPU module is looked for, in order:
//   1. the path in the environment variable REMAT_GPU_MODULE; when it is set, no other place is
//      tried (a wrong override is an error, not something to fall back from);
//   2. <directory of the executable>/../lib/remat/libremat_gpu.so (the install layout);
//   3. the module in the build tree, when this build has a GPU backend.
// The first of these that exists is loaded; once loaded it stays loaded for the life of the
// process (the devices it opened run its code).
//
// Errors of a "gpu" request (all InvalidInput, so the CLI exits with 2):
//   - a build without CUDA: "this build has no GPU backend (configure with -DREMAT_WITH_CUDA=ON ...)";
//   - no module where it was looked for: the paths tried;
//   - a module the dynamic loader cannot load (libcudnn.so.9 missing, not a shared object): the
//     path, the loader's message (dlerror) and the libraries the GPU backend needs;
//   - a shared object without the module's entry point, or of another ABI version: the path and why;
//   - no usable driver or device: the module's "no CUDA device: <the runtime's reason>".
// All of these are safe to call from any thread.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "remat/base/status.hpp"
#include "remat/exec/device.hpp"

namespace remat {

// What the backends need to open a device; each reads its own fields. A plain aggregate: the GPU
// module reads it across the dlopen boundary (changing it changes kGpuModuleAbiVersion).
struct DeviceOptions {
  // GPU.
  int gpuIndex = 0;
  // Only algorithms whose results do not depend on scheduling (no atomics), so recomputed tensors
  // and gradients are bitwise identical across plans.
  bool deterministic = true;
  // TF32 tensor cores for convolutions and GEMMs (PyTorch's cudnn.allow_tf32); off: exact float32.
  bool allowTf32 = false;
  // Off (runs): convolution algorithms within the chain's wf / wb, so the workspaces the
  // interpreter allocates are what the model predicted. On (`remat profile`): cuDNN's best-ranked
  // algorithm within workspaceCapBytes, whatever the chain says.
  bool profileWorkspaces = false;
  std::uint64_t workspaceCapBytes = std::uint64_t{1} << 30;

  // CPU: allocations beyond this many bytes are refused and Device::checkFits() measures plans
  // against it. Unset: defaultCpuCapacityBytes(); 0: no limit but the machine's physical memory.
  std::optional<std::uint64_t> cpuCapacityBytes;
  // CPU: the threads its kernels run on (0: every core). Results are deterministic at any one count.
  int cpuThreads = 0;
};

// The names openDevice() knows: "cpu", "gpu".
std::span<const std::string_view> deviceNames();

// Opens the device `name` (one of deviceNames()). An unknown name is InvalidInput naming the
// valid ones; "gpu" fails as the top of this file says.
Result<std::unique_ptr<Device>> openDevice(std::string_view name, const DeviceOptions& options = {});

// Whether this program has the code of device `name`, without loading anything: "cpu" always;
// "gpu" when the GPU module file is where openDevice() looks (the search of the top of this
// file). Its errors are the search's: no GPU backend in this build, or the paths tried. Cheap, for
// a program that shows a GPU action and checks the device only when it is used.
Status deviceInstalled(std::string_view name);

// Whether openDevice(name, options) can succeed here, and if not, why (the same messages); for
// "gpu" this loads the GPU module and asks the CUDA runtime, but opens no device. Cheap after the
// first call.
Status deviceAvailable(std::string_view name, const DeviceOptions& options = {});

// Three quarters of this machine's physical memory: the CPU backend allocates real memory, so a
// plan that needs more is refused up front instead of letting the system swap or kill the program.
// 0 (no limit) when the system does not report its memory.
std::uint64_t defaultCpuCapacityBytes();

}  // namespace remat
