// ShuffleNetV2's channel shuffle (kernels.hpp): a permutation of channel planes, one thread per
// output element, each written once: no sums, bitwise the CPU's values. The kernels are templated
// on the element type: bf16-mixed's shuffle (kernels_half_conv.hpp) moves bfloat16 values as they
// are and rounds once where its backward accumulates (half_io.cuh).
#include "half_io.cuh"
#include "kernels.hpp"
#include "kernels_half_conv.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using namespace half_io;  // the grid helpers, load (widen) and store<T> (round once for bfloat16)

template <typename T>
__global__ void channelShuffleForwardKernel(Index batch, Index channels, Index groups, Index plane, const T* x,
                                            Index xSampleStride, T* y) {
  const Index perGroup = channels / groups, count = batch * channels * plane;
  for (Index at = firstIndex(); at < count; at += gridStride()) {
    const Index p = at % plane, outChannel = (at / plane) % channels, n = at / (plane * channels);
    const Index k = outChannel / groups, i = outChannel % groups;
    y[at] = x[n * xSampleStride + (i * perGroup + k) * plane + p];
  }
}

template <typename T>
__global__ void channelShuffleBackwardKernel(Index batch, Index channels, Index groups, Index plane, const T* dy, T* dx,
                                             bool accumulate) {
  const Index perGroup = channels / groups, count = batch * channels * plane;
  for (Index at = firstIndex(); at < count; at += gridStride()) {
    const Index p = at % plane, inChannel = (at / plane) % channels, n = at / (plane * channels);
    const Index i = inChannel / perGroup, k = inChannel % perGroup;
    const T g = dy[(n * channels + k * groups + i) * plane + p];
    dx[at] = accumulate ? store<T>(load(dx[at]) + load(g)) : g;
  }
}

Status checkGroups(Index channels, Index groups) {
  if (groups < 1 || channels % groups != 0)
    return Status::invalid("channel shuffle: " + std::to_string(channels) + " channels in " + std::to_string(groups) +
                           " groups (the groups must divide the channels)");
  return Status::ok();
}

// Each checks the groups, launches nothing for an empty tensor and checks the launch under the
// public launcher's kernel name (`launchName`: "launch of <kernel>", float32 and bfloat16 apart).
template <typename T>
Status launchShuffleForward(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane, const T* x,
                            Index xSampleStride, T* y, const char* launchName) {
  REMAT_RETURN_IF_ERROR(checkGroups(channels, groups));
  const Index count = batch * channels * plane;
  if (count == 0) return Status::ok();
  channelShuffleForwardKernel<T>
      <<<blocksFor(count), kThreads, 0, stream>>>(batch, channels, groups, plane, x, xSampleStride, y);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

template <typename T>
Status launchShuffleBackward(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane, const T* dy,
                             T* dx, bool accumulate, const char* launchName) {
  REMAT_RETURN_IF_ERROR(checkGroups(channels, groups));
  const Index count = batch * channels * plane;
  if (count == 0) return Status::ok();
  channelShuffleBackwardKernel<T>
      <<<blocksFor(count), kThreads, 0, stream>>>(batch, channels, groups, plane, dy, dx, accumulate);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

}  // namespace

Status channelShuffleForward(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                             const float* x, Index xSampleStride, float* y) {
  return launchShuffleForward(stream, batch, channels, groups, plane, x, xSampleStride, y,
                              "launch of channelShuffleForwardKernel");
}

Status channelShuffleBackward(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                              const float* dy, float* dx, bool accumulate) {
  return launchShuffleBackward(stream, batch, channels, groups, plane, dy, dx, accumulate,
                               "launch of channelShuffleBackwardKernel");
}

Status channelShuffleForwardHalf(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                                 const Bf16* x, Index xSampleStride, Bf16* y) {
  return launchShuffleForward(stream, batch, channels, groups, plane, x, xSampleStride, y,
                              "launch of channelShuffleForwardHalfKernel");
}

Status channelShuffleBackwardHalf(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                                  const Bf16* dy, Bf16* dx, bool accumulate) {
  return launchShuffleBackward(stream, batch, channels, groups, plane, dy, dx, accumulate,
                               "launch of channelShuffleBackwardHalfKernel");
}

}  // namespace remat::gpu::kernels
