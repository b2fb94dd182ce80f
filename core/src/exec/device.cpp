// The parts of the device interface that every backend shares.
#include "remat/exec/device.hpp"

#include <chrono>
#include <cstring>
#include <vector>

#include "remat/base/units.hpp"
#include "remat/exec/counter_rng.hpp"

namespace remat {

// Eight independent lanes of a bijective multiply-xorshift step, so it runs at memory speed; a
// final mix folds the lanes and the length together.
std::uint64_t checksumBytes(std::span<const std::byte> bytes) {
  std::uint64_t lane[8];
  for (int k = 0; k < 8; ++k) lane[k] = rng::mix64(0x243F6A8885A308D3ull + static_cast<std::uint64_t>(k));
  std::size_t i = 0;
  for (; i + 64 <= bytes.size(); i += 64) {
    std::uint64_t words[8];
    std::memcpy(words, bytes.data() + i, 64);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const std::uint64_t h = (lane[k] ^ words[k]) * 0x9E3779B97F4A7C15ull;
      lane[k] = h ^ (h >> 29);
    }
  }
  for (; i < bytes.size(); ++i) {
    const std::uint64_t h = (lane[i % 8] ^ (static_cast<std::uint64_t>(bytes[i]) + 1)) * 0x9E3779B97F4A7C15ull;
    lane[i % 8] = h ^ (h >> 29);
  }
  std::uint64_t h = rng::mix64(bytes.size());
  for (std::uint64_t l : lane) h = rng::mix64(h ^ l);
  return h;
}

Result<std::uint64_t> Device::checksum(DeviceBuffer buffer) {
  std::vector<std::byte> bytes(buffer.bytes);
  REMAT_RETURN_IF_ERROR(download(buffer, TensorRole::Raw, 0, bytes));
  return checksumBytes(bytes);
}

Status Device::checkFits(std::uint64_t predictedPeakBytes) {
  auto available = availableBytes();
  if (!available) return available.status();
  const std::uint64_t held = allocator().bytesHeld();
  const std::uint64_t needed = predictedPeakBytes > held ? predictedPeakBytes - held : 0;
  if (needed <= *available) return Status::ok();
  const std::string needs = held == 0
                                ? formatBytes(needed)
                                : formatBytes(needed) + " more (predicted peak " + formatBytes(predictedPeakBytes) +
                                      ", " + formatBytes(held) + " already held)";
  return Status::outOfMemory("the plan needs " + needs + " on " + name() + ", but the device has " +
                             formatBytes(*available) + " available; try a smaller batch or a plan with a lower peak");
}

Status Device::optimizerStep(const OptimizerCall& call) {
  return Status::invalid("the " + name() + " device cannot run the optimizer step (" +
                         std::string(optimizerName(call.optimizer)) + "); use --optimizer none there");
}

Status Device::accumulateGradient(std::size_t layer, DeviceBuffer dst, DeviceBuffer src) {
  (void)dst, (void)src;
  return Status::invalid("the " + name() + " device cannot add layer " + std::to_string(layer) +
                         "'s fresh gradient into its static one; use --grads in-place or on-backward there");
}

Result<bool> Device::unscaleGradients(std::span<const DeviceBuffer> grads) {
  (void)grads;
  return Status::invalid("the " + name() + " device has no GradScaler for fp16-mixed; run bf16-mixed there");
}

std::string Device::describe() const { return name(); }

Result<std::string> Device::describeLayer(std::size_t layer) const {
  (void)layer;
  return std::string();
}

Result<double> Device::timeMs(const std::function<Status()>& body) {
  REMAT_RETURN_IF_ERROR(synchronize());
  const auto start = std::chrono::steady_clock::now();
  REMAT_RETURN_IF_ERROR(body());
  REMAT_RETURN_IF_ERROR(synchronize());
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(stop - start).count();
}

}  // namespace remat
