#pragma once
// The device interface: the only seam between the interpreter and a device (architecture.md). A
// device is an allocator that counts bytes exactly plus the forward and backward kernels of every
// layer kind. The CPU backend (cpu_device.hpp) and the CUDA backend (gpu/) implement it.
//
// Memory contract (docs/memory-model.md section 3): the interpreter allocates every tensor of an op
// (outputs, extras, the wf / wb workspace, RE's transient copy) through allocator() before the
// kernel runs and frees them after; a kernel touches only the buffers it is given. A kernel that
// needs scratch beyond what requiredWorkspaceBytes() reports breaks the model, so a backend states
// its workspace needs there and the chain's wf / wb must be at least that (`remat profile` writes
// measured workspaces into the chain file).
//
// Data layouts. Buffers are opaque: each backend stores activations, extras and parameters in the
// layout its kernels like (the CPU backend keeps activations channels-last). Data crosses the
// boundary only through upload() / download(), which convert from / to the canonical layout:
//   activations x(l), d(l)  PyTorch's contiguous NCHW (or NC) of the layer's output shape; bytes as
//                           they are for abstract layers;
//   parameters of layer l   PyTorch's order: conv2d weight [out][in/groups][kh][kw] then bias [out];
//                           linear weight [out][in] (in indexes the flattened NCHW input) then bias;
//                           batchnorm gamma [C] then beta [C]; residual blocks: their inner layers'
//                           parameters in block.hpp's order; abstract layers: raw bytes;
//   labels                  int64 [labelCount()] (LabelIndex);
//   raw                     bytes as they are (no conversion).
// So a CPU run and a GPU run of the same chain and seed can be compared value by value.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat {

// An opaque handle to a block of device memory. Copying the handle does not copy memory; id 0 is
// "no buffer". A backend rejects handles it did not hand out or has already freed.
struct DeviceBuffer {
  std::uint64_t id = 0;
  std::uint64_t bytes = 0;
  bool valid() const { return id != 0; }
  bool operator==(const DeviceBuffer&) const = default;
};

// Counts exactly the bytes asked for, whatever the backend rounds up to internally, so that the
// counts are comparable with the memory model byte for byte.
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  // Zero bytes gives a valid handle that holds nothing. OutOfMemory when the device is full.
  virtual Result<DeviceBuffer> allocate(std::uint64_t bytes) = 0;
  // Internal error for an unknown or already-freed handle.
  virtual Status release(DeviceBuffer buffer) = 0;
  virtual std::uint64_t bytesHeld() const = 0;
  // The largest bytesHeld() since the last resetPeak() (or since construction).
  virtual std::uint64_t peakBytes() const = 0;
  // Starts a new high-water window: peakBytes() becomes bytesHeld().
  virtual void resetPeak() = 0;
  virtual std::size_t buffersHeld() const = 0;
};

// Keep mode writes the extras E(l) (docs/memory-model.md section 2); discard mode writes only x(l) and
// must compute the very same x(l), bit for bit.
enum class ForwardMode { Discard, Keep };

enum class Pass { Forward, Backward };

// What a layer's forward reads and writes. F and R ops write x(l); the RE op passes a transient
// buffer of a bytes as output (it is freed right after) and the extras buffer.
struct ForwardCall {
  std::size_t layer = 0;  // 1..n
  ForwardMode mode = ForwardMode::Discard;
  DeviceBuffer input;      // x(l-1); x0 for layer 1
  DeviceBuffer output;     // x(l), a bytes
  DeviceBuffer extra;      // E(l), e bytes, in keep mode when e > 0; empty otherwise
  DeviceBuffer workspace;  // wf bytes; empty when wf = 0
  DeviceBuffer params;     // p bytes; empty when p = 0
  std::uint64_t seed = 0;  // the step's seed: dropout masks and abstract layers derive from it
  // The parameters of the layer whose tensor this one shares (sharedParamsLayer(): a tied lm_head
  // reads the token embedding's table, layer 1's); empty otherwise.
  DeviceBuffer sharedParams;
};

