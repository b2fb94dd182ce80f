// Pooling on channels-last activations. Window taps are visited in (kh, kw) order; the backward
// passes zero dx and then scatter each output's gradient in (n, oh, ow, c) order.
#include <algorithm>
#include <cstring>
#include <limits>

#include "cpu_kernels.hpp"

namespace remat::cpu {
namespace {

void clippedRange(Index start, Index kernel, Index extent, Index& lo, Index& hi) {
  lo = std::max<Index>(start, 0);
  hi = std::min<Index>(start + kernel, extent);
  if (hi < lo) hi = lo;
}

void zero(float* p, Index count) { std::memset(p, 0, static_cast<std::size_t>(count) * sizeof(float)); }

// PyTorch's avg_pool2d divisor with count_include_pad: the window clipped to input + padding.
Index avgDivisor(Index start, Index kernel, Index extent, Index padding) {
  const Index end = std::min<Index>(start + kernel, extent + padding);
  return end - start;
}

}  // namespace

void maxPoolForward(const PoolGeometry& g, const float* x, float* y) {
  const Index C = g.channels;
  for (Index n = 0; n < g.batch; ++n)
    for (Index oh = 0; oh < g.outHeight; ++oh) {
      Index h0, h1;
      clippedRange(oh * g.stride - g.padding, g.kernel, g.inHeight, h0, h1);
      for (Index ow = 0; ow < g.outWidth; ++ow) {
        Index w0, w1;
        clippedRange(ow * g.stride - g.padding, g.kernel, g.inWidth, w0, w1);
        float* out = y + ((n * g.outHeight + oh) * g.outWidth + ow) * C;
        for (Index c = 0; c < C; ++c) out[c] = -std::numeric_limits<float>::infinity();
        for (Index ih = h0; ih < h1; ++ih)
          for (Index iw = w0; iw < w1; ++iw) {
            const float* in = x + ((n * g.inHeight + ih) * g.inWidth + iw) * C;
            for (Index c = 0; c < C; ++c) out[c] = in[c] > out[c] ? in[c] : out[c];
          }
      }
    }
}

void maxPoolBackward(const PoolGeometry& g, const float* x, const float* y, const float* dy, float* dx) {
  const Index C = g.channels;
  zero(dx, g.batch * g.inHeight * g.inWidth * C);
  for (Index n = 0; n < g.batch; ++n)
    for (Index oh = 0; oh < g.outHeight; ++oh) {
      Index h0, h1;
      clippedRange(oh * g.stride - g.padding, g.kernel, g.inHeight, h0, h1);
      for (Index ow = 0; ow < g.outWidth; ++ow) {
        Index w0, w1;
        clippedRange(ow * g.stride - g.padding, g.kernel, g.inWidth, w0, w1);
        const Index o = ((n * g.outHeight + oh) * g.outWidth + ow) * C;
        for (Index c = 0; c < C; ++c) {
          const float best = y[o + c];
          bool found = false;
          for (Index ih = h0; ih < h1 && !found; ++ih)
            for (Index iw = w0; iw < w1; ++iw) {
              const Index i = ((n * g.inHeight + ih) * g.inWidth + iw) * C + c;
              if (x[i] == best) {
                dx[i] += dy[o + c];
                found = true;
                break;
              }
            }
        }
      }
    }
}

void avgPoolForward(const PoolGeometry& g, const float* x, float* y) {
  const Index C = g.channels;
  for (Index n = 0; n < g.batch; ++n)
    for (Index oh = 0; oh < g.outHeight; ++oh) {
      const Index hs = oh * g.stride - g.padding;
      Index h0, h1;
      clippedRange(hs, g.kernel, g.inHeight, h0, h1);
      for (Index ow = 0; ow < g.outWidth; ++ow) {
        const Index ws = ow * g.stride - g.padding;
        Index w0, w1;
        clippedRange(ws, g.kernel, g.inWidth, w0, w1);
        const float divisor = static_cast<float>(avgDivisor(hs, g.kernel, g.inHeight, g.padding) *
                                                 avgDivisor(ws, g.kernel, g.inWidth, g.padding));
        float* out = y + ((n * g.outHeight + oh) * g.outWidth + ow) * C;
        for (Index c = 0; c < C; ++c) out[c] = 0.0f;
        for (Index ih = h0; ih < h1; ++ih)
          for (Index iw = w0; iw < w1; ++iw) {
            const float* in = x + ((n * g.inHeight + ih) * g.inWidth + iw) * C;
            for (Index c = 0; c < C; ++c) out[c] += in[c];
          }
        for (Index c = 0; c < C; ++c) out[c] /= divisor;
      }
    }
}

void avgPoolBackward(const PoolGeometry& g, const float* dy, float* dx) {
  const Index C = g.channels;
  zero(dx, g.batch * g.inHeight * g.inWidth * C);
  for (Index n = 0; n < g.batch; ++n)
    for (Index oh = 0; oh < g.outHeight; ++oh) {
      const Index hs = oh * g.stride - g.padding;
      Index h0, h1;
      clippedRange(hs, g.kernel, g.inHeight, h0, h1);
      for (Index ow = 0; ow < g.outWidth; ++ow) {
        const Index ws = ow * g.stride - g.padding;
        Index w0, w1;
        clippedRange(ws, g.kernel, g.inWidth, w0, w1);
        const float divisor = static_cast<float>(avgDivisor(hs, g.kernel, g.inHeight, g.padding) *
                                                 avgDivisor(ws, g.kernel, g.inWidth, g.padding));
        const float* grad = dy + ((n * g.outHeight + oh) * g.outWidth + ow) * C;
        for (Index ih = h0; ih < h1; ++ih)
          for (Index iw = w0; iw < w1; ++iw) {
            float* in = dx + ((n * g.inHeight + ih) * g.inWidth + iw) * C;
            for (Index c = 0; c < C; ++c) in[c] += grad[c] / divisor;
          }
      }
    }
}

namespace {
Index binStart(Index o, Index in, Index out) { return (o * in) / out; }
Index binEnd(Index o, Index in, Index out) { return ((o + 1) * in + out - 1) / out; }
}  // namespace

void adaptiveAvgPoolForward(const PoolGeometry& g, const float* x, float* y) {
  const Index C = g.channels;
  for (Index n = 0; n < g.batch; ++n)
    for (Index oh = 0; oh < g.outHeight; ++oh) {
      const Index h0 = binStart(oh, g.inHeight, g.outHeight), h1 = binEnd(oh, g.inHeight, g.outHeight);
      for (Index ow = 0; ow < g.outWidth; ++ow) {
        const Index w0 = binStart(ow, g.inWidth, g.outWidth), w1 = binEnd(ow, g.inWidth, g.outWidth);
        const float count = static_cast<float>((h1 - h0) * (w1 - w0));
        float* out = y + ((n * g.outHeight + oh) * g.outWidth + ow) * C;
        for (Index c = 0; c < C; ++c) out[c] = 0.0f;
        for (Index ih = h0; ih < h1; ++ih)
          for (Index iw = w0; iw < w1; ++iw) {
            const float* in = x + ((n * g.inHeight + ih) * g.inWidth + iw) * C;
            for (Index c = 0; c < C; ++c) out[c] += in[c];
          }
        for (Index c = 0; c < C; ++c) out[c] /= count;
      }
    }
}

void adaptiveAvgPoolBackward(const PoolGeometry& g, const float* dy, float* dx) {
  const Index C = g.channels;
  zero(dx, g.batch * g.inHeight * g.inWidth * C);
  for (Index n = 0; n < g.batch; ++n)
    for (Index oh = 0; oh < g.outHeight; ++oh) {
      const Index h0 = binStart(oh, g.inHeight, g.outHeight), h1 = binEnd(oh, g.inHeight, g.outHeight);
      for (Index ow = 0; ow < g.outWidth; ++ow) {
        const Index w0 = binStart(ow, g.inWidth, g.outWidth), w1 = binEnd(ow, g.inWidth, g.outWidth);
        const float count = static_cast<float>((h1 - h0) * (w1 - w0));
        const float* grad = dy + ((n * g.outHeight + oh) * g.outWidth + ow) * C;
        for (Index ih = h0; ih < h1; ++ih)
          for (Index iw = w0; iw < w1; ++iw) {
            float* in = dx + ((n * g.inHeight + ih) * g.inWidth + iw) * C;
            for (Index c = 0; c < C; ++c) in[c] += grad[c] / count;
          }
      }
    }
}

}  // namespace remat::cpu
