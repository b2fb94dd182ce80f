// Swin's kernels (kernels_window.hpp): the CPU's kernels_window.cpp, one thread per output element.
// The gathers, the noise, the per-sample scaling and the head's average are templated on the element
// type: bf16-mixed's Swin (kernels_window_half.hpp) runs them on bfloat16 through half_io.cuh's load
// and store<T> (float passes through, so the float32 instantiations are the float32 kernels).
#include "half_io.cuh"
#include "kernel_grid.cuh"
#include "kernels_window.hpp"
#include "kernels_window_half.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;
using half_io::load;
using half_io::store;

Index roundUp(Index v, Index m) { return (v + m - 1) / m * m; }

// Window row r -> the row of [N][H][W] it holds, or -1 for padding (the CPU's windowSource).
__device__ Index windowSource(const WindowShape& g, Index r) {
  const Index L = g.area(), perImage = g.windows() * L, across = g.padW / g.side;
  const Index n = r / perImage, w = (r % perImage) / L, t = r % L;
  const Index y = (w / across) * g.side + t / g.side, x = (w % across) * g.side + t % g.side;
  const Index ys = (y + g.shiftH) % g.padH, xs = (x + g.shiftW) % g.padW;  // roll by -shift
  if (ys >= g.height || xs >= g.width) return -1;
  return (n * g.height + ys) * g.width + xs;
}

template <typename T>
__global__ void partitionKernel(WindowShape g, const T* x, T* windows) {
  const Index count = g.paddedTokens() * g.channels;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index from = windowSource(g, i / g.channels);
    windows[i] = from < 0 ? store<T>(0.0f) : x[from * g.channels + i % g.channels];
  }
}

template <typename T>
__global__ void reverseKernel(WindowShape g, const T* windows, T* y) {
  const Index count = g.paddedTokens() * g.channels;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index to = windowSource(g, i / g.channels);
    if (to >= 0) y[to * g.channels + i % g.channels] = windows[i];
  }
}

__device__ Index relativeIndex(Index side, Index i, Index j) {
  const Index dy = i / side - j / side + side - 1, dx = i % side - j % side + side - 1;
  return dy * (2 * side - 1) + dx;
}

__global__ void biasGatherKernel(Index side, Index heads, const float* table, float* bias) {
  const Index L = side * side, count = heads * L * L;
  for (Index e = firstIndex(); e < count; e += gridStride()) {
    const Index h = e / (L * L), i = (e / L) % L, j = e % L;
    bias[e] = table[relativeIndex(side, i, j) * heads + h];
  }
}

__global__ void biasBackwardKernel(Index side, Index heads, Index batchWindows, const float* dScores, float* dTable) {
  const Index L = side * side;
  for (Index h = firstIndex(); h < heads; h += gridStride())
    for (Index i = 0; i < L; ++i)
      for (Index j = 0; j < L; ++j) {
        float sum = 0.0f;
        for (Index n = 0; n < batchWindows; ++n) sum += dScores[((n * heads + h) * L + i) * L + j];
        dTable[relativeIndex(side, i, j) * heads + h] += sum;
      }
}

__device__ Index regionOf(Index at, Index padded, Index side, Index shift) {
  if (shift == 0) return 0;
  if (at < padded - side) return 0;
  return at < padded - shift ? 1 : 2;
}

__device__ Index regionOfToken(const WindowShape& g, Index w, Index t) {
  const Index across = g.padW / g.side;
  const Index y = (w / across) * g.side + t / g.side, x = (w % across) * g.side + t % g.side;
  return 3 * regionOf(y, g.padH, g.side, g.shiftH) + regionOf(x, g.padW, g.side, g.shiftW);
}

__global__ void shiftMaskKernel(WindowShape g, float* mask) {
  const Index L = g.area(), count = g.windows() * L * L;
  for (Index e = firstIndex(); e < count; e += gridStride()) {
    const Index w = e / (L * L), i = (e / L) % L, j = e % L;
    mask[e] = regionOfToken(g, w, i) == regionOfToken(g, w, j) ? 0.0f : -100.0f;
  }
}

template <typename T>
__global__ void noiseKernel(Index batch, float p, float scale, std::uint64_t key, T* noise) {
  for (Index e = firstIndex(); e < 2 * batch; e += gridStride()) {
    const std::uint64_t site = static_cast<std::uint64_t>(e / batch + 1);
    const std::uint64_t siteKey = rng::mix64(key ^ site);
    const bool keep = p < 1.0f && rng::uniform01(rng::at(siteKey, static_cast<std::uint64_t>(e % batch))) >= p;
    noise[e] = store<T>(keep ? scale : 0.0f);
  }
}