// What a layer's backward reads and writes. Buffers the model says it does not read are empty.
struct BackwardCall {
  std::size_t layer = 0;
  DeviceBuffer gradOutput;  // d(l)
  DeviceBuffer input;       // x(l-1) when `in` (x0 for layer 1), else empty
  DeviceBuffer output;      // x(l) when `out`, else empty
  DeviceBuffer extra;       // E(l) when e > 0, else empty
  DeviceBuffer gradInput;   // d(l-1); empty for layer 1 (the input needs no gradient)
  DeviceBuffer workspace;   // wb bytes; empty when wb = 0
  DeviceBuffer params;      // p bytes
  DeviceBuffer paramGrads;  // p bytes: the backward ADDS its parameter gradients into them
  // --grads static for a block (memory-model.md 11.2): freshGradientBytes(l), where the backward
  // makes each inner op's parameter gradient (zeroed first) before adding it into paramGrads, one
  // op at a time; empty otherwise (a one-op layer's fresh gradient is paramGrads itself).
  DeviceBuffer freshParamGrads;
  std::uint64_t seed = 0;
  // The shared layer's parameters and gradient (ForwardCall::sharedParams): the backward ADDS the
  // shared tensor's gradient into the owner's, so the owner's optimizer step sees the sum.
  DeviceBuffer sharedParams;
  DeviceBuffer sharedParamGrads;
};

// The SEED op: the loss gradient d(n) from the logits x(n). Real chains use softmax cross-entropy
// with integer labels (mean over the batch; a chain ending in lm_head: nll_loss over its
// log-probabilities, one label per token, mean over the N*S tokens); a chain whose last layer is abstract gets a
// synthetic deterministic gradient. No scratch beyond the given buffers.
struct SeedCall {
  DeviceBuffer logits;      // x(n)
  DeviceBuffer labels;      // int64 [labelCount()]: per sample, per token after lm_head; empty for abstract chains
  DeviceBuffer gradLogits;  // d(n)
  std::uint64_t seed = 0;
};

// The optimizer's update of one layer's parameters, in place (memory-model.md section 11.3): the
// STEP op calls it for every layer with parameters, in layer order. Buffers are p bytes each; the
// update is elementwise, so it reads every buffer in the layout the device keeps parameters in.
struct OptimizerCall {
  std::size_t layer = 0;
  OptimizerKind optimizer = OptimizerKind::Sgd;
  int step = 1;              // 1-based count of updates so far, this one included (Adam's bias correction)
  DeviceBuffer params;       // updated in place
  DeviceBuffer grads;        // read
  DeviceBuffer state;        // momentum_buffer or exp_avg; empty for SGD
  DeviceBuffer stateSquare;  // exp_avg_sq; Adam and AdamW only
  DeviceBuffer denominator;  // Adam and AdamW: sqrt(exp_avg_sq) / sqrt(1 - beta2^t) + eps
  DeviceBuffer squareRoot;   // single-tensor Adam and AdamW: sqrt(exp_avg_sq) before the division; else empty
  // The part updated: bytes [offsetBytes, offsetBytes + spanBytes) of params, grads and the state
  // (one parameter tensor of the single-tensor loop, paramTensorBytes); spanBytes 0: all p bytes.
  // denominator and squareRoot hold the part's bytes.
  std::uint64_t offsetBytes = 0;
  std::uint64_t spanBytes = 0;
};

enum class TensorRole {
  Raw,         // bytes as they are
  Activation,  // x(l) or d(l) of layer l (l = 0: the input)
  Extra,       // E(l) (downloads only; the layout of extras is the backend's own)
  Parameters,  // parameters or parameter gradients of layer l
  Labels,      // int64 [labelCount()] (LabelIndex)
};

class Device {
 public:
  virtual ~Device() = default;
  // "cpu", "gpu": written into measured timelines as their source.
  virtual std::string name() const = 0;
  virtual DeviceAllocator& allocator() = 0;

  // Checks that every layer of the chain can run here (kinds, dtype, shapes) and prepares per-layer
  // state (descriptors, algorithm choices). The device keeps its own copy of the chain; later calls
  // name layers by index into it. Calling it again replaces the chain.
  virtual Status prepare(const Chain& chain) = 0;
  // The scratch bytes this device's kernel for layer l needs in the given pass (0 for the CPU's
  // primitive kinds; a block's arena size; cuDNN's workspace of the chosen algorithm).
  virtual Result<std::uint64_t> requiredWorkspaceBytes(std::size_t layer, Pass pass) const = 0;

