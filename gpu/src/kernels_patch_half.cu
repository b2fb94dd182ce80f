// conv_proj's patch rows under bf16-mixed (kernels_patch_half.hpp).
#include "half_io.cuh"
#include "kernels_patch_half.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

// The image index of element `i` of the rows [N*P][C*k*k].
__device__ __forceinline__ Index pixelOf(const PatchGrid& g, Index i) {
  const Index k = g.kernel, row = i / g.rowLength(), col = i % g.rowLength();
  const Index n = row / g.patches(), p = row % g.patches();
  const Index c = col / (k * k), ky = (col / k) % k, kx = col % k;
  const Index y = (p / g.across()) * k + ky, x = (p % g.across()) * k + kx;
  return ((n * g.channels + c) * g.height + y) * g.width + x;
}

__global__ void unfoldKernel(PatchGrid g, const Bf16* image, Bf16* rows) {
  const Index count = g.batch * g.patches() * g.rowLength();
  for (Index i = firstIndex(); i < count; i += gridStride()) rows[i] = image[pixelOf(g, i)];
}

__global__ void foldKernel(PatchGrid g, const Bf16* rows, float* image) {
  const Index count = g.batch * g.patches() * g.rowLength();
  for (Index i = firstIndex(); i < count; i += gridStride()) image[pixelOf(g, i)] = half_io::f(rows[i]);
}

__global__ void rowsToChannelsKernel(Index batch, Index patches, Index width, const Bf16* rows, float* channels) {
  const Index count = batch * patches * width;
  for (Index i = firstIndex(); i < count; i += gridStride()) {  // i over channels [n][c][p]
    const Index p = i % patches, c = (i / patches) % width, n = i / (patches * width);
    channels[i] = half_io::f(rows[(n * patches + p) * width + c]);
  }
}

__global__ void channelsToRowsKernel(Index batch, Index patches, Index width, const float* channels, Bf16* rows) {
  const Index count = batch * patches * width;
  for (Index i = firstIndex(); i < count; i += gridStride()) {  // i over rows [n][p][c]
    const Index c = i % width, p = (i / width) % patches, n = i / (patches * width);
    rows[i] = half_io::h(channels[(n * width + c) * patches + p]);
  }
}

}  // namespace

Status unfoldPatchesHalf(cudaStream_t stream, const PatchGrid& g, const Bf16* image, Bf16* rows) {
  const Index count = g.batch * g.patches() * g.rowLength();
  if (count == 0) return Status::ok();
  unfoldKernel<<<blocksFor(count), kThreads, 0, stream>>>(g, image, rows);
  REMAT_CUDA_CHECK_LAUNCH("unfoldKernel");
  return Status::ok();
}

Status foldPatches(cudaStream_t stream, const PatchGrid& g, const Bf16* rows, float* image) {
  const Index count = g.batch * g.patches() * g.rowLength();
  REMAT_CUDA_CHECK(
      cudaMemsetAsync(image, 0, static_cast<std::size_t>(g.batch * g.channels * g.height * g.width) * 4, stream));
  if (count == 0) return Status::ok();
  foldKernel<<<blocksFor(count), kThreads, 0, stream>>>(g, rows, image);
  REMAT_CUDA_CHECK_LAUNCH("foldKernel");
  return Status::ok();
}

Status patchRowsToChannels(cudaStream_t stream, Index batch, Index patches, Index width, const Bf16* rows,
                           float* channels) {
  const Index count = batch * patches * width;
  if (count == 0) return Status::ok();
  rowsToChannelsKernel<<<blocksFor(count), kThreads, 0, stream>>>(batch, patches, width, rows, channels);
  REMAT_CUDA_CHECK_LAUNCH("rowsToChannelsKernel");
  return Status::ok();
}

Status channelsToPatchRowsHalf(cudaStream_t stream, Index batch, Index patches, Index width, const float* channels,
                               Bf16* rows) {
  const Index count = batch * patches * width;
  if (count == 0) return Status::ok();
  channelsToRowsKernel<<<blocksFor(count), kThreads, 0, stream>>>(batch, patches, width, channels, rows);
  REMAT_CUDA_CHECK_LAUNCH("channelsToRowsKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
