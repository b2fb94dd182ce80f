#pragma once
// The own kernels of the mixed precisions on the GPU (kernels_half.cu; docs/memory-model.md 11.7),
// in bfloat16 (bf16-mixed) or float16 (fp16-mixed), as half_type.hpp selects:
// autocast's casts (float32 <-> bfloat16, round to nearest even, as PyTorch's and the CPU
// backend's), a bfloat16 gradient added into its float32 master (AccumulateGrad after
// ToCopyBackward), a linear's bias gradient from bfloat16 rows, the activations, the residual add,
// dropout and the loss's seed on bfloat16 tensors. Each computes in float32 and rounds once, the
// CPU's kernels_half.cpp rules element for element; one thread per element (per feature for sums,
// rows in order), so results are bitwise reproducible. Every launcher checks its launch and
// returns a Status naming the kernel. Internal to gpu/.
#include <cuda_bf16.h>

#include "kernels.hpp"

namespace remat::gpu::kernels {

// A half element's two bytes: bfloat16 under bf16-mixed, IEEE float16's bits under fp16-mixed
// (half_type.hpp's current type; the kernels read and write it through half_io.cuh's f and h).
using Bf16 = __nv_bfloat16;

// The activations with bfloat16 kernels: relu and relu6 by their own rules, the others kernels.hpp's
// Pointwise formulas.
enum class HalfActivation { Relu, Relu6, Pointwise };
struct HalfActivationFn {
  HalfActivation kind = HalfActivation::Relu;
  Pointwise fn = Pointwise::Sigmoid;  // kind Pointwise
};

// to = bfloat16(from): the weight copies each step and the input cast of a float32 activation.
Status castToHalf(cudaStream_t stream, Index count, const float* from, Bf16* to);
// to = float(from): a float32 layer's (layer norm's) copy of a bfloat16 input.
Status castToFloat(cudaStream_t stream, Index count, const Bf16* from, float* to);
// to += float(from): a bfloat16 weight gradient into the float32 master gradient.
Status addHalfInto(cudaStream_t stream, Index count, const Bf16* from, float* to);
// db[o] += float(bfloat16(sum over rows of dy[r][o])): PyTorch's half bias gradient is rounded
// before its cast.
Status addHalfBiasGradient(cudaStream_t stream, Index rows, Index features, const Bf16* dy, float* db);

// y[r][o] = bfloat16(y[r][o] + b[o]): a linear's float32 bias on its bfloat16 product.
Status addRowBiasHalf(cudaStream_t stream, Index rows, Index features, const float* bias, Bf16* y);

// relu, relu6 and the other activations (kernels.hpp's rules) on bfloat16 tensors; the backward
// reads y for relu, sigmoid and tanh, x for the others; dx (=|+=) the gradient.
Status activationForwardHalf(cudaStream_t stream, const HalfActivationFn& fn, Index count, const Bf16* x, Bf16* y);
Status activationBackwardHalf(cudaStream_t stream, const HalfActivationFn& fn, Index count, const Bf16* saved,
                              const Bf16* dy, Bf16* dx, bool accumulate);
// out = a + b; out (=|+=) a.
Status addHalf(cudaStream_t stream, Index count, const Bf16* a, const Bf16* b, Bf16* out);
Status copyOrAddHalf(cudaStream_t stream, Index count, const Bf16* a, Bf16* out, bool accumulate);
// Dropout with the float32 kernel's draws (the same mask element for element) on bfloat16 data.
Status dropoutForwardHalf(cudaStream_t stream, Index count, double p, std::uint64_t key, const Bf16* x, Bf16* y,
                          std::uint8_t* mask);
Status dropoutBackwardHalf(cudaStream_t stream, Index count, double p, const std::uint8_t* mask, const Bf16* dy,
                           Bf16* dx);
// The softmax cross-entropy seed from bfloat16 logits [batch][classes], in float32 then rounded:
// grad = (softmax - onehot(label)) / batch, times *lossScale when given (fp16-mixed's GradScaler:
// the float32 loss is scaled before the half gradient is rounded). Labels were checked on the host.
Status softmaxCrossEntropyBackwardHalf(cudaStream_t stream, Index batch, Index classes, const Bf16* logits,
                                       const std::int64_t* labels, Bf16* grad, const float* lossScale = nullptr);

}  // namespace remat::gpu::kernels
