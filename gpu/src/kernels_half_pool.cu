// bf16-mixed's kernels around the convolutions, the global pool and the broadcasting product
// (kernels_half_conv.hpp): each computes in float32 from bfloat16 and rounds once to nearest even,
// as kernels_half.cu. The adaptive pool is kernels_reduce.cu's, templated on the element type.
#include "half_io.cuh"
#include "kernels_half_conv.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using namespace half_io;  // the grid helpers, f (widen) and h (round once)

__global__ void addChannelBiasHalfKernel(Index count, Index channels, Index plane, const float* bias, Bf16* y) {
  for (Index i = firstIndex(); i < count; i += gridStride()) y[i] = h(f(y[i]) + bias[(i / plane) % channels]);
}

// One thread per channel, samples then positions in order (no atomics).
__global__ void addHalfChannelBiasGradientKernel(Index batch, Index channels, Index plane, const Bf16* dy, float* db) {
  for (Index c = firstIndex(); c < channels; c += gridStride()) {
    float sum = 0.0f;
    for (Index n = 0; n < batch; ++n) {
      const Bf16* row = dy + (n * channels + c) * plane;
      for (Index i = 0; i < plane; ++i) sum += f(row[i]);
    }
    db[c] += f(h(sum));
  }
}

// NCHW position of (n, c, h, w) in a tensor of dims d, an axis of extent 1 taking index 0.
__device__ inline Index at(const Dims4& d, Index n, Index c, Index h, Index w) {
  return (((d.n == 1 ? 0 : n) * d.c + (d.c == 1 ? 0 : c)) * d.h + (d.h == 1 ? 0 : h)) * d.w + (d.w == 1 ? 0 : w);
}

// The output indices one operand index gathers from: all of them along a broadcast axis.
__device__ inline Index lowOf(Index self, Index out, Index index) { return self == 1 && out > 1 ? 0 : index; }
__device__ inline Index highOf(Index self, Index out, Index index) { return self == 1 && out > 1 ? out : index + 1; }

// One thread per (n, c), the positions in order.
__global__ void globalAvgPoolForwardHalfKernel(Dims4 in, const Bf16* x, Bf16* y) {
  const Index planes = in.n * in.c, hw = in.h * in.w;
  for (Index i = firstIndex(); i < planes; i += gridStride()) {
    float sum = 0.0f;
    for (Index p = 0; p < hw; ++p) sum += f(x[i * hw + p]);
    y[i] = h(sum / static_cast<float>(hw));
  }
}

__global__ void globalAvgPoolBackwardHalfKernel(Dims4 in, const Bf16* dy, Bf16* dx, bool accumulate) {
  const Index hw = in.h * in.w, count = in.n * in.c * hw;
  const float scale = 1.0f / static_cast<float>(hw);
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = f(dy[i / hw]) * scale;
    dx[i] = h(accumulate ? f(dx[i]) + g : g);
  }
}

__global__ void mulForwardHalfKernel(Dims4 out, Dims4 a, Dims4 b, const Bf16* x, const Bf16* z, Bf16* y) {
  const Index count = out.n * out.c * out.h * out.w;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index w = i % out.w, hh = (i / out.w) % out.h, c = (i / (out.w * out.h)) % out.c,
                n = i / (out.w * out.h * out.c);
    y[i] = h(f(x[at(a, n, c, hh, w)]) * f(z[at(b, n, c, hh, w)]));
  }
}

// One thread per element of self, summing over the output positions it was broadcast to, in order.
__global__ void mulBackwardOperandHalfKernel(Dims4 out, Dims4 self, Dims4 other, const Bf16* dy, const Bf16* value,
                                             Bf16* dSelf, bool accumulate) {
  const Index count = self.n * self.c * self.h * self.w;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index w = i % self.w, hh = (i / self.w) % self.h, c = (i / (self.w * self.h)) % self.c,
                n = i / (self.w * self.h * self.c);
    float sum = 0.0f;
    for (Index on = lowOf(self.n, out.n, n); on < highOf(self.n, out.n, n); ++on)
      for (Index oc = lowOf(self.c, out.c, c); oc < highOf(self.c, out.c, c); ++oc)
        for (Index oh = lowOf(self.h, out.h, hh); oh < highOf(self.h, out.h, hh); ++oh)
          for (Index ow = lowOf(self.w, out.w, w); ow < highOf(self.w, out.w, w); ++ow)
            sum += f(dy[at(out, on, oc, oh, ow)]) * f(value[at(other, on, oc, oh, ow)]);
    dSelf[i] = h(accumulate ? f(dSelf[i]) + sum : sum);
  }
}

Index elements(const Dims4& d) { return d.n * d.c * d.h * d.w; }

}  // namespace

Status globalAvgPoolForwardHalf(cudaStream_t stream, const Dims4& in, const Bf16* x, Bf16* y) {
  if (in.n * in.c == 0) return Status::ok();
  globalAvgPoolForwardHalfKernel<<<blocksFor(in.n * in.c), kThreads, 0, stream>>>(in, x, y);
  REMAT_CUDA_CHECK_LAUNCH("globalAvgPoolForwardHalfKernel");
  return Status::ok();
}

Status globalAvgPoolBackwardHalf(cudaStream_t stream, const Dims4& in, const Bf16* dy, Bf16* dx, bool accumulate) {
  if (elements(in) == 0) return Status::ok();
  globalAvgPoolBackwardHalfKernel<<<blocksFor(elements(in)), kThreads, 0, stream>>>(in, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("globalAvgPoolBackwardHalfKernel");
  return Status::ok();
}

Status mulForwardHalf(cudaStream_t stream, const Dims4& out, const Dims4& a, const Dims4& b, const Bf16* x,
                      const Bf16* z, Bf16* y) {
  if (elements(out) == 0) return Status::ok();
  mulForwardHalfKernel<<<blocksFor(elements(out)), kThreads, 0, stream>>>(out, a, b, x, z, y);
  REMAT_CUDA_CHECK_LAUNCH("mulForwardHalfKernel");
  return Status::ok();
}

Status mulBackwardOperandHalf(cudaStream_t stream, const Dims4& out, const Dims4& self, const Dims4& other,
                              const Bf16* dy, const Bf16* value, Bf16* dSelf, bool accumulate) {
  if (elements(self) == 0) return Status::ok();
  mulBackwardOperandHalfKernel<<<blocksFor(elements(self)), kThreads, 0, stream>>>(out, self, other, dy, value, dSelf,
                                                                                   accumulate);
  REMAT_CUDA_CHECK_LAUNCH("mulBackwardOperandHalfKernel");
  return Status::ok();
}

Status addChannelBiasHalf(cudaStream_t stream, Index batch, Index channels, Index plane, const float* bias, Bf16* y) {
  const Index count = batch * channels * plane;
  if (count == 0) return Status::ok();
  addChannelBiasHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, channels, plane, bias, y);
  REMAT_CUDA_CHECK_LAUNCH("addChannelBiasHalfKernel");
  return Status::ok();
}

Status addHalfChannelBiasGradient(cudaStream_t stream, Index batch, Index channels, Index plane, const Bf16* dy,
                                  float* db) {
  if (channels == 0) return Status::ok();
  addHalfChannelBiasGradientKernel<<<blocksFor(channels), kThreads, 0, stream>>>(batch, channels, plane, dy, db);
  REMAT_CUDA_CHECK_LAUNCH("addHalfChannelBiasGradientKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
