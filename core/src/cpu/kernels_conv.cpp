// Direct 2-D convolution on channels-last activations and [kh][kw][C/groups][K] weights: the output
// channels are contiguous in both y and w, so the forward and the weight gradient vectorise over
// them, and the data gradient is a dot product over them. No im2col, no scratch: each output sums
// bias + sum over (kh, kw, ci) in that order, whatever the blocking (lanes are independent).
#include <algorithm>
#include <type_traits>

#include "kernels.hpp"
#include "simd.hpp"

namespace remat::cpu {
namespace {

Index floorDiv(Index a, Index b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
Index ceilDiv(Index a, Index b) { return -floorDiv(-a, b); }

// Kernel offsets t with 0 <= start + t < extent, start = o * stride - padding.
void kernelRange(Index start, Index kernel, Index extent, Index& lo, Index& hi) {
  lo = start < 0 ? -start : 0;
  hi = std::min(kernel, extent - start);
  if (hi < lo) hi = lo;
}

// Output coordinates o with 0 <= o * stride - padding + t < extent, clipped to [0, outExtent).
void outputRange(Index t, Index stride, Index padding, Index extent, Index outExtent, Index& lo, Index& hi) {
  lo = std::max<Index>(0, ceilDiv(padding - t, stride));
  hi = std::min<Index>(outExtent, floorDiv(extent - 1 + padding - t, stride) + 1);
  if (hi < lo) hi = lo;
}

// P output pixels (consecutive in the flattened (n, oh, ow) order, from pixel0) times V four-wide
// blocks of output channels from co. Each output sums bias, then its valid taps in (kh, kw) order,
// each over ci: the same order as forwardScalar, so blocking never changes a result.
template <int P, int V>
void forwardTile(const ConvGeometry& g, Index cig, Index group, const float* x, const float* w, const float* bias,
                 float* y, Index pixel0, Index co) {
  const Index C = g.inChannels, K = g.outChannels, H = g.inHeight, W = g.inWidth, k = g.kernel;
  Index n[P], ihStart[P], iwStart[P];
  REMAT_UNROLL
  for (int j = 0; j < P; ++j) {
    const Index q = pixel0 + j;
    const Index ow = q % g.outWidth, rest = q / g.outWidth;
    n[j] = rest / g.outHeight;
    ihStart[j] = (rest % g.outHeight) * g.stride - g.padding;
    iwStart[j] = ow * g.stride - g.padding;
  }
  v4f acc[P][V];
  REMAT_UNROLL
  for (int v = 0; v < V; ++v) {
    const v4f b = bias ? load4(bias + co + 4 * v) : splat4(0.0f);
    REMAT_UNROLL
    for (int j = 0; j < P; ++j) acc[j][v] = b;
  }
  constexpr unsigned kAll = (1u << P) - 1;
  for (Index kh = 0; kh < k; ++kh) {
    for (Index kw = 0; kw < k; ++kw) {
      unsigned mask = 0;
      Index xo[P];
      REMAT_UNROLL
      for (int j = 0; j < P; ++j) {
        const Index ih = ihStart[j] + kh, iw = iwStart[j] + kw;
        const bool valid = ih >= 0 && ih < H && iw >= 0 && iw < W;
        mask |= valid ? 1u << j : 0u;
        xo[j] = valid ? ((n[j] * H + ih) * W + iw) * C + group * cig : 0;
      }
      if (mask == 0) continue;
      const float* wr = w + (kh * k + kw) * cig * K + co;
      // allValid is a compile-time flag: the common interior case skips the per-pixel test.
      auto accumulate = [&](auto allValid) {
        for (Index ci = 0; ci < cig; ++ci) {
          v4f wv[V];
          REMAT_UNROLL
          for (int v = 0; v < V; ++v) wv[v] = load4(wr + ci * K + 4 * v);
          REMAT_UNROLL
          for (int j = 0; j < P; ++j) {
            if constexpr (!decltype(allValid)::value)
              if (!((mask >> j) & 1u)) continue;
            const v4f xs = splat4(x[xo[j] + ci]);
            REMAT_UNROLL
            for (int v = 0; v < V; ++v) acc[j][v] += xs * wv[v];
          }
        }
      };
      if (mask == kAll)
        accumulate(std::true_type{});
      else
        accumulate(std::false_type{});
    }
  }
  REMAT_UNROLL
  for (int j = 0; j < P; ++j) REMAT_UNROLL
  for (int v = 0; v < V; ++v) store4(y + (pixel0 + j) * K + co + 4 * v, acc[j][v]);
}

// One output pixel, output channels [coBegin, coEnd) one at a time (channel tails).
void forwardScalar(const ConvGeometry& g, Index cig, Index group, const float* x, const float* w, const float* bias,
                   float* y, Index pixel, Index coBegin, Index coEnd) {
  const Index C = g.inChannels, K = g.outChannels, H = g.inHeight, W = g.inWidth, k = g.kernel;
  const Index ow = pixel % g.outWidth, rest = pixel / g.outWidth;
  const Index n = rest / g.outHeight;
  const Index ihStart = (rest % g.outHeight) * g.stride - g.padding, iwStart = ow * g.stride - g.padding;
  for (Index co = coBegin; co < coEnd; ++co) {
    float acc = bias ? bias[co] : 0.0f;
    for (Index kh = 0; kh < k; ++kh)
      for (Index kw = 0; kw < k; ++kw) {
        const Index ih = ihStart + kh, iw = iwStart + kw;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
        const float* wr = w + (kh * k + kw) * cig * K + co;
        const float* xr = x + ((n * H + ih) * W + iw) * C + group * cig;
        for (Index ci = 0; ci < cig; ++ci) acc += xr[ci] * wr[ci * K];
      }
    y[pixel * K + co] = acc;
  }
}

template <int V>
void forwardChannels(const ConvGeometry& g, Index cig, Index group, const float* x, const float* w, const float* bias,
                     float* y, Index pixels, Index co) {
  Index q = 0;
  for (; q + 4 <= pixels; q += 4) forwardTile<4, V>(g, cig, group, x, w, bias, y, q, co);
  for (; q < pixels; ++q) forwardTile<1, V>(g, cig, group, x, w, bias, y, q, co);
}

struct Window {
  Index khLo, khHi, kwLo, kwHi;
};

// Depthwise (one input and one output channel per group): vectorised across channels.
void forwardDepthwisePixel(const ConvGeometry& g, const Window& win, const float* x, Index xBase, const float* w,
                           const float* bias, float* y, Index yBase) {
  const Index C = g.inChannels, W = g.inWidth, k = g.kernel;
  Index c = 0;
  for (; c + 4 <= C; c += 4) {
    v4f acc = bias ? load4(bias + c) : splat4(0.0f);
    for (Index kh = win.khLo; kh < win.khHi; ++kh)
      for (Index kw = win.kwLo; kw < win.kwHi; ++kw)
        acc += load4(x + xBase + (kh * W + kw) * C + c) * load4(w + (kh * k + kw) * C + c);
    store4(y + yBase + c, acc);
  }
  for (; c < C; ++c) {
    float acc = bias ? bias[c] : 0.0f;
    for (Index kh = win.khLo; kh < win.khHi; ++kh)
      for (Index kw = win.kwLo; kw < win.kwHi; ++kw) acc += x[xBase + (kh * W + kw) * C + c] * w[(kh * k + kw) * C + c];
    y[yBase + c] = acc;
  }
}

bool isDepthwise(const ConvGeometry& g) { return g.groups == g.inChannels && g.groups == g.outChannels; }

}  // namespace

void conv2dForward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y) {
  const Index C = g.inChannels, K = g.outChannels, H = g.inHeight, W = g.inWidth;
  const Index cig = C / g.groups, cog = K / g.groups, s = g.stride, p = g.padding;
  const Index pixels = g.batch * g.outHeight * g.outWidth;
  if (isDepthwise(g)) {
    for (Index n = 0; n < g.batch; ++n)
      for (Index oh = 0; oh < g.outHeight; ++oh) {
        Window win{};
        const Index ihStart = oh * s - p;
        kernelRange(ihStart, g.kernel, H, win.khLo, win.khHi);
        for (Index ow = 0; ow < g.outWidth; ++ow) {
          const Index iwStart = ow * s - p;
          kernelRange(iwStart, g.kernel, W, win.kwLo, win.kwHi);
          const Index xBase = ((n * H + ihStart) * W + iwStart) * C;
          const Index yBase = ((n * g.outHeight + oh) * g.outWidth + ow) * K;
          forwardDepthwisePixel(g, win, x, xBase, w, bias, y, yBase);
        }
      }
    return;
  }
  // Output-channel blocks outside, pixels inside: a block's weights stay in cache across pixels.
  for (Index group = 0; group < g.groups; ++group) {
    Index co = group * cog;
    const Index end = co + cog;
    for (; co + 8 <= end; co += 8) forwardChannels<2>(g, cig, group, x, w, bias, y, pixels, co);
    for (; co + 4 <= end; co += 4) forwardChannels<1>(g, cig, group, x, w, bias, y, pixels, co);
    if (co < end)
      for (Index q = 0; q < pixels; ++q) forwardScalar(g, cig, group, x, w, bias, y, q, co, end);
  }
}

namespace {

struct TapPixels {
  Index ohLo, ohHi, owLo, owHi;  // output pixels whose window includes tap (kh, kw)
};

// The loops over taps and pixels that the gradient kernels share. A kernel that stores inside its
// loop over channels passes a local copy of the geometry: stores go through memcpy (store4), after
// which the compiler would reload every field of a geometry it holds only by reference
// (measurably slower in the depthwise kernels).

// Calls visit(kh, kw, dyPixel) for every tap whose output pixel reads input pixel (n, ih, iw), in
// (kh, kw) order; dyPixel is the offset of that output pixel's first channel in dy.
template <typename Visit>
void forEachTapReaching(const ConvGeometry& g, Index n, Index ih, Index iw, Visit&& visit) {
  const Index k = g.kernel, s = g.stride, p = g.padding;
  for (Index kh = (ih + p) % s; kh < k; kh += s) {
    const Index oh = (ih + p - kh) / s;
    if (oh < 0) break;
    if (oh >= g.outHeight) continue;
    for (Index kw = (iw + p) % s; kw < k; kw += s) {
      const Index ow = (iw + p - kw) / s;
      if (ow < 0) break;
      if (ow >= g.outWidth) continue;
      visit(kh, kw, ((n * g.outHeight + oh) * g.outWidth + ow) * g.outChannels);
    }
  }
}

// Calls visit(xPixel, dyPixel) for every output pixel whose window includes tap (kh, kw), in
// (n, oh, ow) order; the offsets are of the first channel of the input pixel the tap reads (in x)
// and of the output pixel (in dy).
template <typename Visit>
void forEachPixelOfTap(const ConvGeometry& g, Index kh, Index kw, const TapPixels& r, Visit&& visit) {
  const Index s = g.stride, p = g.padding;
  for (Index n = 0; n < g.batch; ++n)
    for (Index oh = r.ohLo; oh < r.ohHi; ++oh) {
      const Index ih = oh * s - p + kh;
      for (Index ow = r.owLo; ow < r.owHi; ++ow) {
        const Index iw = ow * s - p + kw;
        visit(((n * g.inHeight + ih) * g.inWidth + iw) * g.inChannels,
              ((n * g.outHeight + oh) * g.outWidth + ow) * g.outChannels);
      }
    }
}

// dx of CI input channels (from ci) of one input pixel: a dot product over the group's output
// channels of every tap that reaches it. Taps in (kh, kw) order; lanes summed at the end.
template <int CI>
void backwardDataTile(const ConvGeometry& g, Index cig, Index cog, Index group, Index n, Index ih, Index iw,
                      const float* dy, const float* w, float* dx, Index ci, bool accumulate) {
  const Index K = g.outChannels, k = g.kernel;
  v4f acc[CI];
  float tail[CI];
  REMAT_UNROLL
  for (int c = 0; c < CI; ++c) {
    acc[c] = splat4(0.0f);
    tail[c] = 0.0f;
  }
  const Index coBase = group * cog;
  forEachTapReaching(g, n, ih, iw, [&](Index kh, Index kw, Index dyPixel) {
    const float* dyr = dy + dyPixel + coBase;
    const float* wr = w + ((kh * k + kw) * cig + ci) * K + coBase;
    Index co = 0;
    for (; co + 4 <= cog; co += 4) {
      const v4f d = load4(dyr + co);
      REMAT_UNROLL
      for (int c = 0; c < CI; ++c) acc[c] += d * load4(wr + c * K + co);
    }
    for (; co < cog; ++co) REMAT_UNROLL
    for (int c = 0; c < CI; ++c) tail[c] += dyr[co] * wr[c * K + co];
  });
  float* out = dx + ((n * g.inHeight + ih) * g.inWidth + iw) * g.inChannels + group * cig + ci;
  REMAT_UNROLL
  for (int c = 0; c < CI; ++c) {
    const float sum = hsum4(acc[c]) + tail[c];
    out[c] = accumulate ? out[c] + sum : sum;
  }
}

void backwardDataDepthwisePixel(const ConvGeometry& g, Index n, Index ih, Index iw, const float* dy, const float* w,
                                float* dx, bool accumulate) {
  const ConvGeometry local = g;  // stores below go through memcpy: see forEachTapReaching
  // Depthwise: dy has C channels too (outChannels == inChannels).
  const Index C = g.inChannels, k = g.kernel;
  float* out = dx + ((n * g.inHeight + ih) * g.inWidth + iw) * C;
  Index c = 0;
  for (; c + 4 <= C; c += 4) {
    v4f acc = splat4(0.0f);
    forEachTapReaching(local, n, ih, iw, [&](Index kh, Index kw, Index dyPixel) {
      acc += load4(dy + dyPixel + c) * load4(w + (kh * k + kw) * C + c);
    });
    store4(out + c, accumulate ? load4(out + c) + acc : acc);
  }
  if (c == C) return;
  float scalar[4] = {0, 0, 0, 0};
  forEachTapReaching(local, n, ih, iw, [&](Index kh, Index kw, Index dyPixel) {
    for (Index j = 0; c + j < C; ++j) scalar[j] += dy[dyPixel + c + j] * w[(kh * k + kw) * C + c + j];
  });
  for (Index j = 0; c + j < C; ++j) out[c + j] = accumulate ? out[c + j] + scalar[j] : scalar[j];
}

}  // namespace

void conv2dBackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx, bool accumulate) {
  const Index cig = g.inChannels / g.groups, cog = g.outChannels / g.groups;
  const bool depthwise = isDepthwise(g);
  for (Index n = 0; n < g.batch; ++n)
    for (Index ih = 0; ih < g.inHeight; ++ih)
      for (Index iw = 0; iw < g.inWidth; ++iw) {
        if (depthwise) {
          backwardDataDepthwisePixel(g, n, ih, iw, dy, w, dx, accumulate);
          continue;
        }
        for (Index group = 0; group < g.groups; ++group) {
          Index ci = 0;
          for (; ci + 4 <= cig; ci += 4) backwardDataTile<4>(g, cig, cog, group, n, ih, iw, dy, w, dx, ci, accumulate);
          for (; ci < cig; ++ci) backwardDataTile<1>(g, cig, cog, group, n, ih, iw, dy, w, dx, ci, accumulate);
        }
      }
}

