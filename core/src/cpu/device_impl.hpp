#pragma once
// CpuDevice's state: the prepared chain, one PreparedLayer per layer (layouts, kernel geometry,
// parameter segments) and the helpers the per-kind dispatch files share. Internal to core.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels.hpp"
#include "remat/model/block.hpp"
#include "remat/cpu/cpu_device.hpp"
#include "remat/exec/device_calls.hpp"

namespace remat::cpu {

// A run of float32 parameters inside a layer's parameter buffer and how its canonical (PyTorch)
// order maps onto the CPU's order.
struct ParamSegment {
  enum class Type { Plain, ConvWeight, LinearWeight, FeatureVector };
  Type type = Type::Plain;
  Index offset = 0;  // in floats
  Index count = 0;
  ConvGeometry conv;        // ConvWeight
  Index outFeatures = 0;    // LinearWeight
  ActivationLayout layout;  // LinearWeight (its input) and FeatureVector
};

// One inner op of a block with its kernel geometry.
struct BlockOpPlan {
  ConvGeometry conv;       // Conv2d (channels-last, per the inner tensor shapes)
  Index rows = 0;          // BatchNorm, Concat: N*H*W
  Index channels = 0;      // BatchNorm; Concat: the output's
  Index count = 0;         // elements of the output (Relu, Relu6, Add)
  Index weightOffset = 0;  // in floats inside the block's parameters (conv weight, bn gamma)
  bool bias = false;       // Conv2d: its bias follows the weights
  Index biasOffset = 0;
};

struct PreparedLayer {
  LayerKind kind = LayerKind::Abstract;
  std::string label;     // "layer 3 ('conv1', conv2d)" for messages
  bool real = false;     // x(l) holds float32 activations laid out as `out`
  ActivationLayout in;   // x(l-1) as this layer reads it (real layers)
  ActivationLayout out;  // x(l)
  ConvGeometry conv;
  bool bias = false;  // conv2d, linear
  PoolGeometry pool;
  Index inFeatures = 0, outFeatures = 0;  // linear
  Index bnRows = 0, bnChannels = 0;       // batchnorm
  double dropoutP = 0.0;
  std::optional<BlockGraph> block;
  std::vector<BlockOpPlan> blockOps;
  std::vector<ParamSegment> params;
  std::uint64_t requiredFwdWorkspace = 0;
  std::uint64_t requiredBwdWorkspace = 0;
};

// Builds the preparation of layer l of a chain whose layers 1..l-1 are already prepared (layers[0] is the
// input). Errors name the layer.
Status prepareLayer(const Chain& chain, std::size_t l, std::vector<PreparedLayer>& layers);

// Parameter conversion between canonical and CPU order; `toCanonical` picks the direction.
void convertParams(const std::vector<ParamSegment>& segments, const float* from, float* to, bool toCanonical);
// Activation conversion (channels-last <-> NCHW), per sample.
void convertActivation(const ActivationLayout& layout, const float* from, float* to, bool toCanonical);

// The kernels of each kind, given resolved pointers (device_calls.hpp); null pointers for absent buffers.
Status forwardLayer(const PreparedLayer& prepared, std::size_t l, ForwardMode mode, std::uint64_t seed,
                    const ForwardBuffers& b);
Status backwardLayer(const PreparedLayer& prepared, const BackwardBuffers& b);
Status forwardBlock(const PreparedLayer& prepared, ForwardMode mode, const ForwardBuffers& b);
Status backwardBlock(const PreparedLayer& prepared, const BackwardBuffers& b);

// Abstract layers: synthetic kernels that read every input byte and write deterministic bytes
// into every output, extra and workspace byte (cpu_device_abstract.cpp).
struct ByteSpan {
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;
};
struct ConstByteSpan {
  const std::byte* data = nullptr;
  std::uint64_t bytes = 0;
};
void abstractForward(std::uint64_t key, ConstByteSpan x, ConstByteSpan params, ByteSpan y, ByteSpan extra,
                     ByteSpan workspace);
// dxIsFloat: x(l-1) holds float32 activations of a real layer, so d(l-1) gets floats in [-1, 1).
void abstractBackward(std::uint64_t key, ConstByteSpan dy, ConstByteSpan x, ConstByteSpan y, ConstByteSpan extra,
                      ConstByteSpan params, ByteSpan dx, bool dxIsFloat, ByteSpan workspace, ByteSpan paramGrads);
void abstractSeed(std::uint64_t key, ConstByteSpan logits, ByteSpan grad);

struct CpuDevice::Impl {
  explicit Impl(CpuDeviceOptions o) : options(o), allocator(o) {}
  CpuDeviceOptions options;
  CpuAllocator allocator;
  std::optional<Chain> chain;
  std::vector<cpu::PreparedLayer> layers;  // [0] = the input x0

  // The whole of a buffer that upload, download, fill or checksum (`what`) is given.
  Result<std::byte*> memory(DeviceBuffer buffer, const char* what) const;
  Status requirePrepared(std::size_t layer) const;
};

}  // namespace remat::cpu
