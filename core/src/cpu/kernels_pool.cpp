// The pooling kernels oneDNN has no primitive for, on channels-last activations: max pooling's
// argmax indices (what the model keeps, as PyTorch does) and its backward from them, average
// pooling whose ceil-mode windows reach past the padding (PyTorch's divisor), and adaptive average
// pooling (PyTorch's bins), each in float32 and in bfloat16 (bf16-mixed's half layers and blocks). Work is split over
// (sample, block of channels); inside a block, window taps are visited in (kh, kw) order and outputs in (oh, ow) order,
// so every sum has one order at any thread count.
#include <algorithm>
#include <limits>
#include <type_traits>

#include "kernels.hpp"

namespace remat::cpu {
namespace {

constexpr Index kChannelBlock = 16;

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

// The channels [c0, c1) of sample n: what one thread owns.
struct Block {
  Index n = 0, c0 = 0, c1 = 0;
};

// Runs body(block) for every (sample, channel block) on the OpenMP team. A block's outputs, and the
// input gradients its outputs scatter to, belong to it alone.
template <typename Body>
void forEachBlock(const PoolGeometry& g, Body&& body) {
  const Index blocks = (g.channels + kChannelBlock - 1) / kChannelBlock;
  const Index tasks = g.batch * blocks;
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < tasks; ++t) {
    const Index c0 = (t % blocks) * kChannelBlock;
    body(Block{t / blocks, c0, std::min(c0 + kChannelBlock, g.channels)});
  }
}

// Calls visit(window, outOffset) for every output pixel of sample n in (oh, ow) order; outOffset is
// the pixel's first channel in y / dy.
template <typename SpanOf, typename Visit>
void forEachOutput(const PoolGeometry& g, Index n, SpanOf spanOf, Visit&& visit) {
  for (Index oh = 0; oh < g.outHeight; ++oh) {
    Window w;
    w.rows = spanOf(oh, g.inHeight, g.outHeight);
    for (Index ow = 0; ow < g.outWidth; ++ow) {
      w.cols = spanOf(ow, g.inWidth, g.outWidth);
      visit(w, ((n * g.outHeight + oh) * g.outWidth + ow) * g.channels);
    }
  }
}

// The first channel of input pixel (n, ih, iw) in x / dx.
Index inputOffset(const PoolGeometry& g, Index n, Index ih, Index iw) {
  return ((n * g.inHeight + ih) * g.inWidth + iw) * g.channels;
}

// Average pooling in either dtype: the window's sum in float32 (a bfloat16 output rounded once, as
// PyTorch's bf16 pooling accumulates in float); the backward adds d(y) / divisor into each tap (in
// bfloat16, rounded at each add, as the max pool's backward).
template <typename T, typename SpanOf>
void averageForward(const PoolGeometry& g, SpanOf spanOf, const T* x, T* y) {
  forEachBlock(g, [&](const Block& b) {
    forEachOutput(g, b.n, spanOf, [&](const Window& w, Index o) {
      const float divisor = w.divisor();
      float sum[kChannelBlock] = {};
      for (Index ih = w.rows.lo; ih < w.rows.hi; ++ih)
        for (Index iw = w.cols.lo; iw < w.cols.hi; ++iw) {
          const T* in = x + inputOffset(g, b.n, ih, iw);
          for (Index c = b.c0; c < b.c1; ++c) sum[c - b.c0] += valueOf(in[c]);
        }
      for (Index c = b.c0; c < b.c1; ++c) y[o + c] = stored<T>(sum[c - b.c0] / divisor);
    });
  });
}

template <typename T>
void zeroBlockOf(const PoolGeometry& g, const Block& b, T* dx) {
  for (Index p = 0; p < g.inHeight * g.inWidth; ++p)
    std::fill(dx + (b.n * g.inHeight * g.inWidth + p) * g.channels + b.c0,
              dx + (b.n * g.inHeight * g.inWidth + p) * g.channels + b.c1, T{});
}

template <typename T, typename SpanOf>
void averageBackward(const PoolGeometry& g, SpanOf spanOf, const T* dy, T* dx, bool accumulate = false) {
  forEachBlock(g, [&](const Block& b) {
    if (!accumulate) zeroBlockOf(g, b, dx);
    forEachOutput(g, b.n, spanOf, [&](const Window& w, Index o) {
      const float divisor = w.divisor();
      const T* grad = dy + o;
      for (Index ih = w.rows.lo; ih < w.rows.hi; ++ih)
        for (Index iw = w.cols.lo; iw < w.cols.hi; ++iw) {
          T* in = dx + inputOffset(g, b.n, ih, iw);
          for (Index c = b.c0; c < b.c1; ++c) in[c] = stored<T>(valueOf(in[c]) + valueOf(grad[c]) / divisor);
        }
    });
  });
}

template <typename T>
void maxPoolForwardOf(const PoolGeometry& g, const T* x, T* y) {
  forEachBlock(g, [&](const Block& b) {
    forEachOutput(g, b.n, KernelSpans{g}, [&](const Window& w, Index o) {
      float best[kChannelBlock];
      std::fill(best, best + kChannelBlock, -std::numeric_limits<float>::infinity());
      for (Index ih = w.rows.lo; ih < w.rows.hi; ++ih)
        for (Index iw = w.cols.lo; iw < w.cols.hi; ++iw) {
          const T* in = x + inputOffset(g, b.n, ih, iw);
          for (Index c = b.c0; c < b.c1; ++c) best[c - b.c0] = std::max(best[c - b.c0], valueOf(in[c]));
        }
      for (Index c = b.c0; c < b.c1; ++c) y[o + c] = stored<T>(best[c - b.c0]);
    });
  });
}

}  // namespace

