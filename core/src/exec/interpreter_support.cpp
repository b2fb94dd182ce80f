// What the interpreter needs around its op loop, kept apart from it: the workspace check before a
// chain runs, collecting the parameter gradients after the last step, and RunProgress's arithmetic.
#include "interpreter_support.hpp"

#include <algorithm>

namespace remat {
namespace detail {

// Each layer's parameter gradients after the last step (index l; invalid for p = 0): digests and /
// or canonical bytes.
Status collectGradients(Device& device, std::size_t n, const RunOptions& options,
                        const std::vector<DeviceBuffer>& grads, RunResult& result) {
  if (options.digestGradients) {
    result.parameterGradientDigests.assign(n, 0);
    for (std::size_t l = 1; l <= n; ++l) {
      if (!grads[l].valid()) continue;
      auto digest = device.checksum(grads[l]);
      if (!digest) return digest.status();
      result.parameterGradientDigests[l - 1] = *digest;
    }
  }
  if (options.captureGradients) {
    result.parameterGradients.resize(n);
    for (std::size_t l = 1; l <= n; ++l) {
      if (!grads[l].valid()) continue;
      std::vector<std::byte>& bytes = result.parameterGradients[l - 1];
      bytes.resize(grads[l].bytes);
      REMAT_RETURN_IF_ERROR(device.download(grads[l], TensorRole::Parameters, l, bytes));
    }
  }
  return Status::ok();
}

// The chain's wf and wb must cover the scratch the device's kernels need, or a measured run would
// hold bytes the model does not count.
Status checkWorkspaces(const Chain& chain, const Device& device) {
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    const LayerNumbers& m = chain.at(l);
    for (Pass pass : {Pass::Forward, Pass::Backward}) {
      auto needed = device.requiredWorkspaceBytes(l, pass);
      if (!needed) return needed.status();
      const std::uint64_t given = pass == Pass::Forward ? m.fwdWorkspaceBytes : m.bwdWorkspaceBytes;
      if (*needed > given)
        return Status::invalid("layer " + std::to_string(l) + " ('" + chain.layers[l - 1].name + "'): the " +
                               device.name() + " kernels need " + std::to_string(*needed) + " bytes of " +
                               (pass == Pass::Forward ? "forward" : "backward") + " workspace, the chain gives " +
                               (pass == Pass::Forward ? "wf" : "wb") + " = " + std::to_string(given) +
                               " (profile the chain on this device, or fit its workspaces to it first)");
    }
  }
  return Status::ok();
}

}  // namespace detail

double RunProgress::fraction() const {
  if (costTotal > 0.0) return std::clamp(costDone / costTotal, 0.0, 1.0);
  const double ops = static_cast<double>(opCount) * steps;
  return ops > 0.0 ? (static_cast<double>(step) * static_cast<double>(opCount) + static_cast<double>(opIndex)) / ops
                   : 0.0;
}

double RunProgress::secondsLeft() const {
  const double done = fraction();
  if (done <= 0.0) return -1.0;
  return elapsedSeconds * (1.0 - done) / done;
}

}  // namespace remat
