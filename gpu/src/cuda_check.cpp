#include "remat/gpu/cuda_check.hpp"

#include <string_view>

namespace remat::gpu {

namespace {

std::string where(const char* expression, const char* file, int line) {
  return std::string(expression) + " failed at " + shortSourcePath(file) + ":" + std::to_string(line);
}

}  // namespace

const char* shortSourcePath(const char* file) {
  // REMAT_GPU_SOURCE_ROOT is the project's top folder with a trailing slash (gpu/CMakeLists.txt).
  static constexpr std::string_view kRoot = REMAT_GPU_SOURCE_ROOT;
  const std::string_view path(file);
  if (path.substr(0, kRoot.size()) == kRoot) return file + kRoot.size();
  // Relative to the build folder, as ccache's base_dir writes __FILE__: "../../gpu/src/cuda_device.cpp".
  while (std::string_view(file).starts_with("../")) file += 3;
  return file;
}

Status cudaStatus(cudaError_t error, const char* expression, const char* file, int line) {
  if (error == cudaSuccess) return Status::ok();
  std::string message =
      where(expression, file, line) + ": " + cudaGetErrorString(error) + " (" + cudaGetErrorName(error) + ")";
  if (error == cudaErrorMemoryAllocation) return Status::outOfMemory(std::move(message));
  return Status::internal(std::move(message));
}

Status cudnnStatus(cudnnStatus_t status, const char* expression, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::ok();
  std::string message = where(expression, file, line) + ": " + cudnnGetErrorString(status);
  if (status == CUDNN_STATUS_ALLOC_FAILED) return Status::outOfMemory(std::move(message));
  // BAD_PARAM and NOT_SUPPORTED mean this layer's shape or settings cannot run here.
  if (status == CUDNN_STATUS_BAD_PARAM || status == CUDNN_STATUS_NOT_SUPPORTED)
    return Status::invalid(std::move(message));
  return Status::internal(std::move(message));
}

std::string cublasStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "cublasStatus_t " + std::to_string(static_cast<int>(status));
}

Status cublasStatus(cublasStatus_t status, const char* expression, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok();
  std::string message = where(expression, file, line) + ": " + cublasStatusName(status);
  if (status == CUBLAS_STATUS_ALLOC_FAILED) return Status::outOfMemory(std::move(message));
  return Status::internal(std::move(message));
}

}  // namespace remat::gpu
