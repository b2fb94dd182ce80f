// Pooling inside a block (kernels.hpp): GoogLeNet's and Inception's pool branches, whose gradient
// may have to be added to what another branch wrote, which cuDNN's pooling backward cannot do.
// The windows are the CPU's (core/src/cpu/kernels_pool.cpp): kernel x kernel taps from
// o * stride - padding, clipped to the input; average pooling divides by the window clipped to the
// input plus its padding (count_include_pad). Forwards: one thread per output, taps in (ih, iw)
// order. Backwards: one thread per input element gathering from the outputs whose windows hold it
// in (oh, ow) order, starting from dx when accumulating: the CPU's order of additions, no atomics.
// The kernels are templated on the element type: bf16-mixed's pool branches (kernels_half_conv.hpp)
// run them on bfloat16, each sum in float32 and rounded once on write (half_io.cuh).
#include "half_io.cuh"
#include "kernels.hpp"
#include "kernels_half_conv.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

using namespace half_io;  // the grid helpers, load (widen) and store<T> (round once for bfloat16)

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

template <typename T>
__global__ void maxPoolForwardKernel(PoolWindowGeometry g, const T* x, T* y, std::int64_t* indices) {
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
        const float v = load(x[at]);
        if (v > best || (found < 0 && v == best)) {
          best = v;
          found = at;
        }
      }
    y[i] = store<T>(best);                       // exact for bfloat16: a bfloat16 value
    if (indices != nullptr) indices[i] = found;  // -1 only for an all-NaN window: its gradient goes nowhere
  }
}

template <typename T>
__global__ void maxPoolBackwardKernel(PoolWindowGeometry g, const std::int64_t* indices, const T* dy, T* dx,
                                      bool accumulate) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index iw = i % g.inWidth, ih = (i / g.inWidth) % g.inHeight, plane = i / (g.inWidth * g.inHeight);
    const Span rows = outputsHolding(ih, g.outHeight, g), cols = outputsHolding(iw, g.outWidth, g);
    const Index base = plane * g.outHeight * g.outWidth;
    float sum = accumulate ? load(dx[i]) : 0.0f;
    for (Index oh = rows.lo; oh <= rows.hi; ++oh)
      for (Index ow = cols.lo; ow <= cols.hi; ++ow) {
        const Index o = base + oh * g.outWidth + ow;
        if (indices[o] == i) sum += load(dy[o]);
      }
    dx[i] = store<T>(sum);
  }
}

template <typename T>
__global__ void avgPoolForwardKernel(PoolWindowGeometry g, const T* x, T* y) {
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index ow = i % g.outWidth, oh = (i / g.outWidth) % g.outHeight, plane = i / (g.outWidth * g.outHeight);
    const Span rows = spanOf(oh, g.inHeight, g), cols = spanOf(ow, g.inWidth, g);
    const T* in = x + plane * g.inHeight * g.inWidth;
    float sum = 0.0f;
    for (Index ih = rows.lo; ih < rows.hi; ++ih)
      for (Index iw = cols.lo; iw < cols.hi; ++iw) sum += load(in[ih * g.inWidth + iw]);
    y[i] = store<T>(sum / static_cast<float>(rows.divisor * cols.divisor));
  }
}

template <typename T>
__global__ void avgPoolBackwardKernel(PoolWindowGeometry g, const T* dy, T* dx, bool accumulate) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index iw = i % g.inWidth, ih = (i / g.inWidth) % g.inHeight, plane = i / (g.inWidth * g.inHeight);
    const Span rows = outputsHolding(ih, g.outHeight, g), cols = outputsHolding(iw, g.outWidth, g);
    const T* grad = dy + plane * g.outHeight * g.outWidth;
    float sum = accumulate ? load(dx[i]) : 0.0f;
    for (Index oh = rows.lo; oh <= rows.hi; ++oh) {
      const Index rowDivisor = spanOf(oh, g.inHeight, g).divisor;
      for (Index ow = cols.lo; ow <= cols.hi; ++ow)
        sum += load(grad[oh * g.outWidth + ow]) / static_cast<float>(rowDivisor * spanOf(ow, g.inWidth, g).divisor);
    }
    dx[i] = store<T>(sum);
  }
}

Status checkGeometry(const PoolWindowGeometry& g, const char* what) {
  if (g.kernel < 1 || g.stride < 1 || g.padding < 0 || g.padding * 2 > g.kernel)
    return Status::invalid(std::string(what) + ": kernel " + std::to_string(g.kernel) + ", stride " +
                           std::to_string(g.stride) + ", padding " + std::to_string(g.padding) +
                           " (PyTorch's rule: kernel and stride at least 1, padding at most half the kernel)");
  return Status::ok();
}

