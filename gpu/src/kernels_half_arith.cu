// The accumulating dropout backward of bf16-mixed's blocks (kernels_half_arith.hpp): one thread per
// element, reading bfloat16 as float32 and rounding once on write (__float2bfloat16_rn, the CPU's
// round to nearest even). The bfloat16 add, sub and div are kernels_arith.cu's templated kernels.
#include "half_io.cuh"
#include "kernels_half_arith.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using namespace half_io;  // the grid helpers, f (widen) and h (round once)

__global__ void dropoutBackwardHalfIntoKernel(Index count, float scale, const std::uint8_t* mask, const Bf16* dy,
                                              Bf16* dx, bool accumulate) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = mask[i] ? f(dy[i]) * scale : 0.0f;
    dx[i] = h(accumulate ? f(dx[i]) + g : g);
  }
}

}  // namespace

Status dropoutBackwardHalfInto(cudaStream_t stream, Index count, double p, const std::uint8_t* mask, const Bf16* dy,
                               Bf16* dx, bool accumulate) {
  if (count == 0) return Status::ok();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  dropoutBackwardHalfIntoKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, scale, mask, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("dropoutBackwardHalfIntoKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