namespace {

// dw[kh][kw][ci..ci+CI)[co..co+4V) += sum over pixels of x * dy, pixels in (n, oh, ow) order.
template <int CI, int V>
void backwardParamsTile(const ConvGeometry& g, Index cig, Index kh, Index kw, const TapPixels& r, const float* x,
                        Index xChannel, const float* dy, float* dw, Index ci, Index co) {
  const ConvGeometry local = g;  // stores below go through memcpy: see forEachTapReaching
  const Index K = g.outChannels;
  v4f acc[CI][V];
  REMAT_UNROLL
  for (int c = 0; c < CI; ++c) REMAT_UNROLL
  for (int v = 0; v < V; ++v) acc[c][v] = splat4(0.0f);
  forEachPixelOfTap(local, kh, kw, r, [&](Index xPixel, Index dyPixel) {
    const float* xr = x + xPixel + xChannel;
    const float* dyr = dy + dyPixel + co;
    v4f d[V];
    REMAT_UNROLL
    for (int v = 0; v < V; ++v) d[v] = load4(dyr + 4 * v);
    REMAT_UNROLL
    for (int c = 0; c < CI; ++c) {
      const v4f xs = splat4(xr[c]);
      REMAT_UNROLL
      for (int v = 0; v < V; ++v) acc[c][v] += xs * d[v];
    }
  });
  float* out = dw + ((kh * g.kernel + kw) * cig + ci) * K + co;
  REMAT_UNROLL
  for (int c = 0; c < CI; ++c) REMAT_UNROLL
  for (int v = 0; v < V; ++v) store4(out + c * K + 4 * v, load4(out + c * K + 4 * v) + acc[c][v]);
}

void backwardParamsScalar(const ConvGeometry& g, Index cig, Index kh, Index kw, const TapPixels& r, const float* x,
                          Index xChannel, const float* dy, float* dw, Index ci, Index co) {
  const ConvGeometry local = g;  // stores below go through memcpy: see forEachTapReaching
  const Index K = g.outChannels;
  float acc = 0.0f;
  forEachPixelOfTap(local, kh, kw, r,
                    [&](Index xPixel, Index dyPixel) { acc += x[xPixel + xChannel] * dy[dyPixel + co]; });
  dw[((kh * g.kernel + kw) * cig + ci) * K + co] += acc;
}

template <int CI>
void backwardParamsRows(const ConvGeometry& g, Index cig, Index cog, Index group, Index kh, Index kw,
                        const TapPixels& r, const float* x, const float* dy, float* dw, Index ci) {
  Index co = group * cog;
  const Index end = co + cog;
  const Index xChannel = group * cig + ci;
  for (; co + 8 <= end; co += 8) backwardParamsTile<CI, 2>(g, cig, kh, kw, r, x, xChannel, dy, dw, ci, co);
  for (; co + 4 <= end; co += 4) backwardParamsTile<CI, 1>(g, cig, kh, kw, r, x, xChannel, dy, dw, ci, co);
  for (; co < end; ++co) REMAT_UNROLL
  for (int c = 0; c < CI; ++c) backwardParamsScalar(g, cig, kh, kw, r, x, xChannel + c, dy, dw, ci + c, co);
}

// Depthwise: dw[kh][kw][c] += sum over pixels of x[.., c] * dy[.., c], vectorised across channels.
void backwardParamsDepthwise(const ConvGeometry& g, Index kh, Index kw, const TapPixels& r, const float* x,
                             const float* dy, float* dw) {
  const ConvGeometry local = g;  // stores below go through memcpy: see forEachTapReaching
  const Index C = g.inChannels;
  float* out = dw + (kh * g.kernel + kw) * C;
  Index c = 0;
  for (; c + 4 <= C; c += 4) {
    v4f acc = splat4(0.0f);
    forEachPixelOfTap(local, kh, kw, r,
                      [&](Index xPixel, Index dyPixel) { acc += load4(x + xPixel + c) * load4(dy + dyPixel + c); });
    store4(out + c, load4(out + c) + acc);
  }
  if (c == C) return;
  float scalar[4] = {0, 0, 0, 0};
  forEachPixelOfTap(local, kh, kw, r, [&](Index xPixel, Index dyPixel) {
    for (Index j = 0; c + j < C; ++j) scalar[j] += x[xPixel + c + j] * dy[dyPixel + c + j];
  });
  for (Index j = 0; c + j < C; ++j) out[c + j] += scalar[j];
}

}  // namespace

