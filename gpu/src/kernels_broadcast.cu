// Squeeze-and-Excitation's inner ops of blocks on NCHW tensors: global average pooling to
// [N, C, 1, 1] and the broadcasting product a * b, with their backwards (the CPU backend's
// kernels_broadcast.cpp, in the GPU's layout). One thread per output element, each summing in a
// fixed order: bitwise reproducible whatever the launch shape; no atomics, no allocation (d(scale)
// is summed in place, without a full-size temporary).
#include "kernel_grid.cuh"
#include "kernels.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

// The NCHW index of (n, c, h, w) in a tensor of dims d, an axis of extent 1 taking index 0.
__device__ Index at(const Dims4& d, Index n, Index c, Index h, Index w) {
  n = d.n == 1 ? 0 : n;
  c = d.c == 1 ? 0 : c;
  h = d.h == 1 ? 0 : h;
  w = d.w == 1 ? 0 : w;
  return ((n * d.c + c) * d.h + h) * d.w + w;
}

__global__ void poolForwardKernel(Index planes, Index planeSize, const float* x, float* y) {
  for (Index p = firstIndex(); p < planes; p += gridStride()) {
    float sum = 0.0f;
    for (Index i = 0; i < planeSize; ++i) sum += x[p * planeSize + i];
    y[p] = sum / static_cast<float>(planeSize);
  }
}

__global__ void poolBackwardKernel(Index count, Index planeSize, const float* dy, float* dx, bool accumulate) {
  const float scale = 1.0f / static_cast<float>(planeSize);
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = dy[i / planeSize] * scale;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void mulForwardKernel(Dims4 out, Dims4 a, Dims4 b, const float* x, const float* z, float* y) {
  const Index count = out.n * out.c * out.h * out.w;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index w = i % out.w, h = (i / out.w) % out.h, c = (i / (out.w * out.h)) % out.c;
    const Index n = i / (out.w * out.h * out.c);
    y[i] = x[at(a, n, c, h, w)] * z[at(b, n, c, h, w)];
  }
}

// Along a broadcast axis, one index of the operand gathers every index of the output.
__device__ void gathered(Index self, Index out, Index index, Index& lo, Index& hi) {
  lo = self == 1 && out > 1 ? 0 : index;
  hi = self == 1 && out > 1 ? out : index + 1;
}

__global__ void mulBackwardKernel(Dims4 out, Dims4 self, Dims4 other, const float* dy, const float* value, float* dSelf,
                                  bool accumulate) {
  const Index count = self.n * self.c * self.h * self.w;
  for (Index e = firstIndex(); e < count; e += gridStride()) {
    const Index w = e % self.w, h = (e / self.w) % self.h, c = (e / (self.w * self.h)) % self.c;
    const Index n = e / (self.w * self.h * self.c);
    Index n0, n1, c0, c1, h0, h1, w0, w1;
    gathered(self.n, out.n, n, n0, n1);
    gathered(self.c, out.c, c, c0, c1);
    gathered(self.h, out.h, h, h0, h1);
    gathered(self.w, out.w, w, w0, w1);
    float sum = 0.0f;
    for (Index on = n0; on < n1; ++on)
      for (Index oc = c0; oc < c1; ++oc)
        for (Index oh = h0; oh < h1; ++oh)
          for (Index ow = w0; ow < w1; ++ow) sum += dy[at(out, on, oc, oh, ow)] * value[at(other, on, oc, oh, ow)];
    dSelf[e] = accumulate ? dSelf[e] + sum : sum;
  }
}

}  // namespace

Status globalAvgPoolForward(cudaStream_t stream, const Dims4& in, const float* x, float* y) {
  const Index planes = in.n * in.c;
  if (planes == 0) return Status::ok();
  poolForwardKernel<<<blocksFor(planes), kThreads, 0, stream>>>(planes, in.h * in.w, x, y);
  REMAT_CUDA_CHECK_LAUNCH("poolForwardKernel");
  return Status::ok();
}

Status globalAvgPoolBackward(cudaStream_t stream, const Dims4& in, const float* dy, float* dx, bool accumulate) {
  const Index count = in.n * in.c * in.h * in.w;
  if (count == 0) return Status::ok();
  poolBackwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, in.h * in.w, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("poolBackwardKernel");
  return Status::ok();
}

Status mulForward(cudaStream_t stream, const Dims4& out, const Dims4& a, const Dims4& b, const float* x, const float* z,
                  float* y) {
  const Index count = out.n * out.c * out.h * out.w;
  if (count == 0) return Status::ok();
  mulForwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(out, a, b, x, z, y);
  REMAT_CUDA_CHECK_LAUNCH("mulForwardKernel");
  return Status::ok();
}

Status mulBackwardOperand(cudaStream_t stream, const Dims4& out, const Dims4& self, const Dims4& other, const float* dy,
                          const float* value, float* dSelf, bool accumulate) {
  const Index count = self.n * self.c * self.h * self.w;
  if (count == 0) return Status::ok();
  mulBackwardKernel<<<blocksFor(count), kThreads, 0, stream>>>(out, self, other, dy, value, dSelf, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("mulBackwardKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
