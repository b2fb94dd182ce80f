#pragma once
// `remat profile`: measures, on a device, what each layer of a chain really needs: the workspaces
// the device's kernels ask for (requiredWorkspaceBytes(); on the GPU the cuDNN algorithms it
// chooses, for blocks the arena plus the largest inner convolution's scratch) and the time of its
// forward and backward (median of several runs, in milliseconds, through Device::timeMs). The
// result is the chain spec with those numbers written in (fwd_workspace_bytes, bwd_workspace_bytes,
// fwd_cost, bwd_cost), ready for saveChainFile and the planners.
#include <cstdint>
#include <string>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/exec/device.hpp"
#include "remat/model/chain.hpp"

namespace remat {

struct ProfileOptions {
  int repeats = 5;         // timed runs per pass, after one warm-up run
  std::uint64_t seed = 0;  // the input and parameter values (interpreter.hpp's initial values)
};

struct LayerProfile {
  std::size_t layer = 0;  // 1..n
  std::string name;
  bool measured = false;  // false for abstract layers: their stated numbers stand
  std::uint64_t fwdWorkspaceBytes = 0;
  std::uint64_t bwdWorkspaceBytes = 0;
  double fwdMs = 0.0;
  double bwdMs = 0.0;
  std::string kernels;  // Device::describeLayer(): the chosen algorithms, in words
};

struct ProfileResult {
  ChainSpec spec;  // the input chain's spec with the measured numbers written in
  std::vector<LayerProfile> layers;
  std::string device;  // Device::describe()
};

// Prepares the device for the chain and runs its layers one after the other on their real inputs
// (x0 and the parameters as the interpreter initialises them), holding only one layer's tensors
// at a time; every buffer is released on every exit path. The workspaces written are what the
// device reports: open a GPU with DeviceOptions::profileWorkspaces (devices.hpp) so it chooses its
// algorithms freely up to the cap rather than within the chain's current wf / wb. Errors name the
// layer and the pass.
Result<ProfileResult> profileChain(const Chain& chain, Device& device, const ProfileOptions& options = {});

// A chain whose workspaces cover what a device's kernels need, and which layers had to change.
struct WorkspaceFit {
  Chain chain;
  std::vector<std::size_t> raisedLayers;  // 1-based; empty when the chain already covered the device
};

// OutOfMemory when no plan of the chain can fit in what the device has available: every plan
// holds the static memory and, at some time, the largest activation. Cheap: nothing is prepared.
Status checkAnyPlanCanFit(const Chain& chain, Device& device);

// Workspaces on the fly, without timing anything: refuses a chain that checkAnyPlanCanFit refuses,
// then prepares the device for the chain and raises
// each real layer's wf / wb to Device::requiredWorkspaceBytes() where the chain gives less (the
// CPU's oneDNN scratch, a block's arena plus its inner scratch), writing them into the chain's spec
// as measured workspaces, as `remat profile` does. Larger workspaces the chain states stay (the
// interpreter allocates what the chain says, so measured still equals predicted). Simulate the
// returned chain to get the prediction a run on this device is measured against.
Result<WorkspaceFit> fitWorkspacesToDevice(const Chain& chain, Device& device);

// The median of the values (the mean of the two middle ones for an even count); 0 when empty.
double medianOf(std::vector<double> values);

}  // namespace remat
