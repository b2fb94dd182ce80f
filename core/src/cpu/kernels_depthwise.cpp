// The weight gradient of a depthwise convolution (groups = in = out channels) on channels-last
// tensors, for the kernel sizes where oneDNN 2.6 has no depthwise backward-weights kernel: its
// jit_dw implementation takes 3x3 only, and for 5x5 (EfficientNet, MobileNetV3) it falls back to
// the dense grouped kernel, which pads every group of one channel to a 16x16 block (16x the work,
// a third of EfficientNet-B0's step) or, on blocked layouts, to its reference kernel. Here the
// work is the convolution's own, on blocks of 16 channels (one cache line of every row). It needs
// no scratch and adds straight into the parameter gradients, so the layer's wb is only its data
// gradient's (the padded kernel's took 16x the weights in scratch: 29 MiB at features.6).
//
// Each gradient element is summed by one thread in the fixed order (n, oh, ow), whatever the
// thread count: bitwise reproducible.
#include <algorithm>

#include "kernels.hpp"

namespace remat::cpu {
namespace {

constexpr Index kChannelBlock = 16;

// Sums over every output position, for channels [c0, c0 + width): d(w) into acc[(kh * k + kw) *
// kChannelBlock + cc] and d(b) into biasAcc[cc]. One tap at a time, so its 16 sums stay in
// registers while the block's rows of x and d(y) (in L2) stream by; each sum still runs over
// (n, oh, ow) in order. Full blocks have a compile-time width: the innermost loop is one or a few
// vector operations.
template <bool Full>
void sumChannelBlock(const ConvGeometry& g, Index c0, Index width, const float* x, const float* dy, float* acc,
                     float* biasAcc) {
  const Index w = Full ? kChannelBlock : width;
  const Index channels = g.inChannels, k = g.kernel;
  for (Index p = 0; p < g.batch * g.outHeight * g.outWidth; ++p) {
    const float* d = dy + p * channels + c0;
    for (Index cc = 0; cc < w; ++cc) biasAcc[cc] += d[cc];
  }
  for (Index kh = 0; kh < k; ++kh)
    for (Index kw = 0; kw < k; ++kw) {
      // The output columns whose input column ow * stride - padding + kw lies inside the input.
      Index owLo = 0, owHi = g.outWidth;
      while (owLo < owHi && owLo * g.stride - g.padding + kw < 0) ++owLo;
      while (owHi > owLo && (owHi - 1) * g.stride - g.padding + kw >= g.inWidth) --owHi;
      float sum[kChannelBlock] = {};
      for (Index n = 0; n < g.batch; ++n)
        for (Index oh = 0; oh < g.outHeight; ++oh) {
          const Index ih = oh * g.stride - g.padding + kh;
          if (ih < 0 || ih >= g.inHeight) continue;
          const Index dRow = (n * g.outHeight + oh) * g.outWidth, xRow = (n * g.inHeight + ih) * g.inWidth;
          for (Index ow = owLo; ow < owHi; ++ow) {
            const float* d = dy + (dRow + ow) * channels + c0;
            const float* v = x + (xRow + ow * g.stride - g.padding + kw) * channels + c0;
            for (Index cc = 0; cc < w; ++cc) sum[cc] += d[cc] * v[cc];
          }
        }
      for (Index cc = 0; cc < w; ++cc) acc[(kh * k + kw) * kChannelBlock + cc] = sum[cc];
    }
}

}  // namespace

bool depthwiseWeightGradientFits(const ConvGeometry& g) {
  return g.groups > 1 && g.groups == g.inChannels && g.groups == g.outChannels && g.square() &&
         g.kernel <= kMaxDepthwiseKernel;
}

void depthwiseWeightGradient(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db) {
  const Index blocks = (g.inChannels + kChannelBlock - 1) / kChannelBlock;
  const Index taps = g.kernel * g.kernel;
#pragma omp parallel for schedule(static)
  for (Index b = 0; b < blocks; ++b) {
    // At most kMaxDepthwiseKernel^2 taps of 16 floats: 3.1 KiB on the thread's stack.
    alignas(64) float acc[kMaxDepthwiseKernel * kMaxDepthwiseKernel * kChannelBlock] = {};
    alignas(64) float biasAcc[kChannelBlock] = {};
    const Index c0 = b * kChannelBlock, width = std::min(kChannelBlock, g.inChannels - c0);
    if (width == kChannelBlock)
      sumChannelBlock<true>(g, c0, width, x, dy, acc, biasAcc);
    else
      sumChannelBlock<false>(g, c0, width, x, dy, acc, biasAcc);
    for (Index cc = 0; cc < width; ++cc) {
      float* row = dw + (c0 + cc) * taps;  // PyTorch's [C][1][kh][kw]
      for (Index t = 0; t < taps; ++t) row[t] += acc[t * kChannelBlock + cc];
      if (db != nullptr) db[c0 + cc] += biasAcc[cc];
    }
  }
}

}  // namespace remat::cpu
