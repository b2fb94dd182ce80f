// The broadcasting sum, difference and quotient of blocks (issue 22) with their backwards: the CPU
// backend's kernels_arith.cpp in the GPU's layout (NCHW, [N, F] as [N, F, 1, 1], [N, S, F] as
// [N, S, F, 1]: row-major either way). One thread per output element forward; one thread per
// element of an operand backward, summing over the output positions it was broadcast to in one
// fixed order: bitwise reproducible whatever the launch shape; no atomics, no allocation (a
// block's workspaces are its arenas exactly, block.hpp). The kernels are templated on the element
// type: bf16-mixed's launchers (kernels_half_arith.hpp) run them on bfloat16, reading as float32
// and rounding once on write (half_io.cuh), the CPU's kernels_arith.cpp rules element for element.
#include "half_io.cuh"
#include "kernels.hpp"
#include "kernels_half_arith.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using namespace half_io;  // the grid helpers, load (widen) and store<T> (round once for bfloat16)

// The NCHW index of (n, c, h, w) in a tensor of dims d, an axis of extent 1 taking index 0.
__device__ Index at(const Dims4& d, Index n, Index c, Index h, Index w) {
  n = d.n == 1 ? 0 : n;
  c = d.c == 1 ? 0 : c;
  h = d.h == 1 ? 0 : h;
  w = d.w == 1 ? 0 : w;
  return ((n * d.c + c) * d.h + h) * d.w + w;
}

__device__ float apply(Arith op, float a, float b) {
  switch (op) {
    case Arith::Add: return a + b;
    case Arith::Sub: return a - b;
    default: return a / b;
  }
}

// One output position's contribution to d(operand): derivatives.yaml's add.Tensor (grad),
// sub.Tensor (grad, -grad) and div.Tensor (grad / other; -grad * ((self / other) / other), as
// div_tensor_other_backward writes it), the CPU's expressions.
__device__ float term(Arith op, int operand, float g, float a, float b) {
  switch (op) {
    case Arith::Add: return g;
    case Arith::Sub: return operand == 0 ? g : -g;
    default: return operand == 0 ? g / b : -g * ((a / b) / b);
  }
}

template <typename T>
__global__ void arithForwardKernel(Arith op, Dims4 out, Dims4 a, Dims4 b, const T* x, const T* z, T* y) {
  const Index count = out.n * out.c * out.h * out.w;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index w = i % out.w, h = (i / out.w) % out.h, c = (i / (out.w * out.h)) % out.c;
    const Index n = i / (out.w * out.h * out.c);
    y[i] = store<T>(apply(op, load(x[at(a, n, c, h, w)]), load(z[at(b, n, c, h, w)])));
  }
}

// Along a broadcast axis, one index of the operand gathers every index of the output.
__device__ void gathered(Index self, Index out, Index index, Index& lo, Index& hi) {
  lo = self == 1 && out > 1 ? 0 : index;
  hi = self == 1 && out > 1 ? out : index + 1;
}

struct ArithOperands {
  Arith op;
  int operand;
  Dims4 out, a, b;
};

template <typename T>
__global__ void arithBackwardKernel(ArithOperands g, const T* dy, const T* x, const T* z, T* dSelf, bool accumulate) {
  const Dims4 self = g.operand == 0 ? g.a : g.b;
  const bool reads = g.op == Arith::Div;  // add and sub read no operand (x and z may be null)
  const Index count = self.n * self.c * self.h * self.w;
  for (Index e = firstIndex(); e < count; e += gridStride()) {
    const Index w = e % self.w, h = (e / self.w) % self.h, c = (e / (self.w * self.h)) % self.c;
    const Index n = e / (self.w * self.h * self.c);
    Index n0, n1, c0, c1, h0, h1, w0, w1;
    gathered(self.n, g.out.n, n, n0, n1);
    gathered(self.c, g.out.c, c, c0, c1);
    gathered(self.h, g.out.h, h, h0, h1);
    gathered(self.w, g.out.w, w, w0, w1);
    float sum = 0.0f;
    for (Index on = n0; on < n1; ++on)
      for (Index oc = c0; oc < c1; ++oc)
        for (Index oh = h0; oh < h1; ++oh)
          for (Index ow = w0; ow < w1; ++ow) {
            const float av = reads ? load(x[at(g.a, on, oc, oh, ow)]) : 0.0f;
            const float bv = reads ? load(z[at(g.b, on, oc, oh, ow)]) : 0.0f;
            sum += term(g.op, g.operand, load(dy[at(g.out, on, oc, oh, ow)]), av, bv);
          }
    dSelf[e] = store<T>(accumulate ? load(dSelf[e]) + sum : sum);
  }
}

// Each launches nothing for an empty tensor and checks the launch under the public launcher's kernel
// name (`launchName`: "launch of <kernel>", float32 and bfloat16 apart).
template <typename T>
Status launchArithForward(cudaStream_t stream, Arith op, const Dims4& out, const Dims4& a, const Dims4& b, const T* x,
                          const T* z, T* y, const char* launchName) {
  const Index count = out.n * out.c * out.h * out.w;
  if (count == 0) return Status::ok();
  arithForwardKernel<T><<<blocksFor(count), kThreads, 0, stream>>>(op, out, a, b, x, z, y);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

template <typename T>
Status launchArithBackward(cudaStream_t stream, const ArithOperands& g, const T* dy, const T* x, const T* z, T* dSelf,
                           bool accumulate, const char* launchName) {
  const Dims4& self = g.operand == 0 ? g.a : g.b;
  const Index count = self.n * self.c * self.h * self.w;
  if (count == 0) return Status::ok();
  arithBackwardKernel<T><<<blocksFor(count), kThreads, 0, stream>>>(g, dy, x, z, dSelf, accumulate);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

}  // namespace

Status arithForward(cudaStream_t stream, Arith op, const Dims4& out, const Dims4& a, const Dims4& b, const float* x,
                    const float* z, float* y) {
  return launchArithForward(stream, op, out, a, b, x, z, y, "launch of arithForwardKernel");
}

Status arithBackwardOperand(cudaStream_t stream, Arith op, int operand, const Dims4& out, const Dims4& a,
                            const Dims4& b, const float* dy, const float* x, const float* z, float* dSelf,
                            bool accumulate) {
  return launchArithBackward(stream, ArithOperands{op, operand, out, a, b}, dy, x, z, dSelf, accumulate,
                             "launch of arithBackwardKernel");
}

Status arithForwardHalf(cudaStream_t stream, Arith op, const Dims4& out, const Dims4& a, const Dims4& b, const Bf16* x,
                        const Bf16* z, Bf16* y) {
  return launchArithForward(stream, op, out, a, b, x, z, y, "launch of arithForwardHalfKernel");
}

Status arithBackwardOperandHalf(cudaStream_t stream, Arith op, int operand, const Dims4& out, const Dims4& a,
                                const Dims4& b, const Bf16* dy, const Bf16* x, const Bf16* z, Bf16* dSelf,
                                bool accumulate) {
  return launchArithBackward(stream, ArithOperands{op, operand, out, a, b}, dy, x, z, dSelf, accumulate,
                             "launch of arithBackwardHalfKernel");
}

}  // namespace remat::gpu::kernels
