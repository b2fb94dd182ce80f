#pragma once
// Every CUDA, cuDNN and cuBLAS call is checked and turned into a remat::Status that names the
// failing expression and where it is (file:line). Out-of-memory codes become ErrorCode::OutOfMemory
// so callers can tell "too big for this device" from a bug.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "remat/base/status.hpp"

namespace remat::gpu {

// "cudaMalloc(&p, n) failed at gpu/src/x.cpp:12: out of memory (cudaErrorMemoryAllocation)".
Status cudaStatus(cudaError_t error, const char* expression, const char* file, int line);
Status cudnnStatus(cudnnStatus_t status, const char* expression, const char* file, int line);
Status cublasStatus(cublasStatus_t status, const char* expression, const char* file, int line);

// The library's own name of a status code ("cudaErrorMemoryAllocation", "CUBLAS_STATUS_ALLOC_FAILED").
std::string cublasStatusName(cublasStatus_t status);

// The file name from __FILE__ relative to the project's top folder ("gpu/src/x.cpp"); other paths
// are returned as they are.
const char* shortSourcePath(const char* file);

}  // namespace remat::gpu

#define REMAT_GPU_CHECK_IMPL_(convert, expr)                                                      \
  do {                                                                                            \
    ::remat::Status remat_gpu_status_ = ::remat::gpu::convert((expr), #expr, __FILE__, __LINE__); \
    if (!remat_gpu_status_.isOk()) return remat_gpu_status_;                                      \
  } while (0)

// Each returns the converted Status from the enclosing function when the call fails.
#define REMAT_CUDA_CHECK(expr) REMAT_GPU_CHECK_IMPL_(cudaStatus, expr)
#define REMAT_CUDNN_CHECK(expr) REMAT_GPU_CHECK_IMPL_(cudnnStatus, expr)
#define REMAT_CUBLAS_CHECK(expr) REMAT_GPU_CHECK_IMPL_(cublasStatus, expr)

// After a kernel launch: checks the launch itself (cudaGetLastError), not the kernel's completion.
#define REMAT_CUDA_CHECK_LAUNCH(kernelName)                                                        \
  do {                                                                                             \
    ::remat::Status remat_gpu_status_ =                                                            \
        ::remat::gpu::cudaStatus(cudaGetLastError(), "launch of " kernelName, __FILE__, __LINE__); \
    if (!remat_gpu_status_.isOk()) return remat_gpu_status_;                                       \
  } while (0)
