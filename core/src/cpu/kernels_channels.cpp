// ShuffleNetV2's channel kernels of blocks: the channel slice's backward and the channel shuffle
// (kernels.hpp). Plain strided copies: they allocate nothing, so a block's workspaces are its arenas
// exactly, and each output element is written by one thread: bitwise reproducible.
#include "kernels.hpp"

namespace remat::cpu {

void sliceBackward(Index rows, Index inChannels, Index begin, Index count, const float* dy, float* dx,
                   bool accumulate) {
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    float* row = dx + r * inChannels;
    const float* g = dy + r * count;
    if (accumulate) {
      for (Index c = 0; c < count; ++c) row[begin + c] += g[c];
      continue;
    }
    for (Index c = 0; c < begin; ++c) row[c] = 0.0f;
    for (Index c = 0; c < count; ++c) row[begin + c] = g[c];
    for (Index c = begin + count; c < inChannels; ++c) row[c] = 0.0f;
  }
}

void channelShuffleForward(Index rows, Index channels, Index groups, const float* x, Index xStride, float* y) {
  const Index perGroup = channels / groups;
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const float* in = x + r * xStride;
    float* out = y + r * channels;
    for (Index k = 0; k < perGroup; ++k)
      for (Index i = 0; i < groups; ++i) out[k * groups + i] = in[i * perGroup + k];
  }
}

void channelShuffleBackward(Index rows, Index channels, Index groups, const float* dy, float* dx, bool accumulate) {
  const Index perGroup = channels / groups;
#pragma omp parallel for schedule(static)
  for (Index r = 0; r < rows; ++r) {
    const float* g = dy + r * channels;
    float* d = dx + r * channels;
    for (Index k = 0; k < perGroup; ++k)
      for (Index i = 0; i < groups; ++i) {
        const float v = g[k * groups + i];
        d[i * perGroup + k] = accumulate ? d[i * perGroup + k] + v : v;
      }
  }
}

}  // namespace remat::cpu
