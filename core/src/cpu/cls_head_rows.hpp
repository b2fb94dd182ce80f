// cls_head's steps that all three precisions take alike (run_vit.cpp: float32; run_vit_half.cpp:
// bf16-mixed; run_vit_pure.cpp: pure bf16), written once on the element type T (float, or BFloat16,
// whose results are computed in float32 and rounded once, as PyTorch's bfloat16 kernels do): token
// 0's rows gathered, BERT's tanh and its backward, d(token 0) scattered back. Included by those
// .cpp files only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels.hpp"

namespace remat::cpu {

// Token 0 of each sample: rows n * seq of [batch, seq, width], contiguous (x[:, 0] is a view; the
// linear's matmul reads a .contiguous() copy).
template <typename T>
void gatherFirstTokens(Index batch, Index seq, Index width, const T* x, T* rows) {
  for (Index n = 0; n < batch; ++n) std::memcpy(rows + n * width, x + n * seq * width, sizeof(T) * width);
}

// select_backward's dense gradient: d(token 0) `dRows` scattered into a zero [batch, seq, width].
template <typename T>
void scatterFirstTokens(Index batch, Index seq, Index width, const T* dRows, T* full) {
  std::fill_n(full, batch * seq * width, T(0.0f));
  for (Index n = 0; n < batch; ++n) std::memcpy(full + n * seq * width, dRows + n * width, sizeof(T) * width);
}

// BERT's pooler: y = tanh(z).
template <typename T>
void poolerTanhForward(Index count, const T* z, T* y) {
  for (Index i = 0; i < count; ++i) y[i] = T(std::tanh(valueOf(z[i])));
}

// Its backward from its result (x(l) is kept for it): dz = dy * (1 - y^2).
template <typename T>
void poolerTanhBackward(Index count, const T* dy, const T* y, T* dz) {
  for (Index i = 0; i < count; ++i) dz[i] = T(valueOf(dy[i]) * (1.0f - valueOf(y[i]) * valueOf(y[i])));
}

}  // namespace remat::cpu
