#pragma once
// Swin's own CUDA kernels (kernels_window.cu), mirroring core/src/cpu/window.hpp element for
// element: the shifted-window partition and its reverse, the relative position bias gathered from
// its table (and its gradient summed back per head in a fixed order: no atomics), the shift mask,
// stochastic depth's per-sample noise and scaling. The residual stream is channels last,
// [N][H][W][C]. Internal to gpu/.
#include "kernels.hpp"
#include "remat/exec/counter_rng.hpp"  // REMAT_HOST_DEVICE

namespace remat::gpu::kernels {

// One Swin block's windows: H and W padded up to multiples of the side M, rolled by -shift, cut
// into nW windows of L = M*M tokens (the CPU's WindowGeometry).
struct WindowShape {
  Index batch = 0, height = 0, width = 0, channels = 0, side = 0;
  Index padH = 0, padW = 0, shiftH = 0, shiftW = 0;
  REMAT_HOST_DEVICE Index windows() const { return (padH / side) * (padW / side); }  // per image
  REMAT_HOST_DEVICE Index area() const { return side * side; }                       // L
  REMAT_HOST_DEVICE Index paddedTokens() const { return batch * padH * padW; }       // Tp
  REMAT_HOST_DEVICE Index tokens() const { return batch * height * width; }          // T
  bool shifted() const { return shiftH > 0 || shiftW > 0; }
};

WindowShape windowShape(Index batch, Index height, Index width, Index channels, Index side, Index shift);

// windows [Tp][C] = partition(roll(pad(x))), zero rows for the padding; y [N][H][W][C] =
// crop(roll back(reverse(windows))) (the padding's rows dropped).
Status windowPartition(cudaStream_t stream, const WindowShape& g, const float* x, float* windows);
Status windowReverse(cudaStream_t stream, const WindowShape& g, const float* windows, float* y);
// bias [h][L][L] = table[index(i, j)][h]; dTable[index(i, j)][h] += sum over the batch's windows
// of dScores[n][h][i][j] (one thread per head, (i, j) and n in order).
Status relativeBiasGather(cudaStream_t stream, Index side, Index heads, const float* table, float* bias);
Status relativeBiasBackward(cudaStream_t stream, Index side, Index heads, Index batchWindows, const float* dScores,
                            float* dTable);
// mask [nW][L][L]: 0 where tokens i and j of a window come from the same region of the rolled
// map, -100 where not (torchvision's attn_mask).
Status shiftMask(cudaStream_t stream, const WindowShape& g, float* mask);
// StochasticDepth(p, "row")'s noise: noise[site - 1][n] = scale or 0, the CPU's draw at index n of
// the sub-stream mix64(key ^ site) for sites 1 and 2.
Status stochasticDepthNoise(cudaStream_t stream, Index batch, double p, std::uint64_t key, float* noise);
// y = x with sample n's perSample elements scaled by factor[n] (y may be x).
Status scaleSamples(cudaStream_t stream, Index batch, Index perSample, const float* factor, const float* x, float* y);

// Swin's ends: [N][C][P] <-> [N][P][C] (the conv's NCHW output and the channels-last stream);
// patch merging's 2x2 gather cat[N][H'][W'][4C] = x0 | x1 | x2 | x3 (zero past an odd edge) and its
// scatter back; the head's average over positions and its backward.
Status channelsToRows(cudaStream_t stream, Index batch, Index channels, Index positions, const float* x, float* rows);
Status rowsToChannels(cudaStream_t stream, Index batch, Index channels, Index positions, const float* rows, float* x);
Status mergeGather(cudaStream_t stream, Index batch, Index height, Index width, Index channels, const float* x,
                   float* cat);
Status mergeScatter(cudaStream_t stream, Index batch, Index height, Index width, Index channels, const float* dCat,
                    float* dx);
Status averagePositions(cudaStream_t stream, Index batch, Index positions, Index channels, const float* x,
                        float* pooled);
Status averagePositionsBackward(cudaStream_t stream, Index batch, Index positions, Index channels, const float* dPooled,
                                float* dx);

}  // namespace remat::gpu::kernels
