// Pooling on channels-last activations. Window taps are visited in (kh, kw) order; the backward
// passes zero dx and then scatter each output's gradient in (n, oh, ow, c) order.
#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels.hpp"

namespace remat::cpu {
namespace {

// The input rows (or columns) [lo, hi) that output row (or column) o reads, and the factor of an
// average's divisor that this axis contributes.
struct Span {
  Index lo = 0, hi = 0;
  Index divisor = 1;
};

// The window of one output pixel: rows x columns.
struct Window {
  Span rows, cols;
  float divisor() const { return static_cast<float>(rows.divisor * cols.divisor); }
};

// max_pool2d and avg_pool2d: the strided, padded kernel clipped to the input; the divisor is
// PyTorch's with count_include_pad (the window clipped to input + padding).
struct KernelSpans {
  const PoolGeometry& g;
  Span operator()(Index o, Index extent, Index) const {
    const Index start = o * g.stride - g.padding;
    Span s;
    s.lo = std::max<Index>(start, 0);
    s.hi = std::max(s.lo, std::min<Index>(start + g.kernel, extent));
    s.divisor = std::min<Index>(start + g.kernel, extent + g.padding) - start;
    return s;
  }
};

// adaptive_avg_pool2d: PyTorch's bins [floor(o*In/Out), ceil((o+1)*In/Out)); the average divides
// by the bin's size.
struct AdaptiveSpans {
  Span operator()(Index o, Index extent, Index out) const {
    Span s;
    s.lo = (o * extent) / out;
    s.hi = ((o + 1) * extent + out - 1) / out;
    s.divisor = s.hi - s.lo;
    return s;
  }
};

// Calls visit(n, window, outOffset) for every output pixel in (n, oh, ow) order; outOffset is the
// pixel's first channel in y / dy.
template <typename SpanOf, typename Visit>
void forEachOutput(const PoolGeometry& g, SpanOf spanOf, Visit&& visit) {
  for (Index n = 0; n < g.batch; ++n)
    for (Index oh = 0; oh < g.outHeight; ++oh) {
      Window w;
      w.rows = spanOf(oh, g.inHeight, g.outHeight);
      for (Index ow = 0; ow < g.outWidth; ++ow) {
        w.cols = spanOf(ow, g.inWidth, g.outWidth);
        visit(n, w, ((n * g.outHeight + oh) * g.outWidth + ow) * g.channels);
      }
    }
}

// The first channel of input pixel (n, ih, iw) in x / dx.
Index inputOffset(const PoolGeometry& g, Index n, Index ih, Index iw) {
  return ((n * g.inHeight + ih) * g.inWidth + iw) * g.channels;
}

void zero(float* p, Index count) { std::memset(p, 0, static_cast<std::size_t>(count) * sizeof(float)); }

template <typename SpanOf>
void averageForward(const PoolGeometry& g, SpanOf spanOf, const float* x, float* y) {
  const Index C = g.channels;
  forEachOutput(g, spanOf, [&](Index n, const Window& w, Index o) {
    const float divisor = w.divisor();
    float* out = y + o;
    for (Index c = 0; c < C; ++c) out[c] = 0.0f;
    for (Index ih = w.rows.lo; ih < w.rows.hi; ++ih)
      for (Index iw = w.cols.lo; iw < w.cols.hi; ++iw) {
        const float* in = x + inputOffset(g, n, ih, iw);
        for (Index c = 0; c < C; ++c) out[c] += in[c];
      }
    for (Index c = 0; c < C; ++c) out[c] /= divisor;
  });
}

template <typename SpanOf>
void averageBackward(const PoolGeometry& g, SpanOf spanOf, const float* dy, float* dx) {
  const Index C = g.channels;
  zero(dx, g.batch * g.inHeight * g.inWidth * C);
  forEachOutput(g, spanOf, [&](Index n, const Window& w, Index o) {
    const float divisor = w.divisor();
    const float* grad = dy + o;
    for (Index ih = w.rows.lo; ih < w.rows.hi; ++ih)
      for (Index iw = w.cols.lo; iw < w.cols.hi; ++iw) {
        float* in = dx + inputOffset(g, n, ih, iw);
        for (Index c = 0; c < C; ++c) in[c] += grad[c] / divisor;
      }
  });
}

}  // namespace

void maxPoolForward(const PoolGeometry& g, const float* x, float* y) {
  const Index C = g.channels;
  forEachOutput(g, KernelSpans{g}, [&](Index n, const Window& w, Index o) {
    float* out = y + o;
    for (Index c = 0; c < C; ++c) out[c] = -std::numeric_limits<float>::infinity();
    for (Index ih = w.rows.lo; ih < w.rows.hi; ++ih)
      for (Index iw = w.cols.lo; iw < w.cols.hi; ++iw) {
        const float* in = x + inputOffset(g, n, ih, iw);
        for (Index c = 0; c < C; ++c) out[c] = in[c] > out[c] ? in[c] : out[c];
      }
  });
}

void maxPoolBackward(const PoolGeometry& g, const float* x, const float* y, const float* dy, float* dx) {
  const Index C = g.channels;
  zero(dx, g.batch * g.inHeight * g.inWidth * C);
  forEachOutput(g, KernelSpans{g}, [&](Index n, const Window& w, Index o) {
    for (Index c = 0; c < C; ++c) {
      const float best = y[o + c];
      bool found = false;
      for (Index ih = w.rows.lo; ih < w.rows.hi && !found; ++ih)
        for (Index iw = w.cols.lo; iw < w.cols.hi; ++iw) {
          const Index i = inputOffset(g, n, ih, iw) + c;
          if (x[i] == best) {
            dx[i] += dy[o + c];
            found = true;
            break;
          }
        }
    }
  });
}

void avgPoolForward(const PoolGeometry& g, const float* x, float* y) { averageForward(g, KernelSpans{g}, x, y); }
void avgPoolBackward(const PoolGeometry& g, const float* dy, float* dx) { averageBackward(g, KernelSpans{g}, dy, dx); }

void adaptiveAvgPoolForward(const PoolGeometry& g, const float* x, float* y) {
  averageForward(g, AdaptiveSpans{}, x, y);
}
void adaptiveAvgPoolBackward(const PoolGeometry& g, const float* dy, float* dx) {
  averageBackward(g, AdaptiveSpans{}, dy, dx);
}

}  // namespace remat::cpu
