// The GPU's half type switch (half_type.hpp).
#include "half_type.hpp"

#include <atomic>
#include <mutex>
#include <vector>

#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu {
namespace {

std::atomic<HalfType> gCurrent{HalfType::BFloat16};  // the device flags start at 0: bfloat16

std::mutex& writersMutex() {
  static std::mutex mutex;
  return mutex;
}

std::vector<detail::HalfFlagWriter>& writers() {
  static std::vector<detail::HalfFlagWriter> list;
  return list;
}

}  // namespace

const char* halfTypeName(HalfType type) { return type == HalfType::Float16 ? "float16" : "bfloat16"; }

HalfType currentHalfType() { return gCurrent.load(); }

Status useHalfType(HalfType type) {
  std::lock_guard<std::mutex> lock(writersMutex());
  if (gCurrent.load() == type) return Status::ok();
  // Every stream's launches in flight read the old flag (another CudaDevice's too): wait for them.
  REMAT_CUDA_CHECK(cudaDeviceSynchronize());
  for (detail::HalfFlagWriter writer : writers()) REMAT_CUDA_CHECK(writer(type == HalfType::Float16 ? 1 : 0));
  gCurrent.store(type);
  return Status::ok();
}

cudnnDataType_t cudnnHalfType() {
  return currentHalfType() == HalfType::Float16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

cudaDataType_t cublasHalfType() { return currentHalfType() == HalfType::Float16 ? CUDA_R_16F : CUDA_R_16BF; }

namespace detail {
bool registerHalfFlagWriter(HalfFlagWriter writer) {
  std::lock_guard<std::mutex> lock(writersMutex());
  writers().push_back(writer);
  return true;
}
}  // namespace detail

}  // namespace remat::gpu
