// CpuDevice: prepares a chain, converts data at the boundary and checks every buffer a call
// passes against the memory model (present exactly when the model says the op reads or writes
// it, with exactly the model's bytes) before dispatching to the kernels.
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu_device_impl.hpp"
#include "remat/counter_rng.hpp"

namespace remat {

using cpu::ByteSpan;
using cpu::ConstByteSpan;

Result<std::byte*> CpuDevice::Impl::memory(DeviceBuffer buffer, std::uint64_t bytes, std::string_view where,
                                           const char* what, bool optional, bool atLeast) const {
  // Messages are built only on failure: this runs several times per op.
  auto label = [&] { return "cpu: " + std::string(where) + (where.empty() ? "" : ", ") + what; };
  if (!buffer.valid()) {
    if (optional) return static_cast<std::byte*>(nullptr);
    return Status::internal(label() + ": no buffer given");
  }
  if (atLeast ? buffer.bytes < bytes : buffer.bytes != bytes)
    return Status::internal(label() + ": buffer #" + std::to_string(buffer.id) + " has " +
                            std::to_string(buffer.bytes) + " bytes, the kernel needs " + (atLeast ? "at least " : "") +
                            std::to_string(bytes));
  auto data = allocator.resolve(buffer);
  if (!data) return data.status().withContext(label());
  return data;
}

Status CpuDevice::Impl::requirePrepared(std::size_t layer) const {
  if (!chain) return Status::internal("cpu: no chain prepared");
  if (layer < 1 || layer > chain->size())
    return Status::internal("cpu: layer " + std::to_string(layer) + " is outside 1.." + std::to_string(chain->size()));
  return Status::ok();
}

CpuDevice::CpuDevice(CpuDeviceOptions options) : impl_(std::make_unique<Impl>(options)) {}
CpuDevice::~CpuDevice() = default;

DeviceAllocator& CpuDevice::allocator() { return impl_->allocator; }

Status CpuDevice::prepare(const Chain& chain) {
  impl_->chain.reset();
  impl_->layers.clear();
  std::vector<cpu::LayerPlan> plans;
  plans.reserve(chain.size() + 1);
  for (std::size_t l = 0; l <= chain.size(); ++l) REMAT_RETURN_IF_ERROR(cpu::planLayer(chain, l, plans));
  impl_->layers = std::move(plans);
  impl_->chain = chain;
  return Status::ok();
}

Result<std::uint64_t> CpuDevice::requiredWorkspaceBytes(std::size_t layer, Pass pass) const {
  REMAT_RETURN_IF_ERROR(impl_->requirePrepared(layer));
  const cpu::LayerPlan& plan = impl_->layers[layer];
  return pass == Pass::Forward ? plan.requiredFwdWorkspace : plan.requiredBwdWorkspace;
}

namespace {

// The layout conversion a role needs, or null for a raw copy.
const std::vector<cpu::ParamSegment>* paramSegments(const cpu::LayerPlan& plan) {
  return plan.params.empty() ? nullptr : &plan.params;
}

}  // namespace

Status CpuDevice::upload(DeviceBuffer dst, TensorRole role, std::size_t layer, std::span<const std::byte> src) {
  if (src.size() != dst.bytes)
    return Status::internal("cpu: upload of " + std::to_string(src.size()) + " bytes into buffer #" +
                            std::to_string(dst.id) + " of " + std::to_string(dst.bytes) + " bytes");
  auto data = impl_->memory(dst, dst.bytes, "", "upload", false);
  if (!data) return data.status();
  const bool layered = role == TensorRole::Activation || role == TensorRole::Parameters;
  if (layered && (!impl_->chain || layer > impl_->chain->size()))
    return Status::internal("cpu: upload for layer " + std::to_string(layer) + " of no prepared chain");
  const cpu::LayerPlan* plan = layered ? &impl_->layers[layer] : nullptr;
  const bool convertAct = role == TensorRole::Activation && plan->real;
  const bool convertParams = role == TensorRole::Parameters && paramSegments(*plan) != nullptr;
  if (!convertAct && !convertParams) {
    if (!src.empty()) std::memcpy(*data, src.data(), src.size());
    return Status::ok();
  }
  // Host memory from new / malloc is float-aligned; only an odd span needs a staging copy.
  std::vector<float> staging;
  const float* canonical = reinterpret_cast<const float*>(src.data());
  if (reinterpret_cast<std::uintptr_t>(src.data()) % alignof(float) != 0) {
    staging.resize(src.size() / sizeof(float));
    std::memcpy(staging.data(), src.data(), staging.size() * sizeof(float));
    canonical = staging.data();
  }
  auto* out = reinterpret_cast<float*>(*data);
  if (convertAct)
    cpu::convertActivation(plan->out, canonical, out, false);
  else
    cpu::convertParams(plan->params, canonical, out, false);
  return Status::ok();
}

Status CpuDevice::download(DeviceBuffer src, TensorRole role, std::size_t layer, std::span<std::byte> dst) {
  if (dst.size() != src.bytes)
    return Status::internal("cpu: download of buffer #" + std::to_string(src.id) + " (" + std::to_string(src.bytes) +
                            " bytes) into " + std::to_string(dst.size()) + " bytes");
  auto data = impl_->memory(src, src.bytes, "", "download", false);
  if (!data) return data.status();
  const bool layered = role == TensorRole::Activation || role == TensorRole::Parameters;
  if (layered && (!impl_->chain || layer > impl_->chain->size()))
    return Status::internal("cpu: download for layer " + std::to_string(layer) + " of no prepared chain");
  const cpu::LayerPlan* plan = layered ? &impl_->layers[layer] : nullptr;
  const bool convertAct = role == TensorRole::Activation && plan->real;
  const bool convertParams = role == TensorRole::Parameters && paramSegments(*plan) != nullptr;
  if (!convertAct && !convertParams) {
    if (!dst.empty()) std::memcpy(dst.data(), *data, dst.size());
    return Status::ok();
  }
  const bool aligned = reinterpret_cast<std::uintptr_t>(dst.data()) % alignof(float) == 0;
  std::vector<float> staging(aligned ? 0 : dst.size() / sizeof(float));
  float* canonical = aligned ? reinterpret_cast<float*>(dst.data()) : staging.data();
  const auto* in = reinterpret_cast<const float*>(*data);
  if (convertAct)
    cpu::convertActivation(plan->out, in, canonical, true);
  else
    cpu::convertParams(plan->params, in, canonical, true);
  if (!aligned) std::memcpy(dst.data(), staging.data(), staging.size() * sizeof(float));
  return Status::ok();
}

Status CpuDevice::fill(DeviceBuffer dst, std::uint8_t value) {
  auto data = impl_->memory(dst, dst.bytes, "", "fill", false);
  if (!data) return data.status();
  if (dst.bytes > 0) std::memset(*data, value, dst.bytes);
  return Status::ok();
}

Result<std::uint64_t> CpuDevice::checksum(DeviceBuffer buffer) {
  auto data = impl_->memory(buffer, buffer.bytes, "", "checksum", false);
  if (!data) return data.status();
  return checksumBytes({*data, static_cast<std::size_t>(buffer.bytes)});
}

Status CpuDevice::forward(const ForwardCall& call) {
  Impl& d = *impl_;
  REMAT_RETURN_IF_ERROR(d.requirePrepared(call.layer));
  const std::size_t l = call.layer;
  const cpu::LayerPlan& plan = d.layers[l];
  const Chain& chain = *d.chain;
  const LayerNumbers& m = chain.at(l);
  const bool keep = call.mode == ForwardMode::Keep;
  const std::string_view where = plan.label;
  auto x = d.memory(call.input, chain.outBytes(l - 1), where, "forward input x(l-1)", false);
  if (!x) return x.status();
  auto y = d.memory(call.output, m.outBytes, where, "forward output x(l)", false);
  if (!y) return y.status();
  const bool wantsExtra = keep && m.extraBytes > 0;
  if (!wantsExtra && call.extra.valid())
    return Status::internal("cpu: " + plan.label +
                            " forward: extras passed in discard mode or for a layer without extras");
  auto extra = d.memory(call.extra, m.extraBytes, where, "forward extras E(l)", !wantsExtra);
  if (!extra) return extra.status();
  auto workspace = d.memory(call.workspace, plan.requiredFwdWorkspace, where, "forward workspace",
                            plan.requiredFwdWorkspace == 0, true);
  if (!workspace) return workspace.status();
  auto params = d.memory(call.params, m.paramBytes, where, "forward parameters", m.paramBytes == 0);
  if (!params) return params.status();
  if (plan.kind == LayerKind::Abstract) {
    cpu::abstractForward(rng::streamKey(call.seed, rng::Purpose::Abstract, l), {*x, call.input.bytes},
                         {*params, m.paramBytes}, {*y, m.outBytes}, {*extra, wantsExtra ? m.extraBytes : 0},
                         {*workspace, call.workspace.bytes});
    return Status::ok();
  }
  cpu::ForwardBuffers b;
  b.x = reinterpret_cast<const float*>(*x);
  b.y = reinterpret_cast<float*>(*y);
  b.extra = *extra;
  b.workspace = *workspace;
  b.params = reinterpret_cast<const float*>(*params);
  return cpu::forwardLayer(plan, l, call.mode, call.seed, b);
}

Status CpuDevice::backward(const BackwardCall& call) {
  Impl& d = *impl_;
  REMAT_RETURN_IF_ERROR(d.requirePrepared(call.layer));
  const std::size_t l = call.layer;
  const cpu::LayerPlan& plan = d.layers[l];
  const Chain& chain = *d.chain;
  const LayerNumbers& m = chain.at(l);
  const std::string_view where = plan.label;
  // A buffer the model says B(l) does not read must not be passed: the interpreter's liveness
  // would otherwise disagree with the simulator's.
  auto presentIff = [&](const DeviceBuffer& b, bool wanted, const char* name) -> Status {
    if (!wanted && b.valid())
      return Status::internal("cpu: " + plan.label + " backward: " + name +
                              " passed, but the model says B(l) does not use it");
    return Status::ok();
  };
  REMAT_RETURN_IF_ERROR(presentIff(call.input, m.needsInput, "x(l-1)"));
  REMAT_RETURN_IF_ERROR(presentIff(call.output, m.needsOutput, "x(l)"));
  REMAT_RETURN_IF_ERROR(presentIff(call.extra, m.extraBytes > 0, "E(l)"));
  REMAT_RETURN_IF_ERROR(presentIff(call.gradInput, l > 1, "d(l-1)"));
  auto dy = d.memory(call.gradOutput, m.outBytes, where, "backward d(l)", false);
  if (!dy) return dy.status();
  auto x = d.memory(call.input, chain.outBytes(l - 1), where, "backward x(l-1)", !m.needsInput);
  if (!x) return x.status();
  auto y = d.memory(call.output, m.outBytes, where, "backward x(l)", !m.needsOutput);
  if (!y) return y.status();
  auto extra = d.memory(call.extra, m.extraBytes, where, "backward E(l)", m.extraBytes == 0);
  if (!extra) return extra.status();
  auto dx = d.memory(call.gradInput, chain.outBytes(l - 1), where, "backward d(l-1)", l == 1);
  if (!dx) return dx.status();
  auto workspace = d.memory(call.workspace, plan.requiredBwdWorkspace, where, "backward workspace",
                            plan.requiredBwdWorkspace == 0, true);
  if (!workspace) return workspace.status();
  auto params = d.memory(call.params, m.paramBytes, where, "backward parameters", m.paramBytes == 0);
  if (!params) return params.status();
  auto grads = d.memory(call.paramGrads, m.paramBytes, where, "backward parameter gradients", m.paramBytes == 0);
  if (!grads) return grads.status();
  if (plan.kind == LayerKind::Abstract) {
    const bool dxIsFloat = l > 1 && d.layers[l - 1].real;
    cpu::abstractBackward(rng::streamKey(call.seed, rng::Purpose::Abstract, l), {*dy, m.outBytes},
                          {*x, call.input.bytes}, {*y, call.output.bytes}, {*extra, call.extra.bytes},
                          {*params, m.paramBytes}, {*dx, call.gradInput.bytes}, dxIsFloat,
                          {*workspace, call.workspace.bytes}, {*grads, m.paramBytes});
    return Status::ok();
  }
  cpu::BackwardBuffers b;
  b.dy = reinterpret_cast<const float*>(*dy);
  b.x = reinterpret_cast<const float*>(*x);
  b.y = reinterpret_cast<const float*>(*y);
  b.extra = *extra;
  b.dx = reinterpret_cast<float*>(*dx);
  b.workspace = *workspace;
  b.params = reinterpret_cast<const float*>(*params);
  b.paramGrads = reinterpret_cast<float*>(*grads);
  return cpu::backwardLayer(plan, b);
}

Status CpuDevice::lossSeed(const SeedCall& call) {
  Impl& d = *impl_;
  if (!d.chain || d.chain->size() == 0) return Status::internal("cpu: no chain prepared");
  const std::size_t n = d.chain->size();
  const std::uint64_t bytes = d.chain->outBytes(n);
  auto logits = d.memory(call.logits, bytes, "SEED", "logits x(n)", false);
  if (!logits) return logits.status();
  auto grad = d.memory(call.gradLogits, bytes, "SEED", "gradient d(n)", false);
  if (!grad) return grad.status();
  const cpu::LayerPlan& last = d.layers[n];
  if (!last.real) {
    cpu::abstractSeed(rng::streamKey(call.seed, rng::Purpose::Abstract, 0), {*logits, bytes}, {*grad, bytes});
    return Status::ok();
  }
  const cpu::ActivationLayout& layout = last.out;
  auto labels = d.memory(call.labels, static_cast<std::uint64_t>(layout.batch) * 4, "SEED", "labels", false);
  if (!labels) return labels.status();
  const auto* values = reinterpret_cast<const std::int32_t*>(*labels);
  for (cpu::Index i = 0; i < layout.batch; ++i)
    if (values[i] < 0 || values[i] >= layout.perSample())
      return Status::invalid("cpu: label " + std::to_string(values[i]) + " of sample " + std::to_string(i) +
                             " is outside the " + std::to_string(layout.perSample()) + " classes of the last layer");
  cpu::softmaxCrossEntropyBackward(layout, reinterpret_cast<const float*>(*logits), values,
                                   reinterpret_cast<float*>(*grad));
  return Status::ok();
}

}  // namespace remat
