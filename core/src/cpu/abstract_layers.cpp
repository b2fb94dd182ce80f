// Synthetic kernels for abstract layers: each reads every byte of its inputs into a digest and
// writes bytes that are a pure function of that digest into every byte of its outputs, extras and
// workspaces. So abstract chains run and get measured like real ones, and a step that read a
// wrong tensor version (or a freed, poisoned one) produces different gradients.
#include <cstring>

#include "device_impl.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat::cpu {
namespace {

std::uint64_t digest(ConstByteSpan s) {
  std::uint64_t h = 0x243F6A8885A308D3ull ^ s.bytes;
  std::uint64_t i = 0;
  for (; i + 8 <= s.bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, s.data + i, 8);
    h = (h ^ word) * 0x100000001B3ull + 0x9E3779B97F4A7C15ull;
  }
  for (; i < s.bytes; ++i) h = (h ^ static_cast<std::uint64_t>(s.data[i])) * 0x100000001B3ull;
  return rng::mix64(h);
}

std::uint64_t absorb(std::uint64_t key, ConstByteSpan s) { return rng::mix64(key ^ digest(s)); }

void fillBytes(ByteSpan s, std::uint64_t key) {
  std::uint64_t i = 0;
  for (; i + 8 <= s.bytes; i += 8) {
    const std::uint64_t word = rng::at(key, i / 8);
    std::memcpy(s.data + i, &word, 8);
  }
  if (i < s.bytes) {
    const std::uint64_t word = rng::at(key, i / 8);
    std::memcpy(s.data + i, &word, s.bytes - i);
  }
}

// Floats in [-1, 1): a gradient a real layer's backward can consume without overflowing.
void fillFloats(ByteSpan s, std::uint64_t key) {
  for (std::uint64_t i = 0; i + 4 <= s.bytes; i += 4) {
    const float value = 2.0f * rng::uniform01(rng::at(key, i / 4)) - 1.0f;
    std::memcpy(s.data + i, &value, 4);
  }
}

}  // namespace

void abstractForward(std::uint64_t key, ConstByteSpan x, ConstByteSpan params, ByteSpan y, ByteSpan extra,
                     ByteSpan workspace) {
  const std::uint64_t k = absorb(absorb(key, x), params);
  fillBytes(y, k);
  fillBytes(extra, rng::mix64(k ^ 1));
  fillBytes(workspace, rng::mix64(k ^ 2));
}

void abstractBackward(std::uint64_t key, ConstByteSpan dy, ConstByteSpan x, ConstByteSpan y, ConstByteSpan extra,
                      ConstByteSpan params, ByteSpan dx, bool dxIsFloat, ByteSpan workspace, ByteSpan paramGrads) {
  std::uint64_t k = rng::mix64(key ^ 0xB);
  for (ConstByteSpan s : {dy, x, y, extra, params}) k = absorb(k, s);
  if (dxIsFloat)
    fillFloats(dx, k);
  else
    fillBytes(dx, k);
  fillBytes(workspace, rng::mix64(k ^ 2));
  // Add (byte-wise, wrapping) into the parameter gradients, as a real backward adds into them.
  const std::uint64_t gradKey = rng::mix64(k ^ 3);
  for (std::uint64_t i = 0; i < paramGrads.bytes; ++i) {
    const auto byte = static_cast<std::uint8_t>(rng::at(gradKey, i / 8) >> (8 * (i % 8)));
    paramGrads.data[i] = static_cast<std::byte>(static_cast<std::uint8_t>(paramGrads.data[i]) + byte);
  }
}

void abstractSeed(std::uint64_t key, ConstByteSpan logits, ByteSpan grad) {
  fillBytes(grad, absorb(rng::mix64(key ^ 0x5EED), logits));
}

}  // namespace remat::cpu
