// CpuDevice: prepares a chain, converts data at the boundary and checks every buffer a call
// passes against the memory model (present exactly when the model says the op reads or writes
// it, with exactly the model's bytes) before dispatching to the kernels.
#include <oneapi/dnnl/dnnl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "device_impl.hpp"
#include "remat/base/units.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/exec/device_calls.hpp"
#include "remat/model/token_input.hpp"

namespace remat::cpu {

using cpu::ByteSpan;
using cpu::ConstByteSpan;

Status CpuDevice::Impl::requirePrepared(std::size_t layer) const {
  return requirePreparedLayer(allocator, chain, layer);
}

Result<std::byte*> CpuDevice::Impl::memory(DeviceBuffer buffer, const char* what) const {
  return checkedMemory(allocator, buffer, buffer.bytes, "", what, false);
}

CpuDevice::CpuDevice(CpuDeviceOptions options) : impl_(std::make_unique<Impl>(options)) {}
CpuDevice::~CpuDevice() = default;

DeviceAllocator& CpuDevice::allocator() { return impl_->allocator; }

std::uint64_t physicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || pageSize <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(pageSize);
}

Result<std::uint64_t> CpuDevice::availableBytes() const {
  const std::uint64_t limit = impl_->options.capacityBytes > 0 ? impl_->options.capacityBytes : physicalMemoryBytes();
  if (limit == 0) return Status::internal("cpu: the system does not report its physical memory (sysconf)");
  const std::uint64_t held = impl_->allocator.bytesHeld();
  return limit > held ? limit - held : 0;
}

namespace {

std::string oneDnnVersion() {
  const dnnl_version_t* version = dnnl_version();
  return std::to_string(version->major) + "." + std::to_string(version->minor) + "." + std::to_string(version->patch);
}

}  // namespace

std::string CpuDevice::describe() const {
  const std::uint64_t capacity = impl_->options.capacityBytes;
  return "cpu: oneDNN " + oneDnnVersion() + " kernels, " + std::to_string(impl_->threads) +
         (impl_->threads == 1 ? " thread, " : " threads, ") +
         (capacity > 0 ? "capacity " + formatBytes(capacity) : std::string("no capacity limit"));
}

int CpuDevice::threads() const { return impl_->threads; }

namespace {

// bf16 and bf16-mixed run oneDNN's bfloat16 kernels; abstract layers are bytes and need none.
bool needsBfloat16Kernels(const Chain& chain) {
  const Precision p = chain.step.precision;
  if (p != Precision::Bf16 && p != Precision::Bf16Mixed && chain.dtype != DType::BFloat16) return false;
  for (const ChainLayer& layer : chain.layers)
    if (layer.kind != LayerKind::Abstract) return true;
  return false;
}

}  // namespace

Status cpuBfloat16Support() {
  if (cpu::dnnlRunsBfloat16()) return Status::ok();
  return Status::invalid(
      "cpu: oneDNN " + oneDnnVersion() +
      " has no bfloat16 convolution or matmul on this CPU (its instruction set: " + cpu::dnnlIsaName() +
      "; bfloat16 needs AVX-512, avx512_core); plan and simulate bf16 and bf16-mixed here, run "
      "them on a GPU, or run fp32 on this CPU");
}

Status CpuDevice::prepare(const Chain& chain) {
  impl_->chain.reset();
  impl_->layers.clear();
  if (Status bf16 = needsBfloat16Kernels(chain) ? cpuBfloat16Support() : Status::ok(); !bf16)
    return Status::invalid("precision " + std::string(precisionName(chain.step.precision)) + " on the " +
                           bf16.message());
  // Primitives size their scratch for the thread count they are created with: the device's.
  const cpu::ThreadScope threads(impl_->threads);
  if (!impl_->dnnl)
    REMAT_RETURN_IF_ERROR(cpu::dnnlTry("cpu: opening oneDNN's CPU engine", [&] { impl_->dnnl.emplace(); }));
  std::vector<cpu::PreparedLayer> prepared;
  prepared.reserve(chain.size() + 1);
  for (std::size_t l = 0; l <= chain.size(); ++l)
    REMAT_RETURN_IF_ERROR(cpu::prepareLayer(*impl_->dnnl, chain, l, prepared));
  impl_->layers = std::move(prepared);
  impl_->chain = chain;
  return Status::ok();
}

Result<std::uint64_t> CpuDevice::requiredWorkspaceBytes(std::size_t layer, Pass pass) const {
  REMAT_RETURN_IF_ERROR(impl_->requirePrepared(layer));
  const cpu::PreparedLayer& prepared = impl_->layers[layer];
  return pass == Pass::Forward ? prepared.requiredFwdWorkspace : prepared.requiredBwdWorkspace;
}

namespace {

// How a copy of `role` between host and device converts between the canonical layout (device.hpp)
// and the CPU's: by the layer's activation layout, by its parameter segments, or not at all.
struct Conversion {
  const cpu::PreparedLayer* prepared = nullptr;
  bool activation = false;
  bool params = false;

