#pragma once
// What the CPU and CUDA backends check alike when they prepare a layer (Device::prepare): that a
// real layer is float32 with shapes that agree with its input, and that the chain's model numbers
// say what the backend's kernels really read and save, so a measured run can match the simulator.
// The numbers checked here are the ones core/src/model/layers_primitive.cpp gives each kind; both
// backends' kernels read and save the same tensors, so the check is one for both.
#include <cstddef>
#include <cstdint>
#include <string>

#include "remat/base/status.hpp"
#include "remat/model/block.hpp"
#include "remat/model/chain.hpp"

namespace remat {

// How messages name layer l: "layer 3 ('conv1', conv2d)"; "the input x0" for l = 0.
std::string layerLabel(const Chain& chain, std::size_t l);

// A primitive layer's parameters as both backends lay them out: `weights` values (the conv2d or
// linear weights; batch norm's gamma then beta), then `biases` values (0: the layer has no bias).
struct PrimitiveParameters {
  std::uint64_t weights = 0;
  std::uint64_t biases = 0;
};

// Under a mixed precision (memory-model.md section 11.7), what autocast adds to a layer that runs
// in half: the cast copy of a float32 input (saved in E instead of x(l-1) when the backward reads
// its input) and, for conv2d and linear, the half weight copy saved in E.
struct AutocastCasts {
  std::uint64_t inputCastBytes = 0;   // 0: the input already has the layer's dtype
  std::uint64_t weightCopyBytes = 0;  // conv2d, linear: weight elements * 2
};

// The Invalid errors of one layer's preparation on one backend: "<device>: <label>: <message>".
struct LayerChecks {
  std::string device;  // "cpu", "gpu"
  std::string label;   // layerLabel()
  // The backend runs autocast's half kernels (bf16-mixed on the CPU); without them a mixed
  // precision is refused before anything is allocated.
  bool autocastKernels = false;

  Status fail(const std::string& message) const;
  // The backend's backward reads the tensor that `field` (needs_input / needs_output) stands for.
  Status expectFlag(bool have, bool want, const char* field) const;
  Status expectExtra(std::uint64_t have, std::uint64_t want) const;   // e, bytes
  Status expectParams(std::uint64_t have, std::uint64_t want) const;  // parameter counts
  // A non-abstract layer l: float32, with a layer spec, reading a float32 activation of
  // inputElements elements that matches its input shape, and a = 4 bytes per output element.
  // With autocastKernels, a mixed-precision chain's layer whose output is half has
  // outputElementBytes 2 (the backend says which layers run in half).
  Status realLayer(const Chain& chain, std::size_t l, bool inputReal, std::uint64_t inputElements,
                   std::uint64_t outputElementBytes = 4) const;
  // A primitive layer that passed realLayer: its tensors have the ranks its kind's kernels take,
  // and its numbers say what the kernels read and save: its parameter count, needs_input and
  // needs_output where the backward reads x(l-1) or x(l), and e exactly. Returns how its parameters
  // are laid out. "no kernel for this kind" for a kind without primitive kernels.
  // `casts`: autocast's copies when the layer runs in half under a mixed precision.
  Result<PrimitiveParameters> primitiveLayer(const ChainLayer& layer, const LayerSpec& spec,
                                             const AutocastCasts& casts = {}) const;
  Status noKernel() const;  // "the <DEVICE> backend has no kernel for this kind"
  // A residual block: the chain's numbers must be the inner graph's; under a mixed precision
  // (`graph` laid out for half tensors) its e also holds autocast's copies after the graph's saved
  // tensors: the input's cast, which the backward then reads instead of x(l-1), and the inner
  // convolutions' weight copies.
  Status blockNumbers(const BlockGraph& graph, const ChainLayer& layer, const AutocastCasts& casts = {}) const;
  // Inner ops of a block: a conv of `weightCount` weights and, when its spec says bias, one bias
  // per output channel; a batch norm over `channels`; nothing else with parameters.
  Status innerConv(const BlockOp& op, std::uint64_t weightCount) const;
  Status innerBatchNorm(const BlockOp& op, std::uint64_t channels) const;
  Status innerLayerNorm(const BlockOp& op, const Shape& input) const;  // over the channels: 2C, 2*N*H*W float32
  Status innerLayerScale(const BlockOp& op, std::uint64_t channels) const;
  Status innerWithoutParams(const BlockOp& op) const;
};

}  // namespace remat