template <typename T>
__global__ void scaleSamplesKernel(Index batch, Index perSample, const T* factor, const T* x, T* y) {
  for (Index i = firstIndex(); i < batch * perSample; i += gridStride())
    y[i] = store<T>(load(x[i]) * load(factor[i / perSample]));
}

}  // namespace

WindowShape windowShape(Index batch, Index height, Index width, Index channels, Index side, Index shift) {
  WindowShape g;
  g.batch = batch, g.height = height, g.width = width, g.channels = channels, g.side = side;
  g.padH = roundUp(height, side), g.padW = roundUp(width, side);
  g.shiftH = g.padH > side ? shift : 0;  // "if window_size >= pad: shift = 0", side by side
  g.shiftW = g.padW > side ? shift : 0;
  return g;
}

Status windowPartition(cudaStream_t stream, const WindowShape& g, const float* x, float* windows) {
  const Index count = g.paddedTokens() * g.channels;
  if (count == 0) return Status::ok();
  partitionKernel<float><<<blocksFor(count), kThreads, 0, stream>>>(g, x, windows);
  REMAT_CUDA_CHECK_LAUNCH("partitionKernel");
  return Status::ok();
}

Status windowReverse(cudaStream_t stream, const WindowShape& g, const float* windows, float* y) {
  const Index count = g.paddedTokens() * g.channels;
  if (count == 0) return Status::ok();
  reverseKernel<float><<<blocksFor(count), kThreads, 0, stream>>>(g, windows, y);
  REMAT_CUDA_CHECK_LAUNCH("reverseKernel");
  return Status::ok();
}

Status relativeBiasGather(cudaStream_t stream, Index side, Index heads, const float* table, float* bias) {
  const Index count = heads * side * side * side * side;
  if (count == 0) return Status::ok();
  biasGatherKernel<<<blocksFor(count), kThreads, 0, stream>>>(side, heads, table, bias);
  REMAT_CUDA_CHECK_LAUNCH("biasGatherKernel");
  return Status::ok();
}

Status relativeBiasBackward(cudaStream_t stream, Index side, Index heads, Index batchWindows, const float* dScores,
                            float* dTable) {
  if (heads == 0) return Status::ok();
  biasBackwardKernel<<<blocksFor(heads), kThreads, 0, stream>>>(side, heads, batchWindows, dScores, dTable);
  REMAT_CUDA_CHECK_LAUNCH("biasBackwardKernel");
  return Status::ok();
}

Status shiftMask(cudaStream_t stream, const WindowShape& g, float* mask) {
  const Index count = g.windows() * g.area() * g.area();
  if (count == 0) return Status::ok();
  shiftMaskKernel<<<blocksFor(count), kThreads, 0, stream>>>(g, mask);
  REMAT_CUDA_CHECK_LAUNCH("shiftMaskKernel");
  return Status::ok();
}

Status stochasticDepthNoise(cudaStream_t stream, Index batch, double p, std::uint64_t key, float* noise) {
  if (batch == 0) return Status::ok();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  noiseKernel<float><<<blocksFor(2 * batch), kThreads, 0, stream>>>(batch, static_cast<float>(p), scale, key, noise);
  REMAT_CUDA_CHECK_LAUNCH("noiseKernel");
  return Status::ok();
}

