#pragma once
// The STEP op of the interpreter (memory-model.md section 11.3): every layer's optimizer update,
// with the temporaries PyTorch's implementation allocates, through the device's allocator so the
// op's measured footprint is the model's. Internal to the exec stage.
#include <vector>

#include "remat/exec/device.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {

// Per layer (index l; invalid where p(l) = 0 or the optimizer keeps no such buffer).
struct OptimizerBuffers {
  std::vector<DeviceBuffer> params, grads, state, stateSquare;
};

// foreach Adam/AdamW: one denominator per layer, all allocated before the first update and freed
// after the last (torch._foreach_sqrt's list); single-tensor: per layer the square root and the
// denominator, the square root freed after the update and the previous layer's denominator then
// (Python's `denom` rebinding). SGD and momentum: no temporaries. `updates` counts the updates run
// (the optimizer's 1-based step after the increment); under fp16-mixed the GradScaler unscales the
// gradients first (Device::unscaleGradients) and, on inf/NaN, skips the update and the count, as
// scaler.step skips optimizer.step().
Status runOptimizerStep(Device& device, const Chain& chain, int& updates, const OptimizerBuffers& buffers);

}  // namespace remat::detail
