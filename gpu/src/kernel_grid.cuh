#pragma once
// The launch shape of the elementwise kernels (kernels_*.cu): 256 threads per block, enough blocks
// to fill the device a few times over, and a grid-stride loop over 64-bit indices that covers the
// rest, so every element is computed the same way whatever the launch shape (bitwise reproducible).
#include "kernels.hpp"

namespace remat::gpu::kernels::grid {

constexpr int kThreads = 256;

inline unsigned blocksFor(Index count) {
  const Index blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

__device__ inline Index firstIndex() { return static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline Index gridStride() { return static_cast<Index>(gridDim.x) * blockDim.x; }

}  // namespace remat::gpu::kernels::grid