Status scaleSamples(cudaStream_t stream, Index batch, Index perSample, const float* factor, const float* x, float* y) {
  if (batch * perSample == 0) return Status::ok();
  scaleSamplesKernel<float><<<blocksFor(batch * perSample), kThreads, 0, stream>>>(batch, perSample, factor, x, y);
  REMAT_CUDA_CHECK_LAUNCH("scaleSamplesKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels

namespace remat::gpu::kernels {
namespace {

// rows [N][P][C] <- x [N][C][P] (toRows), or the reverse; i indexes rows.
__global__ void transposeKernel(Index batch, Index channels, Index positions, const float* from, float* to,
                                bool toRows) {
  const Index count = batch * channels * positions;
  for (Index i = grid::firstIndex(); i < count; i += grid::gridStride()) {
    const Index n = i / (positions * channels), p = (i / channels) % positions, c = i % channels;
    const Index j = (n * channels + c) * positions + p;
    if (toRows)
      to[i] = from[j];
    else
      to[j] = from[i];
  }
}

// The element of x that cat[n][oy][ox][q * C + c] holds, or -1 past an odd edge (the CPU's mergeSource).
__device__ Index mergeSource(Index height, Index width, Index n, Index oy, Index ox, Index q) {
  const Index y = 2 * oy + (q & 1), x = 2 * ox + (q >> 1);  // x0 (0,0), x1 (1,0), x2 (0,1), x3 (1,1)
  if (y >= height || x >= width) return -1;
  return (n * height + y) * width + x;
}

template <typename T>
__global__ void mergeKernel(Index batch, Index height, Index width, Index channels, const T* x, T* cat, T* dx,
                            const T* dCat) {
  const Index oh = (height + 1) / 2, ow = (width + 1) / 2, C = channels, count = batch * oh * ow * 4 * C;
  for (Index i = grid::firstIndex(); i < count; i += grid::gridStride()) {
    const Index r = i / (4 * C), q = (i / C) % 4, c = i % C;
    const Index at = mergeSource(height, width, r / (oh * ow), r / ow % oh, r % ow, q);
    if (cat != nullptr)
      cat[i] = at < 0 ? half_io::store<T>(0.0f) : x[at * C + c];
    else if (at >= 0)
      dx[at * C + c] = dCat[i];
  }
}

template <typename T>
__global__ void averageKernel(Index batch, Index positions, Index channels, const T* x, T* pooled) {
  for (Index e = grid::firstIndex(); e < batch * channels; e += grid::gridStride()) {
    const Index n = e / channels, c = e % channels;
    float sum = 0.0f;
    for (Index p = 0; p < positions; ++p) sum += half_io::load(x[(n * positions + p) * channels + c]);
    pooled[e] = half_io::store<T>(sum / static_cast<float>(positions));
  }
}

template <typename T>
__global__ void averageBackwardKernel(Index batch, Index positions, Index channels, const T* dPooled, T* dx) {
  const Index count = batch * positions * channels;
  for (Index i = grid::firstIndex(); i < count; i += grid::gridStride())
    dx[i] = half_io::store<T>(half_io::load(dPooled[(i / (positions * channels)) * channels + i % channels]) /
                              static_cast<float>(positions));
}

}  // namespace

Status channelsToRows(cudaStream_t stream, Index batch, Index channels, Index positions, const float* x, float* rows) {
  const Index count = batch * channels * positions;
  if (count == 0) return Status::ok();
  transposeKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, channels, positions, x, rows, true);
  REMAT_CUDA_CHECK_LAUNCH("transposeKernel");
  return Status::ok();
}

Status rowsToChannels(cudaStream_t stream, Index batch, Index channels, Index positions, const float* rows, float* x) {
  const Index count = batch * channels * positions;
  if (count == 0) return Status::ok();
  transposeKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, channels, positions, rows, x, false);
  REMAT_CUDA_CHECK_LAUNCH("transposeKernel");
  return Status::ok();
}

Status mergeGather(cudaStream_t stream, Index batch, Index height, Index width, Index channels, const float* x,
                   float* cat) {
  const Index count = batch * ((height + 1) / 2) * ((width + 1) / 2) * 4 * channels;
  if (count == 0) return Status::ok();
  mergeKernel<float>
      <<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, height, width, channels, x, cat, nullptr, nullptr);
  REMAT_CUDA_CHECK_LAUNCH("mergeKernel");
  return Status::ok();
}

Status mergeScatter(cudaStream_t stream, Index batch, Index height, Index width, Index channels, const float* dCat,
                    float* dx) {
  const Index count = batch * ((height + 1) / 2) * ((width + 1) / 2) * 4 * channels;
  if (count == 0) return Status::ok();
  mergeKernel<float><<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, height, width, channels, nullptr,
                                                                            nullptr, dx, dCat);
  REMAT_CUDA_CHECK_LAUNCH("mergeKernel");
  return Status::ok();
}

Status averagePositions(cudaStream_t stream, Index batch, Index positions, Index channels, const float* x,
                        float* pooled) {
  if (batch * channels == 0) return Status::ok();
  averageKernel<float>
      <<<grid::blocksFor(batch * channels), grid::kThreads, 0, stream>>>(batch, positions, channels, x, pooled);
  REMAT_CUDA_CHECK_LAUNCH("averageKernel");
  return Status::ok();
}

