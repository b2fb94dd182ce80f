#pragma once
// ViT's conv_proj under bf16-mixed as a GEMM (kernels_patch_half.cu; cuda_patch_half.cpp): kernel =
// stride = k, so every patch is one row of C*k*k pixels (c, then ky, then kx: conv weight [d][C][k][k]
// is then the linear's [d][C*k*k]) and the convolution is rows W^T with float32 accumulation, as
// oneDNN's bfloat16 convolution on the CPU. Pixels past the last whole patch are read by no patch.
// One thread per element, no atomics (patches do not overlap). Internal to gpu/.
#include "kernels_half.hpp"
#include "remat/exec/counter_rng.hpp"  // REMAT_HOST_DEVICE

namespace remat::gpu::kernels {

struct PatchGrid {
  Index batch = 0, channels = 0, height = 0, width = 0, kernel = 1;
  REMAT_HOST_DEVICE Index across() const { return width / kernel; }
  REMAT_HOST_DEVICE Index patches() const { return (height / kernel) * across(); }
  REMAT_HOST_DEVICE Index rowLength() const { return channels * kernel * kernel; }
};

// rows [N*P][C*k*k] = the bfloat16 image's patches (image NCHW).
Status unfoldPatchesHalf(cudaStream_t stream, const PatchGrid& g, const Bf16* image, Bf16* rows);
// image (float32 NCHW) = float(rows) put back (the pixels no patch reads: 0).
Status foldPatches(cudaStream_t stream, const PatchGrid& g, const Bf16* rows, float* image);
// channels [N][d][P] (float32) = float(rows [N][P][d]): the conv's NCHW output patchJoin reads.
Status patchRowsToChannels(cudaStream_t stream, Index batch, Index patches, Index width, const Bf16* rows,
                           float* channels);
// rows [N][P][d] = bfloat16(channels [N][d][P]): the conv output's gradient as the GEMM's dy.
Status channelsToPatchRowsHalf(cudaStream_t stream, Index batch, Index patches, Index width, const float* channels,
                               Bf16* rows);

}  // namespace remat::gpu::kernels
