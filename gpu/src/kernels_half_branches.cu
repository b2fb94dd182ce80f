// The concatenation of bfloat16 blocks' branches (kernels_half_conv.hpp): a strided copy, or an
// add in float32 rounded once, as kernels_half.cu's kernels. Their pool branches and channel
// shuffle are kernels_pool.cu's and kernels_channels.cu's kernels, templated on the element type.
#include "half_io.cuh"
#include "kernels_half_conv.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using namespace half_io;  // the grid helpers, f (widen) and h (round once)

__global__ void addRowsHalfKernel(Index rows, Index width, const Bf16* from, Index fromStride, Bf16* to,
                                  Index toStride) {
  const Index count = rows * width;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index r = i / width, c = i % width;
    Bf16& out = to[r * toStride + c];
    out = h(f(out) + f(from[r * fromStride + c]));
  }
}

}  // namespace

Status copyOrAddRowsHalf(cudaStream_t stream, Index rows, Index width, const Bf16* from, Index fromStride, Bf16* to,
                         Index toStride, bool accumulate) {
  if (rows * width == 0) return Status::ok();
  if (!accumulate) {  // a strided copy moves bytes: the dtype does not matter
    const std::size_t bytes = sizeof(Bf16);
    REMAT_CUDA_CHECK(cudaMemcpy2DAsync(
        to, static_cast<std::size_t>(toStride) * bytes, from, static_cast<std::size_t>(fromStride) * bytes,
        static_cast<std::size_t>(width) * bytes, static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  }
  addRowsHalfKernel<<<blocksFor(rows * width), kThreads, 0, stream>>>(rows, width, from, fromStride, to, toStride);
  REMAT_CUDA_CHECK_LAUNCH("addRowsHalfKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
