// bfloat16 broadcasting add, sub and div and an accumulating dropout backward for bf16-mixed's
// blocks (kernels_half_arith.hpp): kernels_arith.cu's structure and expressions (one thread per
// output element forward, one per operand element backward summing in one fixed order: bitwise
// reproducible, no atomics, no allocation), reading bfloat16 as float32 and rounding once on write
// (__float2bfloat16_rn, the CPU's round to nearest even).
#include "kernel_grid.cuh"
#include "kernels_half_arith.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

__device__ inline float f(Bf16 v) { return __bfloat162float(v); }
__device__ inline Bf16 h(float v) { return __float2bfloat16_rn(v); }

// The NCHW index of (n, c, h, w) in a tensor of dims d, an axis of extent 1 taking index 0.
__device__ Index at(const Dims4& d, Index n, Index c, Index hh, Index w) {
  n = d.n == 1 ? 0 : n;
  c = d.c == 1 ? 0 : c;
  hh = d.h == 1 ? 0 : hh;
  w = d.w == 1 ? 0 : w;
  return ((n * d.c + c) * d.h + hh) * d.w + w;
}

__device__ float apply(Arith op, float a, float b) {
  switch (op) {
    case Arith::Add: return a + b;
    case Arith::Sub: return a - b;
    default: return a / b;
  }
}

// derivatives.yaml's add.Tensor, sub.Tensor and div.Tensor terms, as kernels_arith.cu writes them.
__device__ float term(Arith op, int operand, float g, float a, float b) {
  switch (op) {
    case Arith::Add: return g;
    case Arith::Sub: return operand == 0 ? g : -g;
    default: return operand == 0 ? g / b : -g * ((a / b) / b);
  }
}

__global__ void arithForwardHalfKernel(Arith op, Dims4 out, Dims4 a, Dims4 b, const Bf16* x, const Bf16* z, Bf16* y) {
  const Index count = out.n * out.c * out.h * out.w;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index w = i % out.w, hh = (i / out.w) % out.h, c = (i / (out.w * out.h)) % out.c;
    const Index n = i / (out.w * out.h * out.c);
    y[i] = h(apply(op, f(x[at(a, n, c, hh, w)]), f(z[at(b, n, c, hh, w)])));
  }
}

__device__ void gathered(Index self, Index out, Index index, Index& lo, Index& hi) {
  lo = self == 1 && out > 1 ? 0 : index;
  hi = self == 1 && out > 1 ? out : index + 1;
}

struct ArithOperands {
  Arith op;
  int operand;
  Dims4 out, a, b;
};

__global__ void arithBackwardHalfKernel(ArithOperands g, const Bf16* dy, const Bf16* x, const Bf16* z, Bf16* dSelf,
                                        bool accumulate) {
  const Dims4 self = g.operand == 0 ? g.a : g.b;
  const bool reads = g.op == Arith::Div;  // add and sub read no operand (x and z may be null)
  const Index count = self.n * self.c * self.h * self.w;
  for (Index e = firstIndex(); e < count; e += gridStride()) {
    const Index w = e % self.w, hh = (e / self.w) % self.h, c = (e / (self.w * self.h)) % self.c;
    const Index n = e / (self.w * self.h * self.c);
    Index n0, n1, c0, c1, h0, h1, w0, w1;
    gathered(self.n, g.out.n, n, n0, n1);
    gathered(self.c, g.out.c, c, c0, c1);
    gathered(self.h, g.out.h, hh, h0, h1);
    gathered(self.w, g.out.w, w, w0, w1);
    float sum = 0.0f;
    for (Index on = n0; on < n1; ++on)
      for (Index oc = c0; oc < c1; ++oc)
        for (Index oh = h0; oh < h1; ++oh)
          for (Index ow = w0; ow < w1; ++ow) {
            const float av = reads ? f(x[at(g.a, on, oc, oh, ow)]) : 0.0f;
            const float bv = reads ? f(z[at(g.b, on, oc, oh, ow)]) : 0.0f;
            sum += term(g.op, g.operand, f(dy[at(g.out, on, oc, oh, ow)]), av, bv);
          }
    dSelf[e] = h(accumulate ? f(dSelf[e]) + sum : sum);
  }
}

__global__ void dropoutBackwardHalfIntoKernel(Index count, float scale, const std::uint8_t* mask, const Bf16* dy,
                                              Bf16* dx, bool accumulate) {
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const float g = mask[i] ? f(dy[i]) * scale : 0.0f;
    dx[i] = h(accumulate ? f(dx[i]) + g : g);
  }
}

}  // namespace

Status arithForwardHalf(cudaStream_t stream, Arith op, const Dims4& out, const Dims4& a, const Dims4& b, const Bf16* x,
                        const Bf16* z, Bf16* y) {
  const Index count = out.n * out.c * out.h * out.w;
  if (count == 0) return Status::ok();
  arithForwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(op, out, a, b, x, z, y);
  REMAT_CUDA_CHECK_LAUNCH("arithForwardHalfKernel");
  return Status::ok();
}

Status arithBackwardOperandHalf(cudaStream_t stream, Arith op, int operand, const Dims4& out, const Dims4& a,
                                const Dims4& b, const Bf16* dy, const Bf16* x, const Bf16* z, Bf16* dSelf,
                                bool accumulate) {
  const Dims4& self = operand == 0 ? a : b;
  const Index count = self.n * self.c * self.h * self.w;
  if (count == 0) return Status::ok();
  arithBackwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(ArithOperands{op, operand, out, a, b}, dy, x, z,
                                                                     dSelf, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("arithBackwardHalfKernel");
  return Status::ok();
}

Status dropoutBackwardHalfInto(cudaStream_t stream, Index count, double p, const std::uint8_t* mask, const Bf16* dy,
                               Bf16* dx, bool accumulate) {
  if (count == 0) return Status::ok();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  dropoutBackwardHalfIntoKernel<<<blocksFor(count), kThreads, 0, stream>>>(count, scale, mask, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("dropoutBackwardHalfIntoKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
