// Swin's own kernels (window.hpp). Each output element is written by one iteration, so every loop
// runs in parallel without atomics; the bias table's gradient is summed per head in a fixed order.
#include <algorithm>
#include <cstring>

#include "window.hpp"

namespace remat::cpu {
namespace {

Index roundUp(Index v, Index m) { return (v + m - 1) / m * m; }

// torchvision's region of a rolled padded coordinate along one side: 0, 1, 2 by the slices
// (0, -M), (-M, -shift), (-shift, None); a side that is not shifted is one region.
Index regionOf(Index at, Index padded, Index side, Index shift) {
  if (shift == 0) return 0;
  if (at < padded - side) return 0;
  return at < padded - shift ? 1 : 2;
}

}  // namespace

WindowGeometry windowGeometry(Index batch, Index height, Index width, Index channels, Index side, Index shift) {
  WindowGeometry g;
  g.batch = batch, g.height = height, g.width = width, g.channels = channels, g.side = side;
  g.padH = roundUp(height, side), g.padW = roundUp(width, side);
  g.shiftH = g.padH > side ? shift : 0;  // "if window_size >= pad: shift = 0", side by side
  g.shiftW = g.padW > side ? shift : 0;
  return g;
}

Index windowSource(const WindowGeometry& g, Index r) {
  const Index L = g.area(), perImage = g.windows() * L, across = g.padW / g.side;
  const Index n = r / perImage, w = (r % perImage) / L, t = r % L;
  const Index y = (w / across) * g.side + t / g.side, x = (w % across) * g.side + t % g.side;
  const Index ys = (y + g.shiftH) % g.padH, xs = (x + g.shiftW) % g.padW;  // roll by -shift
  if (ys >= g.height || xs >= g.width) return -1;
  return (n * g.height + ys) * g.width + xs;
}

void windowPartition(const WindowGeometry& g, const float* x, float* windows) {
  const Index C = g.channels;
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < g.paddedTokens(); ++r) {
    const Index from = windowSource(g, r);
    if (from < 0)
      std::fill_n(windows + r * C, C, 0.0f);
    else
      std::memcpy(windows + r * C, x + from * C, static_cast<std::size_t>(C) * sizeof(float));
  }
}

void windowReverse(const WindowGeometry& g, const float* windows, float* y) {
  const Index C = g.channels;
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < g.paddedTokens(); ++r) {
    const Index to = windowSource(g, r);
    if (to >= 0) std::memcpy(y + to * C, windows + r * C, static_cast<std::size_t>(C) * sizeof(float));
  }
}

namespace {

Index relativeIndex(Index side, Index i, Index j) {
  const Index dy = i / side - j / side + side - 1, dx = i % side - j % side + side - 1;
  return dy * (2 * side - 1) + dx;
}

}  // namespace

void relativeBiasGather(Index side, Index heads, const float* table, float* bias) {
  const Index L = side * side;
#pragma omp parallel for schedule(static)
  for (Index h = 0; h < heads; ++h)
    for (Index i = 0; i < L; ++i)
      for (Index j = 0; j < L; ++j) bias[(h * L + i) * L + j] = table[relativeIndex(side, i, j) * heads + h];
}

void relativeBiasBackward(Index side, Index heads, Index batchWindows, const float* dScores, float* dTable) {
  const Index L = side * side;
#pragma omp parallel for schedule(static)
  for (Index h = 0; h < heads; ++h)  // one head's table column per thread: no two threads add to one entry
    for (Index i = 0; i < L; ++i)
      for (Index j = 0; j < L; ++j) {
        float sum = 0.0f;
        for (Index n = 0; n < batchWindows; ++n) sum += dScores[((n * heads + h) * L + i) * L + j];
        dTable[relativeIndex(side, i, j) * heads + h] += sum;
      }
}

void shiftMask(const WindowGeometry& g, float* mask) {
  const Index L = g.area(), across = g.padW / g.side;
#pragma omp parallel for schedule(static)
  for (Index w = 0; w < g.windows(); ++w) {
    auto region = [&](Index t) {
      const Index y = (w / across) * g.side + t / g.side, x = (w % across) * g.side + t % g.side;
      return 3 * regionOf(y, g.padH, g.side, g.shiftH) + regionOf(x, g.padW, g.side, g.shiftW);
    };
    for (Index i = 0; i < L; ++i)
      for (Index j = 0; j < L; ++j) mask[(w * L + i) * L + j] = region(i) == region(j) ? 0.0f : -100.0f;
  }
}

namespace {

// The element of x that cat[n][oy][ox][q * C + c] holds, or -1 past an odd edge.
Index mergeSource(Index height, Index width, Index n, Index oy, Index ox, Index q) {
  const Index y = 2 * oy + (q & 1), x = 2 * ox + (q >> 1);  // x0 (0,0), x1 (1,0), x2 (0,1), x3 (1,1)
  if (y >= height || x >= width) return -1;
  return (n * height + y) * width + x;
}

}  // namespace

void mergeGather(Index batch, Index height, Index width, Index channels, const float* x, float* cat) {
  const Index oh = (height + 1) / 2, ow = (width + 1) / 2, C = channels;
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < batch * oh * ow; ++r)
    for (Index q = 0; q < 4; ++q) {
      const Index from = mergeSource(height, width, r / (oh * ow), r / ow % oh, r % ow, q);
      float* to = cat + (r * 4 + q) * C;
      if (from < 0)
        std::fill_n(to, C, 0.0f);
      else
        std::memcpy(to, x + from * C, static_cast<std::size_t>(C) * sizeof(float));
    }
}

void mergeScatter(Index batch, Index height, Index width, Index channels, const float* dCat, float* dx) {
  const Index oh = (height + 1) / 2, ow = (width + 1) / 2, C = channels;
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < batch * oh * ow; ++r)
    for (Index q = 0; q < 4; ++q) {
      const Index to = mergeSource(height, width, r / (oh * ow), r / ow % oh, r % ow, q);
      if (to >= 0) std::memcpy(dx + to * C, dCat + (r * 4 + q) * C, static_cast<std::size_t>(C) * sizeof(float));
    }
}

void averagePositions(Index batch, Index positions, Index channels, const float* x, float* pooled) {
#pragma omp parallel for schedule(static)
  for (Index n = 0; n < batch; ++n) {
    float* out = pooled + n * channels;
    std::fill_n(out, channels, 0.0f);
    for (Index p = 0; p < positions; ++p)
      for (Index c = 0; c < channels; ++c) out[c] += x[(n * positions + p) * channels + c];
    for (Index c = 0; c < channels; ++c) out[c] /= static_cast<float>(positions);
  }
}

void averagePositionsBackward(Index batch, Index positions, Index channels, const float* dPooled, float* dx) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < batch * positions; ++r)
    for (Index c = 0; c < channels; ++c)
      dx[r * channels + c] = dPooled[(r / positions) * channels + c] / static_cast<float>(positions);
}

void scaleSamples(Index batch, Index perSample, const float* factor, const float* x, float* y) {
#pragma omp parallel for schedule(static)
  for (Index i = 0; i < batch * perSample; ++i) y[i] = x[i] * factor[i / perSample];
}

}  // namespace remat::cpu
