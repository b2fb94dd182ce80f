#pragma once
// Swin's own kernels (kernels_window.cpp): the shifted-window partition and its reverse, the
// relative position bias gathered from its table (and its gradient scattered back), the shift
// mask, patch merging's 2x2 gather and the head's average pool. The residual stream is channels
// last, [N][H][W][C], in canonical order. Internal to core/src/cpu.
#include "kernels.hpp"

namespace remat::cpu {

// One Swin block's windows (docs/memory-model.md 12.6): torchvision pads H and W up to multiples
// of the window side M, rolls the padded map by (-shiftH, -shiftW) and cuts it into nW windows of
// L = M*M tokens; a side no longer than the window is not shifted (shifted_window_attention).
struct WindowGeometry {
  Index batch = 0, height = 0, width = 0, channels = 0, side = 0;
  Index padH = 0, padW = 0, shiftH = 0, shiftW = 0;
  Index windows() const { return (padH / side) * (padW / side); }  // per image
  Index area() const { return side * side; }                       // L
  Index paddedTokens() const { return batch * padH * padW; }       // Tp: the window rows
  Index tokens() const { return batch * height * width; }          // T
  bool shifted() const { return shiftH > 0 || shiftW > 0; }
};

WindowGeometry windowGeometry(Index batch, Index height, Index width, Index channels, Index side, Index shift);

// Window row r (window (n, w), token t) -> the row of [N][H][W] it holds, or -1 for padding.
Index windowSource(const WindowGeometry& g, Index r);

// windows [Tp][C] = partition(roll(pad(x))): zero rows for the padding (the forward; and the
// backward of the reverse, which gathers d(branch) into window rows).
void windowPartition(const WindowGeometry& g, const float* x, float* windows);
// y [N][H][W][C] = crop(roll back(reverse(windows))) (the forward), or its use in the backward:
// d(x) of the partition (the padding's rows are dropped).
void windowReverse(const WindowGeometry& g, const float* windows, float* y);

// bias [h][L][L] = table[index(i, j)][h], index(i, j) = (yi - yj + M - 1)(2M - 1) + xi - xj + M - 1.
void relativeBiasGather(Index side, Index heads, const float* table, float* bias);
// dTable[index(i, j)][h] += sum over the batch's windows n of dScores[n][h][i][j].
void relativeBiasBackward(Index side, Index heads, Index batchWindows, const float* dScores, float* dTable);
// mask [nW][L][L]: 0 where tokens i and j of a window come from the same region of the rolled map,
// -100 where not (torchvision's attn_mask).
void shiftMask(const WindowGeometry& g, float* mask);

// torchvision's PatchMerging gather: cat[N][H'][W'][4C] = x0 | x1 | x2 | x3, the 2x2 neighbours
// (even row even column, odd even, even odd, odd odd) of x [N][H][W][C], zero past an odd edge; the
// backward scatters d(cat) back (every element of x has exactly one place).
void mergeGather(Index batch, Index height, Index width, Index channels, const float* x, float* cat);
void mergeScatter(Index batch, Index height, Index width, Index channels, const float* dCat, float* dx);

// pooled[n][c] = mean over positions of x[n][p][c]; the backward spreads d(pooled) / positions.
void averagePositions(Index batch, Index positions, Index channels, const float* x, float* pooled);
void averagePositionsBackward(Index batch, Index positions, Index channels, const float* dPooled, float* dx);

// y = x with sample n's perSample elements scaled by factor[n] (stochastic depth's noise; y may be x).
void scaleSamples(Index batch, Index perSample, const float* factor, const float* x, float* y);

}  // namespace remat::cpu
