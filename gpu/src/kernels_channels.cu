// ShuffleNetV2's channel shuffle (kernels.hpp): a permutation of channel planes, one thread per
// output element, each written once: no sums, bitwise the CPU's values.
#include "kernel_grid.cuh"
#include "kernels.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using grid::firstIndex;
using grid::gridStride;

__global__ void channelShuffleForwardKernel(Index batch, Index channels, Index groups, Index plane, const float* x,
                                            Index xSampleStride, float* y) {
  const Index perGroup = channels / groups, count = batch * channels * plane;
  for (Index at = firstIndex(); at < count; at += gridStride()) {
    const Index p = at % plane, outChannel = (at / plane) % channels, n = at / (plane * channels);
    const Index k = outChannel / groups, i = outChannel % groups;
    y[at] = x[n * xSampleStride + (i * perGroup + k) * plane + p];
  }
}

__global__ void channelShuffleBackwardKernel(Index batch, Index channels, Index groups, Index plane, const float* dy,
                                             float* dx, bool accumulate) {
  const Index perGroup = channels / groups, count = batch * channels * plane;
  for (Index at = firstIndex(); at < count; at += gridStride()) {
    const Index p = at % plane, inChannel = (at / plane) % channels, n = at / (plane * channels);
    const Index i = inChannel / perGroup, k = inChannel % perGroup;
    const float g = dy[(n * channels + k * groups + i) * plane + p];
    dx[at] = accumulate ? dx[at] + g : g;
  }
}

Status checkGroups(Index channels, Index groups) {
  if (groups < 1 || channels % groups != 0)
    return Status::invalid("channel shuffle: " + std::to_string(channels) + " channels in " + std::to_string(groups) +
                           " groups (the groups must divide the channels)");
  return Status::ok();
}

}  // namespace

Status channelShuffleForward(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                             const float* x, Index xSampleStride, float* y) {
  REMAT_RETURN_IF_ERROR(checkGroups(channels, groups));
  const Index count = batch * channels * plane;
  if (count == 0) return Status::ok();
  channelShuffleForwardKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, channels, groups, plane, x,
                                                                                     xSampleStride, y);
  REMAT_CUDA_CHECK_LAUNCH("channelShuffleForwardKernel");
  return Status::ok();
}

Status channelShuffleBackward(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                              const float* dy, float* dx, bool accumulate) {
  REMAT_RETURN_IF_ERROR(checkGroups(channels, groups));
  const Index count = batch * channels * plane;
  if (count == 0) return Status::ok();
  channelShuffleBackwardKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, channels, groups, plane,
                                                                                      dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("channelShuffleBackwardKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