namespace {

// The max pool's own kernels in either dtype: bfloat16 compares and adds as PyTorch's bf16
// kernels do, through float (the sum rounded back to bfloat16 at each add).
template <typename T>
void maxPoolIndicesOf(const PoolGeometry& g, const T* x, const T* y, std::int64_t* indices) {
  forEachBlock(g, [&](const Block& b) {
    forEachOutput(g, b.n, KernelSpans{g}, [&](const Window& w, Index o) {
      for (Index c = b.c0; c < b.c1; ++c) {
        const float best = valueOf(y[o + c]);
        Index found = -1;
        for (Index ih = w.rows.lo; ih < w.rows.hi && found < 0; ++ih)
          for (Index iw = w.cols.lo; iw < w.cols.hi; ++iw) {
            const Index i = inputOffset(g, b.n, ih, iw) + c;
            if (valueOf(x[i]) == best) {
              found = i;
              break;
            }
          }
        indices[o + c] = found;  // -1 only for a NaN maximum: its gradient goes nowhere
      }
    });
  });
}

template <typename T>
void maxPoolBackwardOf(const PoolGeometry& g, const std::int64_t* indices, const T* dy, T* dx, bool accumulate) {
  forEachBlock(g, [&](const Block& b) {
    if (!accumulate) zeroBlockOf(g, b, dx);
    forEachOutput(g, b.n, KernelSpans{g}, [&](const Window&, Index o) {
      for (Index c = b.c0; c < b.c1; ++c)
        if (indices[o + c] >= 0) dx[indices[o + c]] = T(valueOf(dx[indices[o + c]]) + valueOf(dy[o + c]));
    });
  });
}

}  // namespace

void maxPoolIndices(const PoolGeometry& g, const float* x, const float* y, std::int64_t* indices) {
  maxPoolIndicesOf(g, x, y, indices);
}
void maxPoolIndices(const PoolGeometry& g, const BFloat16* x, const BFloat16* y, std::int64_t* indices) {
  maxPoolIndicesOf(g, x, y, indices);
}

void maxPoolForward(const PoolGeometry& g, const float* x, float* y) { maxPoolForwardOf(g, x, y); }
void maxPoolForward(const PoolGeometry& g, const BFloat16* x, BFloat16* y) { maxPoolForwardOf(g, x, y); }

void maxPoolBackward(const PoolGeometry& g, const std::int64_t* indices, const float* dy, float* dx, bool accumulate) {
  maxPoolBackwardOf(g, indices, dy, dx, accumulate);
}
void maxPoolBackward(const PoolGeometry& g, const std::int64_t* indices, const BFloat16* dy, BFloat16* dx,
                     bool accumulate) {
  maxPoolBackwardOf(g, indices, dy, dx, accumulate);
}

void avgPoolForward(const PoolGeometry& g, const float* x, float* y) { averageForward(g, KernelSpans{g}, x, y); }
void avgPoolBackward(const PoolGeometry& g, const float* dy, float* dx, bool accumulate) {
  averageBackward(g, KernelSpans{g}, dy, dx, accumulate);
}

void adaptiveAvgPoolForward(const PoolGeometry& g, const float* x, float* y) {
  averageForward(g, AdaptiveSpans{}, x, y);
}
void adaptiveAvgPoolBackward(const PoolGeometry& g, const float* dy, float* dx) {
  averageBackward(g, AdaptiveSpans{}, dy, dx);
}
void avgPoolForward(const PoolGeometry& g, const BFloat16* x, BFloat16* y) { averageForward(g, KernelSpans{g}, x, y); }
void avgPoolBackward(const PoolGeometry& g, const BFloat16* dy, BFloat16* dx, bool accumulate) {
  averageBackward(g, KernelSpans{g}, dy, dx, accumulate);
}
void adaptiveAvgPoolForward(const PoolGeometry& g, const BFloat16* x, BFloat16* y) {
  averageForward(g, AdaptiveSpans{}, x, y);
}
void adaptiveAvgPoolBackward(const PoolGeometry& g, const BFloat16* dy, BFloat16* dx) {
  averageBackward(g, AdaptiveSpans{}, dy, dx);
}

}  // namespace remat::cpu
