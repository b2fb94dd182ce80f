#pragma once
// What every backend checks before it runs a kernel (device.hpp's memory contract): each buffer a
// call passes is present exactly when the memory model says the op reads or writes it, has exactly
// the model's bytes (a workspace: at least what the kernel needs) and is held by the backend's
// allocator. The CPU and CUDA devices share these checks, and the typed views their kernels take.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "remat/exec/counting_allocator.hpp"
#include "remat/exec/device.hpp"
#include "remat/model/chain.hpp"

namespace remat {

// sharedParamsLayer(chain, l) (remat/model/step_options.hpp): the layer whose parameters layer l
// also reads and whose gradient it adds into.

// A real (float32) layer's kernel arguments; null pointers for absent buffers.
struct ForwardBuffers {
  const float* x = nullptr;
  float* y = nullptr;
  std::byte* extra = nullptr;
  std::byte* workspace = nullptr;
  const float* params = nullptr;
  const float* sharedParams = nullptr;
};
struct BackwardBuffers {
  const float* dy = nullptr;
  const float* x = nullptr;
  const float* y = nullptr;
  const std::byte* extra = nullptr;
  float* dx = nullptr;  // null for layer 1
  std::byte* workspace = nullptr;
  const float* params = nullptr;
  float* paramGrads = nullptr;
  const float* sharedParams = nullptr;
  float* sharedParamGrads = nullptr;
  std::byte* freshParamGrads = nullptr;  // BackwardCall::freshParamGrads; null when absent
};

// A block's inner op under --grads static (BackwardCall::freshParamGrads): the base address at which
// the op's layer-wide parameter offsets [first, first + count) land in the fresh buffer, so the
// kernels index it as they index the layer's gradients. An address computation only: nothing below
// element `first` of it is read or written.
inline float* freshGradientBase(std::byte* fresh, std::uint64_t firstElement, std::uint64_t elementBytes) {
  return reinterpret_cast<float*>(reinterpret_cast<std::uintptr_t>(fresh) - firstElement * elementBytes);
}

// The memory behind a checked call as bytes (abstract layers read it so), null where absent.
struct ForwardMemory {
  std::byte* x = nullptr;
  std::byte* y = nullptr;
  std::byte* extra = nullptr;
  std::byte* workspace = nullptr;
  std::byte* params = nullptr;
  std::byte* sharedParams = nullptr;
  ForwardBuffers floats() const;
};
struct BackwardMemory {
  std::byte* dy = nullptr;
  std::byte* x = nullptr;
  std::byte* y = nullptr;
  std::byte* extra = nullptr;
  std::byte* dx = nullptr;
  std::byte* workspace = nullptr;
  std::byte* params = nullptr;
  std::byte* paramGrads = nullptr;
  std::byte* sharedParams = nullptr;
  std::byte* sharedParamGrads = nullptr;
  std::byte* freshParamGrads = nullptr;
  BackwardBuffers floats() const;
};
struct SeedMemory {
  std::byte* logits = nullptr;
  std::byte* gradLogits = nullptr;
};

// Internal error unless a chain is prepared and 1 <= layer <= its size.
Status requirePreparedLayer(const CountingAllocator& allocator, const std::optional<Chain>& chain, std::size_t layer);

// The memory of a buffer that must hold exactly `bytes` (at least, when atLeast); an absent
// (invalid) buffer gives null when `optional`. Messages start "<device>: <where>, <what>".
Result<std::byte*> checkedMemory(const CountingAllocator& allocator, DeviceBuffer buffer, std::uint64_t bytes,
                                 std::string_view where, std::string_view what, bool optional, bool atLeast = false);

// The buffers of F, R and RE ops of layer call.layer (requirePreparedLayer first). `label` names the
// layer in messages; the workspace must hold at least requiredWorkspaceBytes, the backend's need.
Result<ForwardMemory> checkForwardCall(const CountingAllocator& allocator, const Chain& chain, const ForwardCall& call,
                                       std::string_view label, std::uint64_t requiredWorkspaceBytes);
// The buffers of B(l); a buffer the model says B(l) does not read is an error when passed.
Result<BackwardMemory> checkBackwardCall(const CountingAllocator& allocator, const Chain& chain,
                                         const BackwardCall& call, std::string_view label,
                                         std::uint64_t requiredWorkspaceBytes);
// The logits and gradient of SEED; labels are the backend's to check (only real chains have them).
Result<SeedMemory> checkSeedCall(const CountingAllocator& allocator, const std::optional<Chain>& chain,
                                 const SeedCall& call);

// The buffers of one layer's optimizer update (requirePreparedLayer first), in OptimizerCall's
// order: params, grads, state, stateSquare, denominator, squareRoot. Each one the optimizer needs
// is present; params, grads and the state are p(layer) bytes and point at the call's part (its
// offset), the temporaries are the part's bytes; an absent optional one is null.
struct OptimizerMemory {
  std::byte* params = nullptr;
  std::byte* grads = nullptr;
  std::byte* state = nullptr;
  std::byte* stateSquare = nullptr;
  std::byte* denominator = nullptr;
  std::byte* squareRoot = nullptr;
  std::uint64_t bytes = 0;  // the part updated
};
Result<OptimizerMemory> checkOptimizerCall(const CountingAllocator& allocator, const Chain& chain,
                                           const OptimizerCall& call);

// The buffers of Device::accumulateGradient (requirePreparedLayer first): dst and src, p(layer)
// bytes each and distinct.
struct AccumulateMemory {
  std::byte* dst = nullptr;
  const std::byte* src = nullptr;
  std::uint64_t bytes = 0;
};
Result<AccumulateMemory> checkAccumulateCall(const CountingAllocator& allocator, const Chain& chain, std::size_t layer,
                                             DeviceBuffer dst, DeviceBuffer src);

}  // namespace remat
