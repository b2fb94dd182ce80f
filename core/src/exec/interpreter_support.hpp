#pragma once
// Internal to the exec stage: the interpreter's helpers (interpreter_support.cpp).
#include <vector>

#include "remat/exec/device.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/model/chain.hpp"

namespace remat::detail {

// Each layer's parameter gradients (grads[l]; invalid for p = 0) into result, as options ask:
// digests and / or canonical bytes.
Status collectGradients(Device& device, std::size_t n, const RunOptions& options,
                        const std::vector<DeviceBuffer>& grads, RunResult& result);

// The chain's wf and wb must cover the scratch the device's kernels need, or a measured run would
// hold bytes the model does not count: InvalidInput naming the layer and the pass.
Status checkWorkspaces(const Chain& chain, const Device& device);

}  // namespace remat::detail
