// Pooling inside a block (kernels.hpp): GoogLeNet's and Inception's pool branches, whose gradient
// may have to be added to what another branch wrote, which cuDNN's pooling backward cannot do.
// The windows are the CPU's (core/src/cpu/kernels_pool.cpp): kernel x kernel taps from
// o * stride - padding, clipped to the input; average pooling divides by the window clipped to the
// input plus its padding (count_include_pad). Forwards: one thread per output, taps in (ih, iw)
// order. Backwards: one thread per input element gathering from the outputs whose windows hold it
// in (oh, ow) order, starting from dx when accumulating: the CPU's order of additions, no atomics.
#include "kernel_grid.cuh"
#include "kernels.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using grid::firstIndex;
using grid::gridStride;

// The taps [lo, hi) of output o along one axis, and that axis's factor of the average's divisor.
struct Span {
  Index lo, hi, divisor;
};

__device__ Span spanOf(Index o, Index extent, const PoolWindowGeometry& g) {
  const Index start = o * g.stride - g.padding;
  const Index lo = start > 0 ? start : 0;
  const Index end = start + g.kernel < extent ? start + g.kernel : extent;
  const Index reach = start + g.kernel < extent + g.padding ? start + g.kernel : extent + g.padding;
  return Span{lo, end > lo ? end : lo, reach - start};
}

// The outputs [first, last] along one axis whose windows hold input position i.
__device__ Span outputsHolding(Index i, Index outExtent, const PoolWindowGeometry& g) {
  const Index shifted = i + g.padding;
  const Index first = shifted >= g.kernel ? (shifted - g.kernel) / g.stride + 1 : 0;
  const Index last = shifted / g.stride < outExtent - 1 ? shifted / g.stride : outExtent - 1;
  return Span{first, last, 0};
}

__global__ void maxPoolForwardKernel(PoolWindowGeometry g, const float* x, float* y, std::int64_t* indices) {
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index ow = i % g.outWidth, oh = (i / g.outWidth) % g.outHeight, plane = i / (g.outWidth * g.outHeight);
    const Span rows = spanOf(oh, g.inHeight, g), cols = spanOf(ow, g.inWidth, g);
    const Index base = plane * g.inHeight * g.inWidth;
    float best = -__int_as_float(0x7f800000);  // -inf
    Index found = -1;
    for (Index ih = rows.lo; ih < rows.hi; ++ih)
      for (Index iw = cols.lo; iw < cols.hi; ++iw) {
        const Index at = base + ih * g.inWidth + iw;
        if (x[at] > best || (found < 0 && x[at] == best)) {
          best = x[at];
          found = at;
        }
      }
    y[i] = best;
    if (indices != nullptr) indices[i] = found;  // -1 only for an all-NaN window: its gradient goes nowhere
  }
}

__global__ void maxPoolBackwardKernel(PoolWindowGeometry g, const std::int64_t* indices, const float* dy, float* dx,
                                      bool accumulate) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index iw = i % g.inWidth, ih = (i / g.inWidth) % g.inHeight, plane = i / (g.inWidth * g.inHeight);
    const Span rows = outputsHolding(ih, g.outHeight, g), cols = outputsHolding(iw, g.outWidth, g);
    const Index base = plane * g.outHeight * g.outWidth;
    float sum = accumulate ? dx[i] : 0.0f;
    for (Index oh = rows.lo; oh <= rows.hi; ++oh)
      for (Index ow = cols.lo; ow <= cols.hi; ++ow) {
        const Index o = base + oh * g.outWidth + ow;
        if (indices[o] == i) sum += dy[o];
      }
    dx[i] = sum;
  }
}

__global__ void avgPoolForwardKernel(PoolWindowGeometry g, const float* x, float* y) {
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index ow = i % g.outWidth, oh = (i / g.outWidth) % g.outHeight, plane = i / (g.outWidth * g.outHeight);
    const Span rows = spanOf(oh, g.inHeight, g), cols = spanOf(ow, g.inWidth, g);
    const float* in = x + plane * g.inHeight * g.inWidth;
    float sum = 0.0f;
    for (Index ih = rows.lo; ih < rows.hi; ++ih)
      for (Index iw = cols.lo; iw < cols.hi; ++iw) sum += in[ih * g.inWidth + iw];
    y[i] = sum / static_cast<float>(rows.divisor * cols.divisor);
  }
}

__global__ void avgPoolBackwardKernel(PoolWindowGeometry g, const float* dy, float* dx, bool accumulate) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index iw = i % g.inWidth, ih = (i / g.inWidth) % g.inHeight, plane = i / (g.inWidth * g.inHeight);
    const Span rows = outputsHolding(ih, g.outHeight, g), cols = outputsHolding(iw, g.outWidth, g);
    const float* grad = dy + plane * g.outHeight * g.outWidth;
    float sum = accumulate ? dx[i] : 0.0f;
    for (Index oh = rows.lo; oh <= rows.hi; ++oh) {
      const Index rowDivisor = spanOf(oh, g.inHeight, g).divisor;
      for (Index ow = cols.lo; ow <= cols.hi; ++ow)
        sum += grad[oh * g.outWidth + ow] / static_cast<float>(rowDivisor * spanOf(ow, g.inWidth, g).divisor);
    }
    dx[i] = sum;
  }
}

Status checkGeometry(const PoolWindowGeometry& g, const char* what) {
  if (g.kernel < 1 || g.stride < 1 || g.padding < 0 || g.padding * 2 > g.kernel)
    return Status::invalid(std::string(what) + ": kernel " + std::to_string(g.kernel) + ", stride " +
                           std::to_string(g.stride) + ", padding " + std::to_string(g.padding) +
                           " (PyTorch's rule: kernel and stride at least 1, padding at most half the kernel)");
  return Status::ok();
}

}  // namespace

Status maxPoolForward(cudaStream_t stream, const PoolWindowGeometry& g, const float* x, float* y,
                      std::int64_t* indices) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "max pooling"));
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  if (count == 0) return Status::ok();
  maxPoolForwardKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(g, x, y, indices);
  REMAT_CUDA_CHECK_LAUNCH("maxPoolForwardKernel");
  return Status::ok();
}

Status maxPoolBackward(cudaStream_t stream, const PoolWindowGeometry& g, const std::int64_t* indices, const float* dy,
                       float* dx, bool accumulate) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "max pooling"));
  if (indices == nullptr) return Status::invalid("max pooling backward: no saved argmax (the forward kept none)");
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  if (count == 0) return Status::ok();
  maxPoolBackwardKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(g, indices, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("maxPoolBackwardKernel");
  return Status::ok();
}

Status avgPoolForward(cudaStream_t stream, const PoolWindowGeometry& g, const float* x, float* y) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "average pooling"));
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  if (count == 0) return Status::ok();
  avgPoolForwardKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(g, x, y);
  REMAT_CUDA_CHECK_LAUNCH("avgPoolForwardKernel");
  return Status::ok();
}

Status avgPoolBackward(cudaStream_t stream, const PoolWindowGeometry& g, const float* dy, float* dx, bool accumulate) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "average pooling"));
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  if (count == 0) return Status::ok();
  avgPoolBackwardKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(g, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("avgPoolBackwardKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
