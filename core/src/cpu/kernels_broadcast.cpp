// The Squeeze-and-Excitation kernels of blocks: global average pooling to [N, C, 1, 1] and the
// broadcasting product a * b, with their backwards. They allocate nothing: d(scale) of a product is
// a sum over the broadcast axes computed in place (no [N, C, H, W] temporary), so a block's
// workspaces are its arenas exactly (block.hpp). Each output element is computed by one thread in a
// fixed order: bitwise reproducible at any thread count.
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

}  // namespace

void globalAvgPoolForward(const Dims4& in, const float* x, float* y) {
  const Index hw = in.h * in.w;
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < in.n * in.c; ++i) {
    const Index n = i / in.c, c = i % in.c;
    float sum = 0.0f;
    for (Index p = 0; p < hw; ++p) sum += x[(n * hw + p) * in.c + c];
    y[i] = sum / static_cast<float>(hw);
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
    const Index n = r / (out.h * out.w), h = (r / out.w) % out.h, w = r % out.w;
    for (Index c = 0; c < out.c; ++c) y[r * out.c + c] = x[at(a, n, c, h, w)] * z[at(b, n, c, h, w)];
  }
}

void mulBackwardOperand(const Dims4& out, const Dims4& self, const Dims4& other, const float* dy, const float* value,
                        float* dSelf, bool accumulate) {
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