  bool raw() const { return !activation && !params; }
  void run(const float* from, float* to, bool toCanonical) const {
    if (activation && prepared->half)
      cpu::convertActivation(prepared->out, reinterpret_cast<const cpu::BFloat16*>(from),
                             reinterpret_cast<cpu::BFloat16*>(to), toCanonical);
    else if (activation)
      cpu::convertActivation(prepared->out, from, to, toCanonical);
    else if (prepared->halfParams)
      cpu::convertParams(prepared->params, reinterpret_cast<const cpu::BFloat16*>(from),
                         reinterpret_cast<cpu::BFloat16*>(to), toCanonical);
    else
      cpu::convertParams(prepared->params, from, to, toCanonical);
  }
};

Result<Conversion> conversionFor(const CpuDevice::Impl& d, TensorRole role, std::size_t layer, const char* what) {
  Conversion conversion;
  if (role != TensorRole::Activation && role != TensorRole::Parameters) return conversion;
  if (!d.chain || layer > d.chain->size())
    return Status::internal("cpu: " + std::string(what) + " for layer " + std::to_string(layer) +
                            " of no prepared chain");
  conversion.prepared = &d.layers[layer];
  // A token chain's x0 is its int64 ids (token_input.hpp): copied as they are, not as float32.
  const bool ids = layer == 0 && hasTokenIds(*d.chain);
  conversion.activation = role == TensorRole::Activation && conversion.prepared->real && !ids;
  conversion.params = role == TensorRole::Parameters && !conversion.prepared->params.empty();
  return conversion;
}

}  // namespace

Status CpuDevice::upload(DeviceBuffer dst, TensorRole role, std::size_t layer, std::span<const std::byte> src) {
  if (src.size() != dst.bytes)
    return Status::internal("cpu: upload of " + std::to_string(src.size()) + " bytes into buffer #" +
                            std::to_string(dst.id) + " of " + std::to_string(dst.bytes) + " bytes");
  auto data = impl_->memory(dst, "upload");
  if (!data) return data.status();
  auto conversion = conversionFor(*impl_, role, layer, "upload");
  if (!conversion) return conversion.status();
  if (conversion->raw()) {
    if (!src.empty()) std::memcpy(*data, src.data(), src.size());
    return Status::ok();
  }
  // Host memory from new / malloc is float-aligned; only an odd span needs a staging copy.
  std::vector<float> staging;
  const float* canonical = reinterpret_cast<const float*>(src.data());
  if (reinterpret_cast<std::uintptr_t>(src.data()) % alignof(float) != 0) {
    staging.resize((src.size() + sizeof(float) - 1) / sizeof(float));  // bfloat16 activations may be odd
    std::memcpy(staging.data(), src.data(), src.size());
    canonical = staging.data();
  }
  conversion->run(canonical, reinterpret_cast<float*>(*data), false);
  return Status::ok();
}

Status CpuDevice::download(DeviceBuffer src, TensorRole role, std::size_t layer, std::span<std::byte> dst) {
  if (dst.size() != src.bytes)
    return Status::internal("cpu: download of buffer #" + std::to_string(src.id) + " (" + std::to_string(src.bytes) +
                            " bytes) into " + std::to_string(dst.size()) + " bytes");
  auto data = impl_->memory(src, "download");
  if (!data) return data.status();
  auto conversion = conversionFor(*impl_, role, layer, "download");
  if (!conversion) return conversion.status();
  if (conversion->raw()) {
    if (!dst.empty()) std::memcpy(dst.data(), *data, dst.size());
    return Status::ok();
  }
  const bool aligned = reinterpret_cast<std::uintptr_t>(dst.data()) % alignof(float) == 0;
  std::vector<float> staging(aligned ? 0 : (dst.size() + sizeof(float) - 1) / sizeof(float));
  float* canonical = aligned ? reinterpret_cast<float*>(dst.data()) : staging.data();
  conversion->run(reinterpret_cast<const float*>(*data), canonical, true);
  if (!aligned) std::memcpy(dst.data(), staging.data(), dst.size());
  return Status::ok();
}

Status CpuDevice::fill(DeviceBuffer dst, std::uint8_t value) {
  auto data = impl_->memory(dst, "fill");
  if (!data) return data.status();
  const cpu::ThreadScope threads(impl_->threads);
  cpu::fillBytes(*data, dst.bytes, value);
  return Status::ok();
}

Result<std::uint64_t> CpuDevice::checksum(DeviceBuffer buffer) {
  auto data = impl_->memory(buffer, "checksum");
  if (!data) return data.status();
  return checksumBytes({*data, static_cast<std::size_t>(buffer.bytes)});
}

