// The broadcasting sum, difference and quotient of blocks (issue 22) with their backwards, in the
// structure of kernels_broadcast.cpp's product: channels-last Dims4 operands, an axis of extent 1
// repeating (NumPy broadcasting), no temporaries (a block's workspaces are its arenas exactly,
// block.hpp). An operand's gradient is summed over the axes it was broadcast along, each element of
// it by one thread over the output positions in one fixed order (n, h, w, c): bitwise the same at
// any thread count and in every plan. float32 only: a half block refuses sub and div by name and a
// broadcasting add by its shapes (prepare.cpp).
#include "kernels.hpp"

namespace remat::cpu {
namespace {

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

}  // namespace

void broadcastForward(BroadcastOp op, const Dims4& out, const Dims4& a, const Dims4& b, const float* x, const float* z,
                      float* y) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < out.n * out.h * out.w; ++r) {
    const Index n = r / (out.h * out.w), h = (r / out.w) % out.h, w = r % out.w;
    const float* xa = x + at(a, n, 0, h, w);
    const float* zb = z + at(b, n, 0, h, w);
    const Index stepA = a.c == 1 ? 0 : 1, stepB = b.c == 1 ? 0 : 1;
    float* to = y + r * out.c;
    for (Index c = 0; c < out.c; ++c) to[c] = apply(op, xa[c * stepA], zb[c * stepB]);
  }
}

void broadcastBackwardOperand(BroadcastOp op, int operand, const Dims4& out, const Dims4& a, const Dims4& b,
                              const float* dy, const float* x, const float* z, float* dSelf, bool accumulate) {
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
            const float av = reads ? x[at(a, on, oc, oh, ow)] : 0.0f;
            const float bv = reads ? z[at(b, on, oc, oh, ow)] : 0.0f;
            sum += term(op, operand, dy[at(out, on, oc, oh, ow)], av, bv);
          }
    dSelf[e] = accumulate ? dSelf[e] + sum : sum;
  }
}

}  // namespace remat::cpu
