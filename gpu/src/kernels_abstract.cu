// The synthetic kernels of abstract layers, bit for bit those of the CPU backend
// (core/src/cpu_device_abstract.cpp): a digest of every input byte, then outputs that are a pure
// function of it. The digest is a sequential hash, so one GPU thread computes it (abstract chains
// are small test chains; a real layer never comes here); the fills run on the whole grid. The key
// passes from the digest kernel to the fills through a few bytes of module memory, in stream
// order, so no buffer beyond the call's own is needed.
#include <cstring>

#include "kernels_abstract.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat::gpu::kernels {

namespace {

constexpr int kThreads = 256;
__device__ std::uint64_t gAbstractKey;

__device__ std::uint64_t loadWord(const std::uint8_t* p) {
  std::uint64_t word = 0;
  for (int b = 0; b < 8; ++b) word |= static_cast<std::uint64_t>(p[b]) << (8 * b);  // little-endian, like memcpy
  return word;
}

__device__ std::uint64_t digest(const std::uint8_t* data, std::uint64_t bytes) {
  std::uint64_t h = 0x243F6A8885A308D3ull ^ bytes;
  std::uint64_t i = 0;
  const bool aligned = (reinterpret_cast<std::uintptr_t>(data) & 7u) == 0;
  for (; i + 8 <= bytes; i += 8) {
    const std::uint64_t word = aligned ? *reinterpret_cast<const std::uint64_t*>(data + i) : loadWord(data + i);
    h = (h ^ word) * 0x100000001B3ull + 0x9E3779B97F4A7C15ull;
  }
  for (; i < bytes; ++i) h = (h ^ static_cast<std::uint64_t>(data[i])) * 0x100000001B3ull;
  return rng::mix64(h);
}

__global__ void absorbKernel(std::uint64_t key, ByteSpans spans) {
  std::uint64_t k = key;
  for (int s = 0; s < spans.count; ++s) k = rng::mix64(k ^ digest(spans.data[s], spans.bytes[s]));
  gAbstractKey = k;
}

__device__ std::uint64_t derivedKey(bool mix, std::uint64_t salt) {
  return mix ? rng::mix64(gAbstractKey ^ salt) : gAbstractKey;
}

__global__ void fillBytesKernel(std::uint8_t* data, std::uint64_t bytes, bool mix, std::uint64_t salt) {
  const std::uint64_t key = derivedKey(mix, salt);
  const std::uint64_t words = (bytes + 7) / 8;
  for (std::uint64_t w = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words;
       w += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t word = rng::at(key, w);
    const std::uint64_t end = bytes - 8 * w < 8 ? bytes - 8 * w : 8;
    for (std::uint64_t b = 0; b < end; ++b) data[8 * w + b] = static_cast<std::uint8_t>(word >> (8 * b));
  }
}

__global__ void fillFloatsKernel(float* data, std::uint64_t floats, bool mix, std::uint64_t salt) {
  const std::uint64_t key = derivedKey(mix, salt);
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < floats;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    data[i] = 2.0f * rng::uniform01(rng::at(key, i)) - 1.0f;
}

__global__ void addGradBytesKernel(std::uint8_t* data, std::uint64_t bytes, std::uint64_t salt) {
  const std::uint64_t key = rng::mix64(gAbstractKey ^ salt);
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const auto byte = static_cast<std::uint8_t>(rng::at(key, i / 8) >> (8 * (i % 8)));
    data[i] = static_cast<std::uint8_t>(data[i] + byte);
  }
}

unsigned blocksFor(std::uint64_t count) {
  const std::uint64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

}  // namespace

Status abstractAbsorb(cudaStream_t stream, std::uint64_t key, const ByteSpans& spans) {
  absorbKernel<<<1, 1, 0, stream>>>(key, spans);
  REMAT_CUDA_CHECK_LAUNCH("absorbKernel");
  return Status::ok();
}

Status abstractFillBytes(cudaStream_t stream, void* data, std::uint64_t bytes, bool mix, std::uint64_t salt) {
  if (bytes == 0) return Status::ok();
  fillBytesKernel<<<blocksFor((bytes + 7) / 8), kThreads, 0, stream>>>(static_cast<std::uint8_t*>(data), bytes, mix,
                                                                       salt);
  REMAT_CUDA_CHECK_LAUNCH("fillBytesKernel");
  return Status::ok();
}

Status abstractFillFloats(cudaStream_t stream, void* data, std::uint64_t bytes, bool mix, std::uint64_t salt) {
  const std::uint64_t floats = bytes / 4;  // trailing bytes stay as they are, as on the CPU
  if (floats == 0) return Status::ok();
  fillFloatsKernel<<<blocksFor(floats), kThreads, 0, stream>>>(static_cast<float*>(data), floats, mix, salt);
  REMAT_CUDA_CHECK_LAUNCH("fillFloatsKernel");
  return Status::ok();
}

Status abstractAddGradBytes(cudaStream_t stream, void* data, std::uint64_t bytes, std::uint64_t salt) {
  if (bytes == 0) return Status::ok();
  addGradBytesKernel<<<blocksFor(bytes), kThreads, 0, stream>>>(static_cast<std::uint8_t*>(data), bytes, salt);
  REMAT_CUDA_CHECK_LAUNCH("addGradBytesKernel");
  return Status::ok();
}

}  // namespace remat::gpu::kernels