  // Copies between host memory (canonical layout, see the top of this file) and a buffer. The host
  // span must have exactly buffer.bytes bytes. `layer` says which tensor for Activation, Extra and
  // Parameters; it is ignored for Raw and Labels.
  virtual Status upload(DeviceBuffer dst, TensorRole role, std::size_t layer, std::span<const std::byte> src) = 0;
  virtual Status download(DeviceBuffer src, TensorRole role, std::size_t layer, std::span<std::byte> dst) = 0;
  // Sets every byte of the buffer (zeroing parameter gradients before a step).
  virtual Status fill(DeviceBuffer dst, std::uint8_t value) = 0;
  // A 64-bit digest of the buffer's raw bytes (bitwise comparisons of runs on this device; not
  // comparable across devices, whose layouts differ). The default downloads the bytes and hashes
  // them on the host with checksumBytes(); a backend may hash in place.
  virtual Result<std::uint64_t> checksum(DeviceBuffer buffer);

  virtual Status forward(const ForwardCall& call) = 0;
  virtual Status backward(const BackwardCall& call) = 0;
  virtual Status lossSeed(const SeedCall& call) = 0;
  // One layer's optimizer update. The default refuses (InvalidInput naming the device): a backend
  // without the kernels runs chains without an optimizer only.
  virtual Status optimizerStep(const OptimizerCall& call);
  // AccumulateGrad's `variable.grad += new_grad` under GradMode::Static (memory-model.md 11.2):
  // adds layer l's fresh parameter gradient (src) into its static gradient (dst), both p(l) bytes,
  // elementwise in the parameters' dtype (bytewise for abstract layers). The default refuses
  // (InvalidInput naming the device).
  virtual Status accumulateGradient(std::size_t layer, DeviceBuffer dst, DeviceBuffer src);
  // fp16-mixed's GradScaler (memory-model.md 11.7), called once before the optimizer step: every
  // layer's float32 gradient (grads[l]; invalid where p(l) = 0) multiplied by 1 / scale with
  // PyTorch's inf/NaN check; true when one was found, and the step is then skipped. The scale and
  // its update are the device's. The default refuses (InvalidInput naming the device).
  virtual Result<bool> unscaleGradients(std::span<const DeviceBuffer> grads);

  // Waits until every kernel issued so far has finished (a no-op on the CPU); the interpreter calls
  // it before reading the clock at the end of an op.
  virtual Status synchronize() = 0;

  // What callers ask of any device, so that none needs to know which backend it holds.

  // Bytes this device could still allocate now: the CPU its capacity (or physical memory) less what
  // it holds, the GPU its free memory plus what its pool has reserved but not handed out.
  virtual Result<std::uint64_t> availableBytes() const = 0;
  // Refuses a plan before it runs when what it still has to allocate (its predicted peak, static
  // bytes included, minus what the allocator already holds) exceeds availableBytes(): OutOfMemory
  // "the plan needs X more on <name> (...), but the device has Y available". An error of
  // availableBytes() is returned as it is.
  Status checkFits(std::uint64_t predictedPeakBytes);
  // One line for reports and profiles ("NVIDIA H200 (device 0, sm_90, ...)"); the default is name().
  virtual std::string describe() const;
  // The prepared layer l's kernels in words (chosen algorithms, workspaces); the default is an
  // empty text. A backend that describes layers refuses an unprepared one as requiredWorkspaceBytes().
  virtual Result<std::string> describeLayer(std::size_t layer) const;
  // Runs `body` once and returns how long the work it issued took to finish, in milliseconds; an
  // error of body's is returned as it is. The default synchronizes, reads the host's steady clock
  // around body and synchronizes again before the second reading; a backend with its own timers
  // (CUDA events) measures the device's time instead. The profiler times kernels through it.
  virtual Result<double> timeMs(const std::function<Status()>& body);
};

// The hash behind Device::checksum: any single changed 64-bit word changes it.
std::uint64_t checksumBytes(std::span<const std::byte> bytes);

}  // namespace remat
