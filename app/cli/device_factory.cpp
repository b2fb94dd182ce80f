// The devices a --device option can name. The GPU is only linked in builds with the CUDA backend.
#include "cli.hpp"
#include "remat/cpu/cpu_device.hpp"

#ifdef REMAT_HAVE_GPU
#include "remat/gpu/cuda_device.hpp"
#endif

namespace remat::cli {

Result<std::unique_ptr<Device>> makeDevice(std::string_view name) {
  if (name == "cpu") return std::unique_ptr<Device>(std::make_unique<cpu::CpuDevice>());
  if (name == "gpu") {
#ifdef REMAT_HAVE_GPU
    auto device = gpu::createCudaDevice();
    if (!device) return device.status();
    return std::unique_ptr<Device>(std::move(device).value());
#else
    return Status::invalid(
        "this build has no CUDA backend (configure with -DREMAT_WITH_CUDA=ON where CUDA 13 and cuDNN 9 are installed)");
#endif
  }
  return Status::invalid("unknown device '" + std::string(name) + "' (expected cpu or gpu)");
}

Status checkPlanFits(Device& device, std::uint64_t predictedPeakBytes) {
#ifdef REMAT_HAVE_GPU
  if (auto* gpu = dynamic_cast<gpu::CudaDevice*>(&device)) return gpu->checkFits(predictedPeakBytes);
#else
  (void)device;
  (void)predictedPeakBytes;
#endif
  return Status::ok();
}

}  // namespace remat::cli
