// The broadcasting sum, difference and quotient of blocks (issue 22) with their backwards, in the
// structure of kernels_broadcast.cpp's product: channels-last Dims4 operands, an axis of extent 1
// repeating (NumPy broadcasting), no temporaries (a block's workspaces are its arenas exactly,
// block.hpp). An operand's gradient is summed over the axes it was broadcast along, each element of
// it by one thread over the output positions in one fixed order (n, h, w, c): bitwise the same at
// any thread count and in every plan. Each kernel is a template over the element type: float32, and
// bfloat16 for a half block (bf16-mixed and pure bf16: add, sub and div are on neither of autocast's
// lists, so they run in their inputs' dtype, bfloat16 inside a half block), computing in float32 and
// rounding each element it writes once, as kernels_broadcast.cpp's product (sums accumulate in
// float32).
#include <type_traits>

#include "kernels.hpp"

namespace remat::cpu {
namespace {

float load(float v) { return v; }
float load(BFloat16 v) { return v.value(); }
template <typename T>
T store(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return T(v);
}

// The channels-last position of (n, c, h, w) in a tensor of dims `d`, an axis of extent 1 taking
// index 0.
Index at(const Dims4& d, Index n, Index c, Index h, Index w) {
  n = d.n == 1 ? 0 : n;
  c = d.c == 1 ? 0 : c;
  h = d.h == 1 ? 0 : h;
  w = d.w == 1 ? 0 : w;
  return ((n * d.h + h) * d.w + w) * d.c + c;
}

// The output indices one index of an operand gathers from: all of them along a broadcast axis.
struct Range {
  Index lo = 0, hi = 0;
};
Range gathered(Index self, Index out, Index index) {
  return self == 1 && out > 1 ? Range{0, out} : Range{index, index + 1};
}

float apply(BroadcastOp op, float a, float b) {
  switch (op) {
    case BroadcastOp::Add: return a + b;
    case BroadcastOp::Sub: return a - b;
    default: return a / b;
  }
}

// One output position's contribution to d(operand): derivatives.yaml's add.Tensor (grad), sub.Tensor
// (grad, -grad) and div.Tensor (grad / other; -grad * ((self / other) / other), as
// div_tensor_other_backward writes it).
float term(BroadcastOp op, int operand, float g, float a, float b) {
  switch (op) {
    case BroadcastOp::Add: return g;
    case BroadcastOp::Sub: return operand == 0 ? g : -g;
    default: return operand == 0 ? g / b : -g * ((a / b) / b);
  }
}

template <typename T>
void broadcastForwardT(BroadcastOp op, const Dims4& out, const Dims4& a, const Dims4& b, const T* x, const T* z, T* y) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < out.n * out.h * out.w; ++r) {
    const Index n = r / (out.h * out.w), h = (r / out.w) % out.h, w = r % out.w;
    const T* xa = x + at(a, n, 0, h, w);
    const T* zb = z + at(b, n, 0, h, w);
    const Index stepA = a.c == 1 ? 0 : 1, stepB = b.c == 1 ? 0 : 1;
    T* to = y + r * out.c;
    for (Index c = 0; c < out.c; ++c) to[c] = store<T>(apply(op, load(xa[c * stepA]), load(zb[c * stepB])));
  }
}

template <typename T>
void broadcastBackwardOperandT(BroadcastOp op, int operand, const Dims4& out, const Dims4& a, const Dims4& b,
                               const T* dy, const T* x, const T* z, T* dSelf, bool accumulate) {
  const Dims4& self = operand == 0 ? a : b;
  const bool reads = op == BroadcastOp::Div;  // add and sub read no operand (x and z may be null)
  const Index count = self.n * self.c * self.h * self.w;
#pragma omp parallel for schedule(static)
  for (Index e = 0; e < count; ++e) {  // e runs over self channels-last: ((n * H + h) * W + w) * C + c
    const Index c = e % self.c, w = (e / self.c) % self.w, h = (e / (self.c * self.w)) % self.h;
    const Index n = e / (self.c * self.w * self.h);
    const Range rn = gathered(self.n, out.n, n), rc = gathered(self.c, out.c, c);
    const Range rh = gathered(self.h, out.h, h), rw = gathered(self.w, out.w, w);
    float sum = 0.0f;
    for (Index on = rn.lo; on < rn.hi; ++on)
      for (Index oh = rh.lo; oh < rh.hi; ++oh)
        for (Index ow = rw.lo; ow < rw.hi; ++ow)
          for (Index oc = rc.lo; oc < rc.hi; ++oc) {
            const float av = reads ? load(x[at(a, on, oc, oh, ow)]) : 0.0f;
            const float bv = reads ? load(z[at(b, on, oc, oh, ow)]) : 0.0f;
            sum += term(op, operand, load(dy[at(out, on, oc, oh, ow)]), av, bv);
          }
    dSelf[e] = store<T>(accumulate ? load(dSelf[e]) + sum : sum);
  }
}

}  // namespace

void broadcastForward(BroadcastOp op, const Dims4& out, const Dims4& a, const Dims4& b, const float* x, const float* z,
                      float* y) {
  broadcastForwardT(op, out, a, b, x, z, y);
}
void broadcastForward(BroadcastOp op, const Dims4& out, const Dims4& a, const Dims4& b, const BFloat16* x,
                      const BFloat16* z, BFloat16* y) {
  broadcastForwardT(op, out, a, b, x, z, y);
}
void broadcastBackwardOperand(BroadcastOp op, int operand, const Dims4& out, const Dims4& a, const Dims4& b,
                              const float* dy, const float* x, const float* z, float* dSelf, bool accumulate) {
  broadcastBackwardOperandT(op, operand, out, a, b, dy, x, z, dSelf, accumulate);
}
void broadcastBackwardOperand(BroadcastOp op, int operand, const Dims4& out, const Dims4& a, const Dims4& b,
                              const BFloat16* dy, const BFloat16* x, const BFloat16* z, BFloat16* dSelf,
                              bool accumulate) {
  broadcastBackwardOperandT(op, operand, out, a, b, dy, x, z, dSelf, accumulate);
}

}  // namespace remat::cpu
