// The pool branches, the concatenation and ShuffleNetV2's channel shuffle of bfloat16 blocks
// (kernels_half_conv.hpp): the windows and orders of kernels_pool.cu (the CPU's kernels_pool.cpp)
// and the permutation of kernels_channels.cu on bfloat16 tensors, each sum in float32 and rounded
// once, as kernels_half.cu's kernels.
#include "half_io.cuh"
#include "kernels_half_conv.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using namespace half_io;  // the grid helpers, f (widen) and h (round once)

// kernels_pool.cu's spans: the taps [lo, hi) of output o along one axis and its divisor factor.
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

__global__ void maxPoolForwardHalfKernel(PoolWindowGeometry g, const Bf16* x, Bf16* y, std::int64_t* indices) {
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
        const float v = f(x[at]);
        if (v > best || (found < 0 && v == best)) {
          best = v;
          found = at;
        }
      }
    y[i] = h(best);  // exact: a bfloat16 value
    if (indices != nullptr) indices[i] = found;
  }
}

__global__ void maxPoolBackwardHalfKernel(PoolWindowGeometry g, const std::int64_t* indices, const Bf16* dy, Bf16* dx,
                                          bool accumulate) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index iw = i % g.inWidth, ih = (i / g.inWidth) % g.inHeight, plane = i / (g.inWidth * g.inHeight);
    const Span rows = outputsHolding(ih, g.outHeight, g), cols = outputsHolding(iw, g.outWidth, g);
    const Index base = plane * g.outHeight * g.outWidth;
    float sum = accumulate ? f(dx[i]) : 0.0f;
    for (Index oh = rows.lo; oh <= rows.hi; ++oh)
      for (Index ow = cols.lo; ow <= cols.hi; ++ow) {
        const Index o = base + oh * g.outWidth + ow;
        if (indices[o] == i) sum += f(dy[o]);
      }
    dx[i] = h(sum);
  }
}

__global__ void avgPoolForwardHalfKernel(PoolWindowGeometry g, const Bf16* x, Bf16* y) {
  const Index count = g.batch * g.channels * g.outHeight * g.outWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index ow = i % g.outWidth, oh = (i / g.outWidth) % g.outHeight, plane = i / (g.outWidth * g.outHeight);
    const Span rows = spanOf(oh, g.inHeight, g), cols = spanOf(ow, g.inWidth, g);
    const Bf16* in = x + plane * g.inHeight * g.inWidth;
    float sum = 0.0f;
    for (Index ih = rows.lo; ih < rows.hi; ++ih)
      for (Index iw = cols.lo; iw < cols.hi; ++iw) sum += f(in[ih * g.inWidth + iw]);
    y[i] = h(sum / static_cast<float>(rows.divisor * cols.divisor));
  }
}

__global__ void avgPoolBackwardHalfKernel(PoolWindowGeometry g, const Bf16* dy, Bf16* dx, bool accumulate) {
  const Index count = g.batch * g.channels * g.inHeight * g.inWidth;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index iw = i % g.inWidth, ih = (i / g.inWidth) % g.inHeight, plane = i / (g.inWidth * g.inHeight);
    const Span rows = outputsHolding(ih, g.outHeight, g), cols = outputsHolding(iw, g.outWidth, g);
    const Bf16* grad = dy + plane * g.outHeight * g.outWidth;
    float sum = accumulate ? f(dx[i]) : 0.0f;
    for (Index oh = rows.lo; oh <= rows.hi; ++oh) {
      const Index rowDivisor = spanOf(oh, g.inHeight, g).divisor;
      for (Index ow = cols.lo; ow <= cols.hi; ++ow)
        sum += f(grad[oh * g.outWidth + ow]) / static_cast<float>(rowDivisor * spanOf(ow, g.inWidth, g).divisor);
    }
    dx[i] = h(sum);
  }
}

__global__ void addRowsHalfKernel(Index rows, Index width, const Bf16* from, Index fromStride, Bf16* to,
                                  Index toStride) {
  const Index count = rows * width;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index r = i / width, c = i % width;
    Bf16& out = to[r * toStride + c];
    out = h(f(out) + f(from[r * fromStride + c]));
  }
}

__global__ void channelShuffleForwardHalfKernel(Index batch, Index channels, Index groups, Index plane, const Bf16* x,
                                                Index xSampleStride, Bf16* y) {
  const Index perGroup = channels / groups, count = batch * channels * plane;
  for (Index at = firstIndex(); at < count; at += gridStride()) {
    const Index p = at % plane, outChannel = (at / plane) % channels, n = at / (plane * channels);
    const Index k = outChannel / groups, i = outChannel % groups;
    y[at] = x[n * xSampleStride + (i * perGroup + k) * plane + p];
  }
}

