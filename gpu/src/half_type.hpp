#pragma once
// Which 16-bit float the mixed precisions' half tensors hold on the GPU (issue 24): bfloat16 under
// bf16-mixed, IEEE float16 under fp16-mixed. Both are two bytes an element, so every layout,
// offset and byte count is the same; only the kernels' conversions (half_io.cuh's f and h), cuDNN's
// data type and cuBLAS's differ. The switch is made once, at the launch boundary: CudaDevice's
// prepare and its forward, backward and seed calls select the chain's type (useHalfType), and
// every kernel, cuDNN descriptor and cuBLAS product launched after it uses that type. The kernels
// keep one source: each translation unit that includes half_io.cuh registers its own copy of the
// device-side flag (no separate compilation, so each unit has one), and useHalfType writes them
// all. One half type per process at a time: a switch waits for every launch in flight.
// Included by the .cu files (C++17): no core model headers here; halfTypeOf(Precision) is
// cuda_half.hpp's. Internal to gpu/.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>

#include "remat/base/status.hpp"

namespace remat::gpu {

enum class HalfType : std::uint8_t { BFloat16, Float16 };

const char* halfTypeName(HalfType type);  // "bfloat16", "float16"

// The type the next half launches use.
HalfType currentHalfType();
// Selects `type` for the half kernels, cuDNN and cuBLAS: when it differs from the current one,
// synchronises the device (launches in flight, on any stream, read the old flag) and writes every
// unit's flag. Two devices of different half types in one process alternate through this switch.
Status useHalfType(HalfType type);

// cuDNN's and cuBLAS's data types of the current half type.
cudnnDataType_t cudnnHalfType();
cudaDataType_t cublasHalfType();

namespace detail {
// half_io.cuh's registration: writes one translation unit's device flag (1: float16).
using HalfFlagWriter = cudaError_t (*)(int isFloat16);
bool registerHalfFlagWriter(HalfFlagWriter writer);
}  // namespace detail

}  // namespace remat::gpu
