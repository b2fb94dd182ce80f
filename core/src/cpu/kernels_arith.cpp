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
#include "broadcast_index.hpp"

namespace remat::cpu {
namespace {

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
    const T* xa = x + broadcastAt(a, n, 0, h, w);
    const T* zb = z + broadcastAt(b, n, 0, h, w);
    const Index stepA = a.c == 1 ? 0 : 1, stepB = b.c == 1 ? 0 : 1;
    T* to = y + r * out.c;
    for (Index c = 0; c < out.c; ++c) to[c] = stored<T>(apply(op, valueOf(xa[c * stepA]), valueOf(zb[c * stepB])));
  }
}

template <typename T>
void broadcastBackwardOperandT(BroadcastOp op, int operand, const Dims4& out, const Dims4& a, const Dims4& b,
                               const T* dy, const T* x, const T* z, T* dSelf, bool accumulate) {
  const Dims4& self = operand == 0 ? a : b;
  const bool reads = op == BroadcastOp::Div;  // add and sub read no operand (x and z may be null)
  sumOverBroadcast(out, self, dSelf, accumulate, [&](Index on, Index oc, Index oh, Index ow) {
    const float av = reads ? valueOf(x[broadcastAt(a, on, oc, oh, ow)]) : 0.0f;
    const float bv = reads ? valueOf(z[broadcastAt(b, on, oc, oh, ow)]) : 0.0f;
    return term(op, operand, valueOf(dy[broadcastAt(out, on, oc, oh, ow)]), av, bv);
  });
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
