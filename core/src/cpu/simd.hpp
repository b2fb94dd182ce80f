#pragma once
// Four-lane float vectors through GCC / Clang vector extensions: they compile to SSE on any x86-64
// and to NEON on ARM, and their arithmetic is IEEE single precision lane by lane, so every kernel
// keeps a fixed, documented summation order (bitwise reproducible) while still running vectorised
// at -O2. Internal to core.
#include <cstring>

// Fully unrolls a loop with a small constant trip count (register blocks): GCC does not at -O2,
// and the accumulators then live on the stack instead of in registers.
#define REMAT_UNROLL _Pragma("GCC unroll 16")

namespace remat::cpu {

typedef float v4f __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));

inline v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, v4f v) { std::memcpy(p, &v, sizeof v); }
inline v4f splat4(float x) { return v4f{x, x, x, x}; }
// Fixed order: (l0 + l1) + (l2 + l3).
inline float hsum4(v4f v) { return (v[0] + v[1]) + (v[2] + v[3]); }

}  // namespace remat::cpu
