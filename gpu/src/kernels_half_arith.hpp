#pragma once
// bf16-mixed's element-wise block ops on the GPU: issue 22's broadcasting add, sub and div on
// bfloat16 operands (kernels_arith.cu's kernels, templated on the element type), and an inner
// dropout's backward that adds into a gradient another op wrote first (kernels_half_arith.cu).
// Add, sub and div are on none of autocast's lists, so inside a half block they run in their
// inputs' dtype, bfloat16: each computes in float32 and rounds every element it writes once (sums
// over broadcast axes accumulate in float32), the CPU's kernels_arith.cpp rules element for
// element, in the float32 kernels' fixed order. Internal to gpu/.
#include "kernels.hpp"
#include "kernels_half.hpp"

namespace remat::gpu::kernels {

// y = x op z with NumPy broadcasting (kernels.hpp's arithForward on bfloat16).
Status arithForwardHalf(cudaStream_t stream, Arith op, const Dims4& out, const Dims4& a, const Dims4& b, const Bf16* x,
                        const Bf16* z, Bf16* y);
// d(operand) from dy (and, for div, both operands), summed over its broadcast axes; written or
// added (accumulate: round(dSelf + sum)).
Status arithBackwardOperandHalf(cudaStream_t stream, Arith op, int operand, const Dims4& out, const Dims4& a,
                                const Dims4& b, const Bf16* dy, const Bf16* x, const Bf16* z, Bf16* dSelf,
                                bool accumulate);
// Dropout's backward from its mask, written or added (the float32 kernel's, rounded once).
Status dropoutBackwardHalfInto(cudaStream_t stream, Index count, double p, const std::uint8_t* mask, const Bf16* dy,
                               Bf16* dx, bool accumulate);

}  // namespace remat::gpu::kernels