Status averagePositionsBackward(cudaStream_t stream, Index batch, Index positions, Index channels, const float* dPooled,
                                float* dx) {
  const Index count = batch * positions * channels;
  if (count == 0) return Status::ok();
  averageBackwardKernel<float>
      <<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, positions, channels, dPooled, dx);
  REMAT_CUDA_CHECK_LAUNCH("averageBackwardKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels

// bf16-mixed's instantiations (kernels_window_half.hpp).
namespace remat::gpu::kernels {
namespace {

Status launched(const char* name) { return cudaStatus(cudaGetLastError(), name, __FILE__, __LINE__); }

__global__ void scaleHalfKernel(Index count, float factor, const Bf16* x, Bf16* y) {
  for (Index i = grid::firstIndex(); i < count; i += grid::gridStride()) y[i] = half_io::h(half_io::f(x[i]) * factor);
}

}  // namespace

Status windowPartitionHalf(cudaStream_t stream, const WindowShape& g, const Bf16* x, Bf16* windows) {
  const Index count = g.paddedTokens() * g.channels;
  if (count == 0) return Status::ok();
  partitionKernel<Bf16><<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(g, x, windows);
  return launched("launch of partitionHalfKernel");
}

Status windowReverseHalf(cudaStream_t stream, const WindowShape& g, const Bf16* windows, Bf16* y) {
  const Index count = g.paddedTokens() * g.channels;
  if (count == 0) return Status::ok();
  reverseKernel<Bf16><<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(g, windows, y);
  return launched("launch of reverseHalfKernel");
}

Status mergeGatherHalf(cudaStream_t stream, Index batch, Index height, Index width, Index channels, const Bf16* x,
                       Bf16* cat) {
  const Index count = batch * ((height + 1) / 2) * ((width + 1) / 2) * 4 * channels;
  if (count == 0) return Status::ok();
  mergeKernel<Bf16>
      <<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, height, width, channels, x, cat, nullptr, nullptr);
  return launched("launch of mergeHalfKernel");
}

Status mergeScatterHalf(cudaStream_t stream, Index batch, Index height, Index width, Index channels, const Bf16* dCat,
                        Bf16* dx) {
  const Index count = batch * ((height + 1) / 2) * ((width + 1) / 2) * 4 * channels;
  if (count == 0) return Status::ok();
  mergeKernel<Bf16><<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, height, width, channels, nullptr,
                                                                           nullptr, dx, dCat);
  return launched("launch of mergeHalfKernel");
}

Status stochasticDepthNoiseHalf(cudaStream_t stream, Index batch, double p, std::uint64_t key, Bf16* noise) {
  if (batch == 0) return Status::ok();
  const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  noiseKernel<Bf16>
      <<<grid::blocksFor(2 * batch), grid::kThreads, 0, stream>>>(batch, static_cast<float>(p), scale, key, noise);
  return launched("launch of noiseHalfKernel");
}

Status scaleSamplesHalf(cudaStream_t stream, Index batch, Index perSample, const Bf16* factor, const Bf16* x, Bf16* y) {
  if (batch * perSample == 0) return Status::ok();
  scaleSamplesKernel<Bf16>
      <<<grid::blocksFor(batch * perSample), grid::kThreads, 0, stream>>>(batch, perSample, factor, x, y);
  return launched("launch of scaleSamplesHalfKernel");
}

Status averagePositionsHalf(cudaStream_t stream, Index batch, Index positions, Index channels, const Bf16* x,
                            Bf16* pooled) {
  if (batch * channels == 0) return Status::ok();
  averageKernel<Bf16>
      <<<grid::blocksFor(batch * channels), grid::kThreads, 0, stream>>>(batch, positions, channels, x, pooled);
  return launched("launch of averageHalfKernel");
}

Status averagePositionsBackwardHalf(cudaStream_t stream, Index batch, Index positions, Index channels,
                                    const Bf16* dPooled, Bf16* dx) {
  const Index count = batch * positions * channels;
  if (count == 0) return Status::ok();
  averageBackwardKernel<Bf16>
      <<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(batch, positions, channels, dPooled, dx);
  return launched("launch of averageBackwardHalfKernel");
}

Status scaleHalf(cudaStream_t stream, Index count, float factor, const Bf16* x, Bf16* y) {
  if (count == 0) return Status::ok();
  scaleHalfKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(count, factor, x, y);
  return launched("launch of scaleHalfKernel");
}

}  // namespace remat::gpu::kernels
