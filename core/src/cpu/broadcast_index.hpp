// NumPy broadcasting over channels-last Dims4 tensors, shared by the broadcasting kernels
// (kernels_broadcast.cpp: mul; kernels_arith.cpp: add, sub, div): where an operand holds an output
// position, and an operand's gradient summed over the axes it was broadcast along. Included by
// those two files only.
#pragma once

#include "kernels.hpp"

namespace remat::cpu {

// The channels-last position of (n, c, h, w) in a tensor of dims `d`, an axis of extent 1 taking
// index 0.
inline Index broadcastAt(const Dims4& d, Index n, Index c, Index h, Index w) {
  n = d.n == 1 ? 0 : n;
  c = d.c == 1 ? 0 : c;
  h = d.h == 1 ? 0 : h;
  w = d.w == 1 ? 0 : w;
  return ((n * d.h + h) * d.w + w) * d.c + c;
}

// The output indices one index of an operand gathers from: all of them along a broadcast axis.
struct GatheredRange {
  Index lo = 0, hi = 0;
};
inline GatheredRange gatheredRange(Index self, Index out, Index index) {
  return self == 1 && out > 1 ? GatheredRange{0, out} : GatheredRange{index, index + 1};
}

// d(self) for an operand of dims `self` broadcast to `out`: each element, by one thread, the float32
// sum of term(n, c, h, w) over the output positions it reached, in one fixed order (n, h, w, c):
// bitwise the same at any thread count. Written, or added when `accumulate`, rounded to T once.
template <typename T, typename Term>
void sumOverBroadcast(const Dims4& out, const Dims4& self, T* dSelf, bool accumulate, Term term) {
  const Index count = self.n * self.c * self.h * self.w;
#pragma omp parallel for schedule(static)
  for (Index e = 0; e < count; ++e) {  // e runs over self channels-last: ((n * H + h) * W + w) * C + c
    const Index c = e % self.c, w = (e / self.c) % self.w, h = (e / (self.c * self.w)) % self.h;
    const Index n = e / (self.c * self.w * self.h);
    const GatheredRange rn = gatheredRange(self.n, out.n, n), rc = gatheredRange(self.c, out.c, c);
    const GatheredRange rh = gatheredRange(self.h, out.h, h), rw = gatheredRange(self.w, out.w, w);
    float sum = 0.0f;
    for (Index on = rn.lo; on < rn.hi; ++on)
      for (Index oh = rh.lo; oh < rh.hi; ++oh)
        for (Index ow = rw.lo; ow < rw.hi; ++ow)
          for (Index oc = rc.lo; oc < rc.hi; ++oc) sum += term(on, oc, oh, ow);
    dSelf[e] = stored<T>(accumulate ? valueOf(dSelf[e]) + sum : sum);
  }
}

}  // namespace remat::cpu