void conv2dBackwardParams(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db) {
  const Index cig = g.inChannels / g.groups, cog = g.outChannels / g.groups, K = g.outChannels;
  const bool depthwise = isDepthwise(g);
  for (Index kh = 0; kh < g.kernel; ++kh)
    for (Index kw = 0; kw < g.kernel; ++kw) {
      TapPixels r{};
      outputRange(kh, g.stride, g.padding, g.inHeight, g.outHeight, r.ohLo, r.ohHi);
      outputRange(kw, g.stride, g.padding, g.inWidth, g.outWidth, r.owLo, r.owHi);
      if (depthwise) {
        backwardParamsDepthwise(g, kh, kw, r, x, dy, dw);
        continue;
      }
      for (Index group = 0; group < g.groups; ++group) {
        Index ci = 0;
        for (; ci + 4 <= cig; ci += 4) backwardParamsRows<4>(g, cig, cog, group, kh, kw, r, x, dy, dw, ci);
        for (; ci < cig; ++ci) backwardParamsRows<1>(g, cig, cog, group, kh, kw, r, x, dy, dw, ci);
      }
    }
  if (db == nullptr) return;
  const Index pixels = g.batch * g.outHeight * g.outWidth;
  Index co = 0;
  for (; co + 4 <= K; co += 4) {
    v4f acc = splat4(0.0f);
    for (Index q = 0; q < pixels; ++q) acc += load4(dy + q * K + co);
    store4(db + co, load4(db + co) + acc);
  }
  for (; co < K; ++co) {
    float acc = 0.0f;
    for (Index q = 0; q < pixels; ++q) acc += dy[q * K + co];
    db[co] += acc;
  }
}

}  // namespace remat::cpu
