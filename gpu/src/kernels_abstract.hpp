#pragma once
// Launchers of the abstract-layer kernels (kernels_abstract.cu). The sequence mirrors the CPU's
// cpu_device_abstract.cpp: abstractAbsorb sets the stream's current key from a start key and the
// digests of the given byte spans, in order (empty spans count, as on the CPU); the fills then use
// that key, or mix64(key ^ salt) when mix is set. Calls must be issued in that order on one stream.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "remat/base/status.hpp"

namespace remat::gpu::kernels {

struct ByteSpans {
  static constexpr int kMax = 5;
  const std::uint8_t* data[kMax] = {};
  std::uint64_t bytes[kMax] = {};
  int count = 0;
  void push(const void* p, std::uint64_t n) {
    data[count] = static_cast<const std::uint8_t*>(p);
    bytes[count] = n;
    ++count;
  }
};

Status abstractAbsorb(cudaStream_t stream, std::uint64_t key, const ByteSpans& spans);
Status abstractFillBytes(cudaStream_t stream, void* data, std::uint64_t bytes, bool mix, std::uint64_t salt);
// Floats in [-1, 1) over the whole 4-byte words of the span.
Status abstractFillFloats(cudaStream_t stream, void* data, std::uint64_t bytes, bool mix, std::uint64_t salt);
// Adds, byte by byte and wrapping, the bytes of the stream at mix64(key ^ salt).
Status abstractAddGradBytes(cudaStream_t stream, void* data, std::uint64_t bytes, std::uint64_t salt);

}  // namespace remat::gpu::kernels
