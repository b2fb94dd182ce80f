// The transformer ends' kernels (kernels_embedding.hpp).
#include <cmath>

#include "kernel_grid.cuh"
#include "kernels_embedding.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {
namespace {

using grid::blocksFor;
using grid::firstIndex;
using grid::gridStride;
using grid::kThreads;

__global__ void lookUpKernel(EmbeddingShape e, const std::int64_t* ids, const float* params, float* tokens,
                             float* positions, float* types, float* sum) {
  const Index count = e.tokens * e.width;
  for (Index i = firstIndex(); i < count; i += gridStride()) {
    const Index t = i / e.width, c = i % e.width;
    const float token = params[static_cast<Index>(ids[t]) * e.width + c];
    const float position = params[e.positionTable + (t % e.seq) * e.width + c];
    tokens[i] = token;
    if (t < e.seq) positions[i] = position;
    float value = token;
    if (types != nullptr) {
      types[i] = params[e.typeTable + c];
      value = token + types[i];
    }
    sum[i] = value + position;
  }
}

__global__ void arangeKernel(Index seq, std::int64_t* arange) {
  for (Index s = firstIndex(); s < seq; s += gridStride()) arange[s] = s;
}

// One thread per column, tokens in order (the CPU's order of sums).
__global__ void scatterKernel(EmbeddingShape e, const std::int64_t* ids, const std::int64_t* arange, const float* dy,
                              const std::uint8_t* mask, float scale, float* grads) {
  const Index d = e.width;
  for (Index c = firstIndex(); c < d; c += gridStride())
    for (Index t = 0; t < e.tokens; ++t) {
      const Index i = t * d + c;
      const float g = mask == nullptr ? dy[i] : (mask[i] ? dy[i] * scale : 0.0f);
      grads[static_cast<Index>(ids[t]) * d + c] += g;
      grads[e.positionTable + arange[t % e.seq] * d + c] += g;
      if (e.typeTable > 0) grads[e.typeTable + c] += g;
    }
}

// One thread per row; the sum of exponentials in double, as the CPU's.
__global__ void logSoftmaxKernel(Index rows, Index width, const float* logits, float* y) {
  for (Index r = firstIndex(); r < rows; r += gridStride()) {
    const float* x = logits + r * width;
    float top = -INFINITY;
    for (Index i = 0; i < width; ++i) top = fmaxf(top, x[i]);
    double sum = 0.0;
    for (Index i = 0; i < width; ++i) sum += exp(static_cast<double>(x[i] - top));
    const float shift = top + static_cast<float>(log(sum));
    for (Index i = 0; i < width; ++i) y[r * width + i] = x[i] - shift;
  }
}

__global__ void logSoftmaxBackwardKernel(Index rows, Index width, const float* y, const float* dy, float* dx) {
  for (Index r = firstIndex(); r < rows; r += gridStride()) {
    const Index at = r * width;
    double sum = 0.0;
    for (Index i = 0; i < width; ++i) sum += dy[at + i];
    for (Index i = 0; i < width; ++i) dx[at + i] = dy[at + i] - expf(y[at + i]) * static_cast<float>(sum);
  }
}

__global__ void nllKernel(Index tokens, Index vocab, const std::int64_t* labels, float* grad) {
  const Index count = tokens * vocab;
  const float value = -1.0f / static_cast<float>(tokens);
  for (Index i = firstIndex(); i < count; i += gridStride()) grad[i] = labels[i / vocab] == i % vocab ? value : 0.0f;
}

}  // namespace

Status embeddingLookUp(cudaStream_t stream, const EmbeddingShape& e, const std::int64_t* ids, const float* params,
                       float* tokens, float* positions, float* types, float* sum) {
  const Index count = e.tokens * e.width;
  if (count == 0) return Status::ok();
  lookUpKernel<<<blocksFor(count), kThreads, 0, stream>>>(e, ids, params, tokens, positions, types, sum);
  REMAT_CUDA_CHECK_LAUNCH("lookUpKernel");
  return Status::ok();
}

Status writeArange(cudaStream_t stream, Index seq, std::int64_t* arange) {
  if (seq == 0) return Status::ok();
  arangeKernel<<<blocksFor(seq), kThreads, 0, stream>>>(seq, arange);
  REMAT_CUDA_CHECK_LAUNCH("arangeKernel");
  return Status::ok();
}

Status embeddingScatter(cudaStream_t stream, const EmbeddingShape& e, const std::int64_t* ids,
                        const std::int64_t* arange, const float* dy, const std::uint8_t* mask, float scale,
                        float* grads) {
  if (e.width == 0) return Status::ok();
  scatterKernel<<<blocksFor(e.width), kThreads, 0, stream>>>(e, ids, arange, dy, mask, scale, grads);
  REMAT_CUDA_CHECK_LAUNCH("scatterKernel");
  return Status::ok();
}

