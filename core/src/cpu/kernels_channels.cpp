// ShuffleNetV2's channel kernels of blocks: the channel slice's backward and the channel shuffle
// (kernels.hpp). Plain strided copies: they allocate nothing, so a block's workspaces are its arenas
// exactly, and each output element is written by one thread: bitwise reproducible.
#include <type_traits>

#include "kernels.hpp"

namespace remat::cpu {

namespace {

// Channel slice backward and shuffle in either dtype (a half block's bfloat16 under bf16-mixed): a permutation, so a
// bfloat16 copy is exact; an accumulating backward adds through float32 and rounds once.
template <typename T>
void sliceBackwardOf(Index rows, Index inChannels, Index begin, Index count, const T* dy, T* dx, bool accumulate) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    T* row = dx + r * inChannels;
    const T* g = dy + r * count;
    if (accumulate) {
      for (Index c = 0; c < count; ++c) row[begin + c] = stored<T>(valueOf(row[begin + c]) + valueOf(g[c]));
      continue;
    }
    for (Index c = 0; c < begin; ++c) row[c] = T{};
    for (Index c = 0; c < count; ++c) row[begin + c] = g[c];
    for (Index c = begin + count; c < inChannels; ++c) row[c] = T{};
  }
}

template <typename T>
void shuffleForward(Index rows, Index channels, Index groups, const T* x, Index xStride, T* y) {
  const Index perGroup = channels / groups;
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const T* in = x + r * xStride;
    T* out = y + r * channels;
    for (Index k = 0; k < perGroup; ++k)
      for (Index i = 0; i < groups; ++i) out[k * groups + i] = in[i * perGroup + k];
  }
}

template <typename T>
void shuffleBackward(Index rows, Index channels, Index groups, const T* dy, T* dx, bool accumulate) {
  const Index perGroup = channels / groups;
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const T* g = dy + r * channels;
    T* d = dx + r * channels;
    for (Index k = 0; k < perGroup; ++k)
      for (Index i = 0; i < groups; ++i) {
        const T v = g[k * groups + i];
        d[i * perGroup + k] = accumulate ? stored<T>(valueOf(d[i * perGroup + k]) + valueOf(v)) : v;
      }
  }
}

}  // namespace

void sliceBackward(Index rows, Index inChannels, Index begin, Index count, const float* dy, float* dx,
                   bool accumulate) {
  sliceBackwardOf(rows, inChannels, begin, count, dy, dx, accumulate);
}
void sliceBackward(Index rows, Index inChannels, Index begin, Index count, const BFloat16* dy, BFloat16* dx,
                   bool accumulate) {
  sliceBackwardOf(rows, inChannels, begin, count, dy, dx, accumulate);
}

void channelShuffleForward(Index rows, Index channels, Index groups, const float* x, Index xStride, float* y) {
  shuffleForward(rows, channels, groups, x, xStride, y);
}
void channelShuffleForward(Index rows, Index channels, Index groups, const BFloat16* x, Index xStride, BFloat16* y) {
  shuffleForward(rows, channels, groups, x, xStride, y);
}
void channelShuffleBackward(Index rows, Index channels, Index groups, const float* dy, float* dx, bool accumulate) {
  shuffleBackward(rows, channels, groups, dy, dx, accumulate);
}
void channelShuffleBackward(Index rows, Index channels, Index groups, const BFloat16* dy, BFloat16* dx,
                            bool accumulate) {
  shuffleBackward(rows, channels, groups, dy, dx, accumulate);
}

}  // namespace remat::cpu
