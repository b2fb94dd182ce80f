// The Squeeze-and-Excitation kernels of blocks: global average pooling to [N, C, 1, 1] and the
// broadcasting product a * b, with their backwards. They allocate nothing: d(scale) of a product is
// a sum over the broadcast axes computed in place (no [N, C, H, W] temporary), so a block's
// workspaces are its arenas exactly (block.hpp). Each output element is computed by one thread in a
// fixed order: bitwise reproducible at any thread count.
//
// Speed: the tensors are channels-last, so every kernel walks rows of C contiguous floats (one
// index computation per row, vector loops over the channels); the sums over H x W (the pool, the
// gradient of the [N, C, 1, 1] scale) run over blocks of kSumChannels channels whose partial sums
// stay in cache while the rows stream by once. Reading one channel across all H x W rows (stride
// C) instead made the SE blocks' backward half of EfficientNet-B0's step (issue 22). Broadcasts
// other than SE's ([N, C, 1, 1] against [N, C, H, W]) take the generic per-element loops.
//
// Each kernel is a template over the element type: float32, and bfloat16 for a half block under
// bf16-mixed (memory-model.md 11.7: autocast runs mean, mul and their backwards in the input's
// dtype). A bfloat16 kernel computes in float32 and rounds each element it writes once, as
// PyTorch's CPU kernels for bfloat16 do (sums accumulate in float32).
#include <algorithm>

#include "broadcast_index.hpp"

namespace remat::cpu {
namespace {

// Channels summed together by one task of a sum over H x W: 64 floats, a few cache lines per row.
constexpr Index kSumChannels = 64;
Index channelBlocks(Index channels) { return (channels + kSumChannels - 1) / kSumChannels; }

// Output row r = (n, h, w) of an output of dims `out`, and where an operand of dims `d` has it.
struct Row {
  Index n = 0, h = 0, w = 0;
};
Row rowAt(const Dims4& out, Index r) { return Row{r / (out.h * out.w), (r / out.w) % out.h, r % out.w}; }
template <typename T>
const T* operandRow(const Dims4& d, const T* base, const Row& row) {
  return base + broadcastAt(d, row.n, 0, row.h, row.w);
}

bool sameDims(const Dims4& a, const Dims4& b) { return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w; }

// d(self) where self has the output's dims: one product per element, d(y) times the other operand
// (broadcast along its extent-1 axes).
template <typename T>
void mulBackwardFull(const Dims4& out, const Dims4& other, const T* dy, const T* value, T* dSelf, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < out.n * out.h * out.w; ++r) {
    const T* g = dy + r * out.c;
    const T* v = operandRow(other, value, rowAt(out, r));
    const Index step = other.c == 1 ? 0 : 1;
    T* d = dSelf + r * out.c;
    for (Index c = 0; c < out.c; ++c) {
      const float product = valueOf(g[c]) * valueOf(v[c * step]);
      d[c] = stored<T>(accumulate ? valueOf(d[c]) + product : product);
    }
  }
}

// d(self) where self is [N, C, 1, 1] and the output [N, C, H, W]: per (n, c) the sum over the
// positions, in order, of d(y) times the other operand.
template <typename T>
void mulBackwardScale(const Dims4& out, const Dims4& other, const T* dy, const T* value, T* dSelf, bool accumulate) {
  const Index hw = out.h * out.w, blocks = channelBlocks(out.c);
  const Index step = other.c == 1 ? 0 : 1;
#pragma omp parallel for schedule(static)
  for (Index task = 0; task < out.n * blocks; ++task) {
    const Index n = task / blocks, c0 = task % blocks * kSumChannels, width = std::min(kSumChannels, out.c - c0);
    float sum[kSumChannels] = {};
    for (Index p = 0; p < hw; ++p) {
      const T* g = dy + (n * hw + p) * out.c + c0;
      const T* v = operandRow(other, value, Row{n, p / out.w, p % out.w}) + c0 * step;
      for (Index c = 0; c < width; ++c) sum[c] += valueOf(g[c]) * valueOf(v[c * step]);
    }
    T* d = dSelf + n * out.c + c0;
    for (Index c = 0; c < width; ++c) d[c] = stored<T>(accumulate ? valueOf(d[c]) + sum[c] : sum[c]);
  }
}

template <typename T>
void globalAvgPoolForwardT(const Dims4& in, const T* x, T* y) {
  const Index hw = in.h * in.w, blocks = channelBlocks(in.c);
#pragma omp parallel for schedule(static)
  for (Index task = 0; task < in.n * blocks; ++task) {
    const Index n = task / blocks, c0 = task % blocks * kSumChannels, width = std::min(kSumChannels, in.c - c0);
    float sum[kSumChannels] = {};
    for (Index p = 0; p < hw; ++p) {  // the positions in order, as the per-channel loop summed them
      const T* row = x + (n * hw + p) * in.c + c0;
      for (Index c = 0; c < width; ++c) sum[c] += valueOf(row[c]);
    }
    for (Index c = 0; c < width; ++c) y[n * in.c + c0 + c] = stored<T>(sum[c] / static_cast<float>(hw));
  }
}

template <typename T>
void globalAvgPoolBackwardT(const Dims4& in, const T* dy, T* dx, bool accumulate) {
  const Index hw = in.h * in.w;
  const float scale = 1.0f / static_cast<float>(hw);
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < in.n * hw; ++r) {
    const Index n = r / hw;
    T* row = dx + r * in.c;
    const T* g = dy + n * in.c;
    if (accumulate)
      for (Index c = 0; c < in.c; ++c) row[c] = stored<T>(valueOf(row[c]) + valueOf(g[c]) * scale);
    else
      for (Index c = 0; c < in.c; ++c) row[c] = stored<T>(valueOf(g[c]) * scale);
  }
}