Status CpuDevice::forward(const ForwardCall& call) {
  Impl& d = *impl_;
  REMAT_RETURN_IF_ERROR(d.requirePrepared(call.layer));
  const std::size_t l = call.layer;
  const cpu::PreparedLayer& prepared = d.layers[l];
  const LayerNumbers& m = d.chain->at(l);
  auto memory = checkForwardCall(d.allocator, *d.chain, call, prepared.label, prepared.requiredFwdWorkspace);
  if (!memory) return memory.status();
  const ForwardMemory& b = *memory;
  const cpu::ThreadScope threads(d.threads);
  if (prepared.kind == LayerKind::Abstract) {
    const bool wantsExtra = call.mode == ForwardMode::Keep && m.extraBytes > 0;
    cpu::abstractForward(rng::streamKey(call.seed, rng::Purpose::Abstract, l), {b.x, call.input.bytes},
                         {b.params, m.paramBytes}, {b.y, m.outBytes}, {b.extra, wantsExtra ? m.extraBytes : 0},
                         {b.workspace, call.workspace.bytes});
    return Status::ok();
  }
  return cpu::forwardLayer(*d.dnnl, prepared, l, call.mode, call.seed, b.floats());
}

Status CpuDevice::backward(const BackwardCall& call) {
  Impl& d = *impl_;
  REMAT_RETURN_IF_ERROR(d.requirePrepared(call.layer));
  const std::size_t l = call.layer;
  const cpu::PreparedLayer& prepared = d.layers[l];
  const LayerNumbers& m = d.chain->at(l);
  auto memory = checkBackwardCall(d.allocator, *d.chain, call, prepared.label, prepared.requiredBwdWorkspace);
  if (!memory) return memory.status();
  const BackwardMemory& b = *memory;
  const cpu::ThreadScope threads(d.threads);
  if (prepared.kind == LayerKind::Abstract) {
    const bool dxIsFloat = l > 1 && d.layers[l - 1].real;
    cpu::abstractBackward(rng::streamKey(call.seed, rng::Purpose::Abstract, l), {b.dy, m.outBytes},
                          {b.x, call.input.bytes}, {b.y, call.output.bytes}, {b.extra, call.extra.bytes},
                          {b.params, m.paramBytes}, {b.dx, call.gradInput.bytes}, dxIsFloat,
                          {b.workspace, call.workspace.bytes}, {b.paramGrads, m.paramBytes});
    return Status::ok();
  }
  return cpu::backwardLayer(*d.dnnl, prepared, rng::streamKey(call.seed, rng::Purpose::Dropout, l), b.floats());
}

Status CpuDevice::lossSeed(const SeedCall& call) {
  Impl& d = *impl_;
  auto memory = checkSeedCall(d.allocator, d.chain, call);
  if (!memory) return memory.status();
  const std::size_t n = d.chain->size();
  const std::uint64_t bytes = d.chain->outBytes(n);
  std::byte* logits = memory->logits;
  std::byte* grad = memory->gradLogits;
  const cpu::PreparedLayer& last = d.layers[n];
  if (!last.real) {
    cpu::abstractSeed(rng::streamKey(call.seed, rng::Purpose::Abstract, 0), {logits, bytes}, {grad, bytes});
    return Status::ok();
  }
  const cpu::ActivationLayout& layout = last.out;
  // One label per sample, or per token when the chain ends in lm_head (labelCount()).
  const bool tokens = last.kind == LayerKind::LmHead;
  const cpu::Index count = tokens ? last.ends.tokens : layout.batch;
  const cpu::Index classes = tokens ? last.ends.vocab : layout.perSample();
  auto labels = checkedMemory(d.allocator, call.labels, static_cast<std::uint64_t>(count) * sizeof(LabelIndex), "SEED",
                              "labels", false);
  if (!labels) return labels.status();
  const auto* values = reinterpret_cast<const LabelIndex*>(*labels);
  for (cpu::Index i = 0; i < count; ++i)
    if (values[i] < 0 || values[i] >= classes)
      return Status::invalid("cpu: label " + std::to_string(values[i]) + " of " + (tokens ? "token " : "sample ") +
                             std::to_string(i) + " is outside the " + std::to_string(classes) +
                             " classes of the last layer");
  const cpu::ThreadScope threads(d.threads);
  if (tokens && last.half)  // pure bf16: bfloat16 log-probabilities
    cpu::nllLossBackward(count, classes, values, reinterpret_cast<cpu::BFloat16*>(grad));
  else if (tokens)
    cpu::nllLossBackward(count, classes, values, reinterpret_cast<float*>(grad));
  else if (last.half)  // bf16-mixed: half logits, the loss in float32 (kernels.hpp)
    cpu::softmaxCrossEntropyBackward(layout, reinterpret_cast<const cpu::BFloat16*>(logits), values,
                                     reinterpret_cast<cpu::BFloat16*>(grad));
  else
    cpu::softmaxCrossEntropyBackward(layout, reinterpret_cast<const float*>(logits), values,
                                     reinterpret_cast<float*>(grad));
  return Status::ok();
}

}  // namespace remat::cpu
