#pragma once
// What every mixed-precision kernel file (kernels_half*.cu, kernels_arith.cu's half launchers)
// reads first: the grid helpers, and the loads and stores that keep float32 compute with one
// rounding per written element. A half element (the two bytes of Bf16 storage) is bfloat16 under
// bf16-mixed and IEEE float16 under fp16-mixed (half_type.hpp): f widens either exactly; h rounds
// to nearest even (__float2bfloat16_rn, the CPU's rounding; __float2half_rn, PyTorch's float16
// cast). Which one is this unit's device flag, written by useHalfType at the launch boundary; the
// branch is uniform over a launch, so one kernel source serves both types. load and store<T> do the
// same for a kernel templated on its element type, float passing through untouched, so the
// float32 instantiation is the float32 kernel bit for bit.
#include <cuda_fp16.h>

#include <type_traits>

#include "half_type.hpp"
#include "kernel_grid.cuh"
#include "kernels_half.hpp"

namespace remat::gpu::kernels::half_io {
namespace {

// 1 while the launches are float16 (fp16-mixed); one copy per translation unit (no separate
// compilation), registered below so that useHalfType reaches it.
__constant__ int unitHalfIsFloat16 = 0;

cudaError_t writeUnitHalfFlag(int isFloat16) {
  return cudaMemcpyToSymbol(unitHalfIsFloat16, &isFloat16, sizeof isFloat16);
}

[[maybe_unused]] const bool unitHalfFlagRegistered = ::remat::gpu::detail::registerHalfFlagWriter(&writeUnitHalfFlag);

// Everything below reads this unit's flag, so it has internal linkage as well.

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

__device__ inline float f(Bf16 v) {
  if (unitHalfIsFloat16) return __half2float(__ushort_as_half(__bfloat16_as_ushort(v)));
  return __bfloat162float(v);
}
__device__ inline Bf16 h(float v) {
  if (unitHalfIsFloat16) return __ushort_as_bfloat16(__half_as_ushort(__float2half_rn(v)));
  return __float2bfloat16_rn(v);
}

__device__ inline float load(float v) { return v; }
__device__ inline float load(Bf16 v) { return f(v); }

template <typename T>
__device__ inline T store(float v) {
  if constexpr (std::is_same_v<T, Bf16>) {
    return h(v);
  } else {
    return v;
  }
}

}  // namespace
}  // namespace remat::gpu::kernels::half_io
