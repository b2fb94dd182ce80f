#pragma once
// A counter-based random generator: every value is a pure function of (seed, stream, index), so a
// recomputed dropout mask equals the original bit for bit, on any device and in any order. The
// functions are header-only and free of the standard library beyond <cstdint> so that a CUDA kernel
// can include this file and draw the very same numbers as the CPU kernels.
#include <cstdint>

#if defined(__CUDACC__)
#define REMAT_HOST_DEVICE __host__ __device__
#else
#define REMAT_HOST_DEVICE
#endif

namespace remat::rng {

// What a stream of numbers is for; the stream key is (purpose << 32) | layer.
enum class Purpose : std::uint32_t {
  Weights = 1,
  Bias = 2,
  Input = 3,
  Labels = 4,
  Dropout = 5,
  Abstract = 6,
  Step = 7,
};

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
REMAT_HOST_DEVICE constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

REMAT_HOST_DEVICE constexpr std::uint64_t streamKey(std::uint64_t seed, Purpose purpose, std::uint64_t layer) {
  return mix64(seed + 0x9E3779B97F4A7C15ull * ((static_cast<std::uint64_t>(purpose) << 32) ^ (layer + 1)));
}

// The index-th value of a stream: SplitMix64 started at the stream key, read at position index.
REMAT_HOST_DEVICE constexpr std::uint64_t at(std::uint64_t key, std::uint64_t index) {
  return mix64(key + 0x9E3779B97F4A7C15ull * (index + 1));
}

// Uniform in [0, 1) with 24 random bits: exactly representable as float32.
REMAT_HOST_DEVICE constexpr float uniform01(std::uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

}  // namespace remat::rng