Index outputs(const PoolWindowGeometry& g) { return g.batch * g.channels * g.outHeight * g.outWidth; }
Index inputs(const PoolWindowGeometry& g) { return g.batch * g.channels * g.inHeight * g.inWidth; }

// Each checks the geometry, launches nothing for an empty tensor and checks the launch under the
// public launcher's kernel name (`launchName`: "launch of <kernel>", float32 and bfloat16 apart).
template <typename T>
Status launchMaxPoolForward(cudaStream_t stream, const PoolWindowGeometry& g, const T* x, T* y, std::int64_t* indices,
                            const char* launchName) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "max pooling"));
  if (outputs(g) == 0) return Status::ok();
  maxPoolForwardKernel<T><<<blocksFor(outputs(g)), kThreads, 0, stream>>>(g, x, y, indices);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

template <typename T>
Status launchMaxPoolBackward(cudaStream_t stream, const PoolWindowGeometry& g, const std::int64_t* indices, const T* dy,
                             T* dx, bool accumulate, const char* launchName) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "max pooling"));
  if (indices == nullptr) return Status::invalid("max pooling backward: no saved argmax (the forward kept none)");
  if (inputs(g) == 0) return Status::ok();
  maxPoolBackwardKernel<T><<<blocksFor(inputs(g)), kThreads, 0, stream>>>(g, indices, dy, dx, accumulate);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

template <typename T>
Status launchAvgPoolForward(cudaStream_t stream, const PoolWindowGeometry& g, const T* x, T* y,
                            const char* launchName) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "average pooling"));
  if (outputs(g) == 0) return Status::ok();
  avgPoolForwardKernel<T><<<blocksFor(outputs(g)), kThreads, 0, stream>>>(g, x, y);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

template <typename T>
Status launchAvgPoolBackward(cudaStream_t stream, const PoolWindowGeometry& g, const T* dy, T* dx, bool accumulate,
                             const char* launchName) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "average pooling"));
  if (inputs(g) == 0) return Status::ok();
  avgPoolBackwardKernel<T><<<blocksFor(inputs(g)), kThreads, 0, stream>>>(g, dy, dx, accumulate);
  return cudaStatus(cudaGetLastError(), launchName, __FILE__, __LINE__);
}

}  // namespace

Status maxPoolForward(cudaStream_t stream, const PoolWindowGeometry& g, const float* x, float* y,
                      std::int64_t* indices) {
  return launchMaxPoolForward(stream, g, x, y, indices, "launch of maxPoolForwardKernel");
}

Status maxPoolBackward(cudaStream_t stream, const PoolWindowGeometry& g, const std::int64_t* indices, const float* dy,
                       float* dx, bool accumulate) {
  return launchMaxPoolBackward(stream, g, indices, dy, dx, accumulate, "launch of maxPoolBackwardKernel");
}

Status avgPoolForward(cudaStream_t stream, const PoolWindowGeometry& g, const float* x, float* y) {
  return launchAvgPoolForward(stream, g, x, y, "launch of avgPoolForwardKernel");
}

Status avgPoolBackward(cudaStream_t stream, const PoolWindowGeometry& g, const float* dy, float* dx, bool accumulate) {
  return launchAvgPoolBackward(stream, g, dy, dx, accumulate, "launch of avgPoolBackwardKernel");
}

Status maxPoolForwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const Bf16* x, Bf16* y,
                          std::int64_t* indices) {
  return launchMaxPoolForward(stream, g, x, y, indices, "launch of maxPoolForwardHalfKernel");
}

Status maxPoolBackwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const std::int64_t* indices,
                           const Bf16* dy, Bf16* dx, bool accumulate) {
  return launchMaxPoolBackward(stream, g, indices, dy, dx, accumulate, "launch of maxPoolBackwardHalfKernel");
}

Status avgPoolForwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const Bf16* x, Bf16* y) {
  return launchAvgPoolForward(stream, g, x, y, "launch of avgPoolForwardHalfKernel");
}

Status avgPoolBackwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const Bf16* dy, Bf16* dx,
                           bool accumulate) {
  return launchAvgPoolBackward(stream, g, dy, dx, accumulate, "launch of avgPoolBackwardHalfKernel");
}

}  // namespace remat::gpu::kernels
