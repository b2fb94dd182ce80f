#pragma once
// What every bf16-mixed kernel file (kernels_half*.cu, kernels_arith.cu's bfloat16 launchers) reads
// first: the grid helpers, and the loads and stores that keep float32 compute with one rounding
// per written element. f widens a bfloat16 exactly; h rounds to nearest even (__float2bfloat16_rn,
// the CPU's rounding). load and store<T> do the same for a kernel templated on its element type,
// float passing through untouched, so the float32 instantiation is the float32 kernel bit for bit.
#include <type_traits>

#include "kernel_grid.cuh"
#include "kernels_half.hpp"

namespace remat::gpu::kernels::half_io {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

__device__ inline float f(Bf16 v) { return __bfloat162float(v); }
__device__ inline Bf16 h(float v) { return __float2bfloat16_rn(v); }

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

}  // namespace remat::gpu::kernels::half_io