__global__ void channelShuffleBackwardHalfKernel(Index batch, Index channels, Index groups, Index plane, const Bf16* dy,
                                                 Bf16* dx, bool accumulate) {
  const Index perGroup = channels / groups, count = batch * channels * plane;
  for (Index at = firstIndex(); at < count; at += gridStride()) {
    const Index p = at % plane, inChannel = (at / plane) % channels, n = at / (plane * channels);
    const Index i = inChannel / perGroup, k = inChannel % perGroup;
    const Bf16 g = dy[(n * channels + k * groups + i) * plane + p];
    dx[at] = accumulate ? h(f(dx[at]) + f(g)) : g;
  }
}

Status checkGroups(Index channels, Index groups) {
  if (groups < 1 || channels % groups != 0)
    return Status::invalid("channel shuffle: " + std::to_string(channels) + " channels in " + std::to_string(groups) +
                           " groups (the groups must divide the channels)");
  return Status::ok();
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

}  // namespace

Status maxPoolForwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const Bf16* x, Bf16* y,
                          std::int64_t* indices) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "max pooling"));
  if (outputs(g) == 0) return Status::ok();
  maxPoolForwardHalfKernel<<<blocksFor(outputs(g)), kThreads, 0, stream>>>(g, x, y, indices);
  REMAT_CUDA_CHECK_LAUNCH("maxPoolForwardHalfKernel");
  return Status::ok();
}

Status maxPoolBackwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const std::int64_t* indices,
                           const Bf16* dy, Bf16* dx, bool accumulate) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "max pooling"));
  if (indices == nullptr) return Status::invalid("max pooling backward: no saved argmax (the forward kept none)");
  if (inputs(g) == 0) return Status::ok();
  maxPoolBackwardHalfKernel<<<blocksFor(inputs(g)), kThreads, 0, stream>>>(g, indices, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("maxPoolBackwardHalfKernel");
  return Status::ok();
}

Status avgPoolForwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const Bf16* x, Bf16* y) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "average pooling"));
  if (outputs(g) == 0) return Status::ok();
  avgPoolForwardHalfKernel<<<blocksFor(outputs(g)), kThreads, 0, stream>>>(g, x, y);
  REMAT_CUDA_CHECK_LAUNCH("avgPoolForwardHalfKernel");
  return Status::ok();
}

Status avgPoolBackwardHalf(cudaStream_t stream, const PoolWindowGeometry& g, const Bf16* dy, Bf16* dx,
                           bool accumulate) {
  REMAT_RETURN_IF_ERROR(checkGeometry(g, "average pooling"));
  if (inputs(g) == 0) return Status::ok();
  avgPoolBackwardHalfKernel<<<blocksFor(inputs(g)), kThreads, 0, stream>>>(g, dy, dx, accumulate);
  REMAT_CUDA_CHECK_LAUNCH("avgPoolBackwardHalfKernel");
  return Status::ok();
}

Status channelShuffleForwardHalf(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                                 const Bf16* x, Index xSampleStride, Bf16* y) {
  REMAT_RETURN_IF_ERROR(checkGroups(channels, groups));
  const Index count = batch * channels * plane;
  if (count == 0) return Status::ok();
  channelShuffleForwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(batch, channels, groups, plane, x,
                                                                             xSampleStride, y);
  REMAT_CUDA_CHECK_LAUNCH("channelShuffleForwardHalfKernel");
  return Status::ok();
}

Status channelShuffleBackwardHalf(cudaStream_t stream, Index batch, Index channels, Index groups, Index plane,
                                  const Bf16* dy, Bf16* dx, bool accumulate) {
  REMAT_RETURN_IF_ERROR(checkGroups(channels, groups));
  const Index count = batch * channels * plane;
  if (count == 0) return Status::ok();
  channelShuffleBackwardHalfKernel<<<blocksFor(count), kThreads, 0, stream>>>(batch, channels, groups, plane, dy, dx,
                                                                              accumulate);
  REMAT_CUDA_CHECK_LAUNCH("channelShuffleBackwardHalfKernel");
  return Status::ok();
}

Status copyOrAddRowsHalf(cudaStream_t stream, Index rows, Index width, const Bf16* from, Index fromStride, Bf16* to,
                         Index toStride, bool accumulate) {
  if (rows * width == 0) return Status::ok();
  if (!accumulate) {  // a strided copy moves bytes: the dtype does not matter
    const std::size_t bytes = sizeof(Bf16);
    REMAT_CUDA_CHECK(cudaMemcpy2DAsync(
        to, static_cast<std::size_t>(toStride) * bytes, from, static_cast<std::size_t>(fromStride) * bytes,
        static_cast<std::size_t>(width) * bytes, static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  }
  addRowsHalfKernel<<<blocksFor(rows * width), kThreads, 0, stream>>>(rows, width, from, fromStride, to, toStride);
  REMAT_CUDA_CHECK_LAUNCH("addRowsHalfKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