template <typename T>
void mulForwardT(const Dims4& out, const Dims4& a, const Dims4& b, const T* x, const T* z, T* y) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < out.n * out.h * out.w; ++r) {
    const Row row = rowAt(out, r);
    const T* xa = operandRow(a, x, row);
    const T* zb = operandRow(b, z, row);
    T* to = y + r * out.c;
    if (a.c == out.c && b.c == out.c)
      for (Index c = 0; c < out.c; ++c) to[c] = stored<T>(valueOf(xa[c]) * valueOf(zb[c]));
    else if (a.c == out.c)
      for (Index c = 0; c < out.c; ++c) to[c] = stored<T>(valueOf(xa[c]) * valueOf(zb[0]));
    else if (b.c == out.c)
      for (Index c = 0; c < out.c; ++c) to[c] = stored<T>(valueOf(xa[0]) * valueOf(zb[c]));
    else
      for (Index c = 0; c < out.c; ++c) to[c] = stored<T>(valueOf(xa[0]) * valueOf(zb[0]));
  }
}

template <typename T>
void mulBackwardOperandT(const Dims4& out, const Dims4& self, const Dims4& other, const T* dy, const T* value, T* dSelf,
                         bool accumulate) {
  if (sameDims(self, out)) return mulBackwardFull(out, other, dy, value, dSelf, accumulate);
  if (self.n == out.n && self.c == out.c && self.h == 1 && self.w == 1)
    return mulBackwardScale(out, other, dy, value, dSelf, accumulate);
  sumOverBroadcast(out, self, dSelf, accumulate, [&](Index on, Index oc, Index oh, Index ow) {
    return valueOf(dy[broadcastAt(out, on, oc, oh, ow)]) * valueOf(value[broadcastAt(other, on, oc, oh, ow)]);
  });
}

}  // namespace

void globalAvgPoolForward(const Dims4& in, const float* x, float* y) { globalAvgPoolForwardT(in, x, y); }
void globalAvgPoolForward(const Dims4& in, const BFloat16* x, BFloat16* y) { globalAvgPoolForwardT(in, x, y); }
void globalAvgPoolBackward(const Dims4& in, const float* dy, float* dx, bool accumulate) {
  globalAvgPoolBackwardT(in, dy, dx, accumulate);
}
void globalAvgPoolBackward(const Dims4& in, const BFloat16* dy, BFloat16* dx, bool accumulate) {
  globalAvgPoolBackwardT(in, dy, dx, accumulate);
}
void mulForward(const Dims4& out, const Dims4& a, const Dims4& b, const float* x, const float* z, float* y) {
  mulForwardT(out, a, b, x, z, y);
}
void mulForward(const Dims4& out, const Dims4& a, const Dims4& b, const BFloat16* x, const BFloat16* z, BFloat16* y) {
  mulForwardT(out, a, b, x, z, y);
}
void mulBackwardOperand(const Dims4& out, const Dims4& self, const Dims4& other, const float* dy, const float* value,
                        float* dSelf, bool accumulate) {
  mulBackwardOperandT(out, self, other, dy, value, dSelf, accumulate);
}
void mulBackwardOperand(const Dims4& out, const Dims4& self, const Dims4& other, const BFloat16* dy,
                        const BFloat16* value, BFloat16* dSelf, bool accumulate) {
  mulBackwardOperandT(out, self, other, dy, value, dSelf, accumulate);
}

}  // namespace remat::cpu
