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
#include <algorithm>

#include "kernels.hpp"

namespace remat::cpu {
namespace {

// The channels-last position of (n, c, h, w) in a tensor of dims `d`, an axis of extent 1 taking
// index 0 (NumPy broadcasting).
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

// Channels summed together by one task of a sum over H x W: 64 floats, a few cache lines per row.
constexpr Index kSumChannels = 64;
Index channelBlocks(Index channels) { return (channels + kSumChannels - 1) / kSumChannels; }

// Output row r = (n, h, w) of an output of dims `out`, and where an operand of dims `d` has it.
struct Row {
  Index n = 0, h = 0, w = 0;
};
Row rowAt(const Dims4& out, Index r) { return Row{r / (out.h * out.w), (r / out.w) % out.h, r % out.w}; }
const float* operandRow(const Dims4& d, const float* base, const Row& row) {
  return base + at(d, row.n, 0, row.h, row.w);
}

bool sameDims(const Dims4& a, const Dims4& b) { return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w; }

// d(self) where self has the output's dims: one product per element, d(y) times the other operand
// (broadcast along its extent-1 axes).
void mulBackwardFull(const Dims4& out, const Dims4& other, const float* dy, const float* value, float* dSelf,
                     bool accumulate) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < out.n * out.h * out.w; ++r) {
    const float* g = dy + r * out.c;
    const float* v = operandRow(other, value, rowAt(out, r));
    const Index step = other.c == 1 ? 0 : 1;
    float* d = dSelf + r * out.c;
    for (Index c = 0; c < out.c; ++c) {
      const float product = g[c] * v[c * step];
      d[c] = accumulate ? d[c] + product : product;
    }
  }
}

// d(self) where self is [N, C, 1, 1] and the output [N, C, H, W]: per (n, c) the sum over the
// positions, in order, of d(y) times the other operand.
void mulBackwardScale(const Dims4& out, const Dims4& other, const float* dy, const float* value, float* dSelf,
                      bool accumulate) {
  const Index hw = out.h * out.w, blocks = channelBlocks(out.c);
  const Index step = other.c == 1 ? 0 : 1;
#pragma omp parallel for schedule(static)
  for (Index task = 0; task < out.n * blocks; ++task) {
    const Index n = task / blocks, c0 = task % blocks * kSumChannels, width = std::min(kSumChannels, out.c - c0);
    float sum[kSumChannels] = {};
    for (Index p = 0; p < hw; ++p) {
      const float* g = dy + (n * hw + p) * out.c + c0;
      const float* v = operandRow(other, value, Row{n, p / out.w, p % out.w}) + c0 * step;
      for (Index c = 0; c < width; ++c) sum[c] += g[c] * v[c * step];
    }
    float* d = dSelf + n * out.c + c0;
    for (Index c = 0; c < width; ++c) d[c] = accumulate ? d[c] + sum[c] : sum[c];
  }
}

}  // namespace

void globalAvgPoolForward(const Dims4& in, const float* x, float* y) {
  const Index hw = in.h * in.w, blocks = channelBlocks(in.c);
#pragma omp parallel for schedule(static)
  for (Index task = 0; task < in.n * blocks; ++task) {
    const Index n = task / blocks, c0 = task % blocks * kSumChannels, width = std::min(kSumChannels, in.c - c0);
    float sum[kSumChannels] = {};
    for (Index p = 0; p < hw; ++p) {  // the positions in order, as the per-channel loop summed them
      const float* row = x + (n * hw + p) * in.c + c0;
      for (Index c = 0; c < width; ++c) sum[c] += row[c];
    }
    for (Index c = 0; c < width; ++c) y[n * in.c + c0 + c] = sum[c] / static_cast<float>(hw);
  }
}

void globalAvgPoolBackward(const Dims4& in, const float* dy, float* dx, bool accumulate) {
  const Index hw = in.h * in.w;
  const float scale = 1.0f / static_cast<float>(hw);
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < in.n * hw; ++r) {
    const Index n = r / hw;
    float* row = dx + r * in.c;
    const float* g = dy + n * in.c;
    if (accumulate)
      for (Index c = 0; c < in.c; ++c) row[c] += g[c] * scale;
    else
      for (Index c = 0; c < in.c; ++c) row[c] = g[c] * scale;
  }
}

void mulForward(const Dims4& out, const Dims4& a, const Dims4& b, const float* x, const float* z, float* y) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < out.n * out.h * out.w; ++r) {
    const Row row = rowAt(out, r);
    const float* xa = operandRow(a, x, row);
    const float* zb = operandRow(b, z, row);
    float* to = y + r * out.c;
    if (a.c == out.c && b.c == out.c)
      for (Index c = 0; c < out.c; ++c) to[c] = xa[c] * zb[c];
    else if (a.c == out.c)
      for (Index c = 0; c < out.c; ++c) to[c] = xa[c] * zb[0];
    else if (b.c == out.c)
      for (Index c = 0; c < out.c; ++c) to[c] = xa[0] * zb[c];
    else
      for (Index c = 0; c < out.c; ++c) to[c] = xa[0] * zb[0];
  }
}

void mulBackwardOperand(const Dims4& out, const Dims4& self, const Dims4& other, const float* dy, const float* value,
                        float* dSelf, bool accumulate) {
  if (sameDims(self, out)) return mulBackwardFull(out, other, dy, value, dSelf, accumulate);
  if (self.n == out.n && self.c == out.c && self.h == 1 && self.w == 1)
    return mulBackwardScale(out, other, dy, value, dSelf, accumulate);
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
          for (Index oc = rc.lo; oc < rc.hi; ++oc)
            sum += dy[at(out, on, oc, oh, ow)] * value[at(other, on, oc, oh, ow)];
    dSelf[e] = accumulate ? dSelf[e] + sum : sum;
  }
}

}  // namespace remat::cpu