Status logSoftmaxRows(cudaStream_t stream, Index rows, Index width, const float* logits, float* y) {
  if (rows == 0) return Status::ok();
  logSoftmaxKernel<<<blocksFor(rows), kThreads, 0, stream>>>(rows, width, logits, y);
  REMAT_CUDA_CHECK_LAUNCH("logSoftmaxKernel");
  return Status::ok();
}

Status logSoftmaxBackwardRows(cudaStream_t stream, Index rows, Index width, const float* y, const float* dy,
                              float* dx) {
  if (rows == 0) return Status::ok();
  logSoftmaxBackwardKernel<<<blocksFor(rows), kThreads, 0, stream>>>(rows, width, y, dy, dx);
  REMAT_CUDA_CHECK_LAUNCH("logSoftmaxBackwardKernel");
  return Status::ok();
}

Status nllLossBackward(cudaStream_t stream, Index tokens, Index vocab, const std::int64_t* labels, float* grad) {
  if (tokens * vocab == 0) return Status::ok();
  nllKernel<<<blocksFor(tokens * vocab), kThreads, 0, stream>>>(tokens, vocab, labels, grad);
  REMAT_CUDA_CHECK_LAUNCH("nllKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels

namespace remat::gpu::kernels {
namespace {

__global__ void patchJoinKernel(PatchShape v, const float* conv, const float* classToken, const float* positions,
                                float* joined, float* y) {
  const Index perSample = v.seq * v.width, patches = v.seq - 1, count = v.batch * perSample;
  for (Index i = grid::firstIndex(); i < count; i += grid::gridStride()) {
    const Index n = i / perSample, s = (i % perSample) / v.width, c = i % v.width;
    const float value = s == 0 ? classToken[c] : conv[(n * v.width + c) * patches + (s - 1)];
    joined[i] = value;
    y[i] = value + positions[i % perSample];
  }
}

__device__ __forceinline__ float masked(const float* dy, const std::uint8_t* mask, float scale, Index i) {
  return mask == nullptr ? dy[i] : (mask[i] ? dy[i] * scale : 0.0f);
}

__global__ void patchParamsGradKernel(PatchShape v, const float* dy, const std::uint8_t* mask, float scale,
                                      float* dPositions, float* dClassToken) {
  const Index perSample = v.seq * v.width;
  for (Index i = grid::firstIndex(); i < perSample; i += grid::gridStride()) {
    float sum = 0.0f;
    for (Index n = 0; n < v.batch; ++n) sum += masked(dy, mask, scale, n * perSample + i);
    dPositions[i] += sum;
    if (i < v.width) dClassToken[i] += sum;
  }
}

__global__ void patchGatherKernel(PatchShape v, const float* dy, const std::uint8_t* mask, float scale, float* dConv) {
  const Index patches = v.seq - 1, count = v.batch * v.width * patches;
  for (Index i = grid::firstIndex(); i < count; i += grid::gridStride()) {
    const Index n = i / (v.width * patches), c = (i / patches) % v.width, p = i % patches;
    dConv[i] = masked(dy, mask, scale, (n * v.seq + 1 + p) * v.width + c);
  }
}

}  // namespace

Status patchJoin(cudaStream_t stream, const PatchShape& v, const float* conv, const float* classToken,
                 const float* positions, float* joined, float* y) {
  const Index count = v.batch * v.seq * v.width;
  if (count == 0) return Status::ok();
  patchJoinKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(v, conv, classToken, positions, joined, y);
  REMAT_CUDA_CHECK_LAUNCH("patchJoinKernel");
  return Status::ok();
}

Status patchBackward(cudaStream_t stream, const PatchShape& v, const float* dy, const std::uint8_t* mask, float scale,
                     float* dPositions, float* dClassToken, float* dConv) {
  const Index perSample = v.seq * v.width, count = v.batch * v.width * (v.seq - 1);
  if (perSample == 0) return Status::ok();
  patchParamsGradKernel<<<grid::blocksFor(perSample), grid::kThreads, 0, stream>>>(v, dy, mask, scale, dPositions,
                                                                                   dClassToken);
  REMAT_CUDA_CHECK_LAUNCH("patchParamsGradKernel");
  if (count == 0) return Status::ok();
  patchGatherKernel<<<grid::blocksFor(count), grid::kThreads, 0, stream>>>(v, dy, mask, scale, dConv);
  REMAT_CUDA_CHECK_LAUNCH("patchGatherKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
