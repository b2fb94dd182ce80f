// CudaDevice: opens the GPU, prepares a chain, copies data at the boundary and checks every buffer
// a call passes against the memory model (present exactly when the model says the op reads or
// writes it, with exactly the model's bytes) before dispatching to the kernels.
#include <cudnn.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda_device_impl.hpp"
#include "cuda_transformer_ends.hpp"
#include "half_type.hpp"
#include "kernels_abstract.hpp"
#include "kernels_half.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/gpu/cuda_check.hpp"

namespace remat {

using gpu::CudaDevice;

Status CudaDevice::Impl::requirePrepared(std::size_t layer) const {
  return requirePreparedLayer(*allocator, chain, layer);
}

Status CudaDevice::Impl::useChainHalfType() const {
  if (!chain || !isMixedPrecision(chain->step.precision)) return Status::ok();
  return useHalfType(halfTypeOf(chain->step.precision));
}

Status CudaDevice::Impl::resetScaler() {
  if (!scaler) {
    void* raw = nullptr;
    REMAT_CUDA_CHECK(cudaMalloc(&raw, 2 * sizeof(float)));
    scaler.reset(static_cast<float*>(raw));
  }
  const float initial[2] = {kGradScalerInitScale, 0.0f};
  REMAT_CUDA_CHECK(cudaMemcpyAsync(scaler.get(), initial, sizeof initial, cudaMemcpyHostToDevice, stream.get()));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  scalerGrowthTracker = 0;
  return Status::ok();
}

Result<std::byte*> CudaDevice::Impl::memory(DeviceBuffer buffer, const char* what) const {
  return checkedMemory(*allocator, buffer, buffer.bytes, "", what, false);
}

namespace gpu {

std::string CudaDeviceInfo::describe() const {
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  return name + " (device " + std::to_string(deviceIndex) + ", sm_" + std::to_string(computeMajor) +
         std::to_string(computeMinor) + ", " + std::to_string(totalBytes >> 20) + " MiB), driver " +
         version(driverVersion) + ", runtime " + version(runtimeVersion) + ", cuDNN " + std::to_string(cudnnVersion);
}

Status cudaDeviceAvailable(int deviceIndex) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::invalid(std::string("no CUDA device: ") + cudaGetErrorString(error) + " (" +
                           cudaGetErrorName(error) + ")");
  }
  if (count == 0) return Status::invalid("no CUDA device: the CUDA runtime found none");
  if (deviceIndex < 0 || deviceIndex >= count)
    return Status::invalid("no CUDA device: device " + std::to_string(deviceIndex) + " requested, " +
                           std::to_string(count) + " present");
  return Status::ok();
}

Result<std::unique_ptr<CudaDevice>> createCudaDevice(const CudaDeviceOptions& options) {
  REMAT_RETURN_IF_ERROR(cudaDeviceAvailable(options.deviceIndex));
  auto impl = std::make_unique<CudaDevice::Impl>();
  impl->options = options;
  REMAT_CUDA_CHECK(cudaSetDevice(options.deviceIndex));
  cudaDeviceProp props{};
  REMAT_CUDA_CHECK(cudaGetDeviceProperties(&props, options.deviceIndex));
  impl->info.deviceIndex = options.deviceIndex;
  impl->info.name = props.name;
  impl->info.computeMajor = props.major;
  impl->info.computeMinor = props.minor;
  impl->info.totalBytes = props.totalGlobalMem;
  REMAT_CUDA_CHECK(cudaDriverGetVersion(&impl->info.driverVersion));
  REMAT_CUDA_CHECK(cudaRuntimeGetVersion(&impl->info.runtimeVersion));
  impl->info.cudnnVersion = cudnnGetVersion();
  auto stream = createStream();
  if (!stream) return stream.status();
  impl->stream = std::move(*stream);
  auto cudnn = createCudnnHandle(impl->stream.get());
  if (!cudnn) return cudnn.status();
  impl->cudnn = std::move(*cudnn);
  auto cublas = createCublasHandle(impl->stream.get(), options.allowTf32);
  if (!cublas) return cublas.status();
  impl->cublas = std::move(*cublas);
  auto allocator = CudaAllocator::create(options.deviceIndex, impl->stream.get());
  if (!allocator) return allocator.status();
  impl->allocator = std::move(*allocator);
  return std::unique_ptr<CudaDevice>(new CudaDevice(std::move(impl)));
}

CudaDevice::CudaDevice(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudaDevice::~CudaDevice() {
  if (impl_ && impl_->stream) (void)cudaStreamSynchronize(impl_->stream.get());
}

DeviceAllocator& CudaDevice::allocator() { return *impl_->allocator; }
CudaAllocator& CudaDevice::cudaAllocator() { return *impl_->allocator; }
const CudaDeviceInfo& CudaDevice::info() const { return impl_->info; }
const CudaDeviceOptions& CudaDevice::options() const { return impl_->options; }
cudaStream_t CudaDevice::stream() const { return impl_->stream.get(); }

Status CudaDevice::prepare(const Chain& chain) {
  impl_->chain.reset();
  impl_->layers.clear();
  std::vector<LayerState> layers;
  layers.reserve(chain.size() + 1);
  const LayerContext context = impl_->context();
  // The half type is chosen here and at every launch below, from the chain's precision (half_type.hpp).
  if (isMixedPrecision(chain.step.precision)) REMAT_RETURN_IF_ERROR(useHalfType(halfTypeOf(chain.step.precision)));
  for (std::size_t l = 0; l <= chain.size(); ++l)
    REMAT_RETURN_IF_ERROR(prepareLayer(chain, l, context, impl_->options, layers));
  impl_->layers = std::move(layers);
  impl_->chain = chain;
  // scaler.step needs an optimizer: without one (--optimizer none) the seed is not scaled and the
  // gradients stay autocast's own, as a user without GradScaler gets.
  if (chain.step.precision == Precision::Fp16Mixed && hasOptimizerStep(chain.step)) return impl_->resetScaler();
  impl_->scaler.reset();  // no GradScaler
  return Status::ok();
}

Result<std::uint64_t> CudaDevice::requiredWorkspaceBytes(std::size_t layer, Pass pass) const {
  REMAT_RETURN_IF_ERROR(impl_->requirePrepared(layer));
  const LayerState& state = impl_->layers[layer];
  return pass == Pass::Forward ? state.requiredFwdWorkspace : state.requiredBwdWorkspace;
}

Result<std::string> CudaDevice::describeLayer(std::size_t layer) const {
  REMAT_RETURN_IF_ERROR(impl_->requirePrepared(layer));
  const LayerState& state = impl_->layers[layer];
  std::string text = state.label + ": wf " + std::to_string(state.requiredFwdWorkspace) + " B, wb " +
                     std::to_string(state.requiredBwdWorkspace) + " B";
  if (!state.algorithms.empty()) text += "; " + state.algorithms;
  return text;
}

Result<std::uint64_t> CudaDevice::availableBytes() const { return impl_->allocator->availableBytes(); }

Result<double> CudaDevice::timeMs(const std::function<Status()>& body) {
  auto start = createEvent();
  if (!start) return start.status();
  auto stop = createEvent();
  if (!stop) return stop.status();
  const cudaStream_t stream = impl_->stream.get();
  REMAT_CUDA_CHECK(cudaEventRecord(start->get(), stream));
  REMAT_RETURN_IF_ERROR(body());
  REMAT_CUDA_CHECK(cudaEventRecord(stop->get(), stream));
  REMAT_CUDA_CHECK(cudaEventSynchronize(stop->get()));
  float ms = 0.0f;
  REMAT_CUDA_CHECK(cudaEventElapsedTime(&ms, start->get(), stop->get()));
  return static_cast<double>(ms);
}

Status CudaDevice::synchronize() {
  REMAT_CUDA_CHECK(cudaStreamSynchronize(impl_->stream.get()));
  return Status::ok();
}

Status CudaDevice::upload(DeviceBuffer dst, TensorRole role, std::size_t layer, std::span<const std::byte> src) {
  (void)layer;  // the GPU keeps the canonical layout: every role is a plain copy
  if (src.size() != dst.bytes)
    return Status::internal("gpu: upload of " + std::to_string(src.size()) + " bytes into buffer #" +
                            std::to_string(dst.id) + " of " + std::to_string(dst.bytes) + " bytes");
  if (role == TensorRole::Labels && impl_->chain && !impl_->layers.empty() && impl_->layers.back().real) {
    // Checked here, on the host, so the seed kernel never sees a label outside the classes.
    const LayerState& last = impl_->layers.back();
    const Index classes = last.outCount / last.outShape[0];
    for (std::size_t i = 0; i + sizeof(LabelIndex) <= src.size(); i += sizeof(LabelIndex)) {
      LabelIndex label = 0;
      std::memcpy(&label, src.data() + i, sizeof(LabelIndex));
      if (label < 0 || label >= classes)
        return Status::invalid("gpu: label " + std::to_string(label) + " of sample " +
                               std::to_string(i / sizeof(LabelIndex)) + " is outside the " + std::to_string(classes) +
                               " classes of the last layer");
    }
  }
  auto data = impl_->memory(dst, "upload");
  if (!data) return data.status();
  if (src.empty()) return Status::ok();
  REMAT_CUDA_CHECK(cudaMemcpyAsync(*data, src.data(), src.size(), cudaMemcpyHostToDevice, impl_->stream.get()));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(impl_->stream.get()));
  return Status::ok();
}

Status CudaDevice::download(DeviceBuffer src, TensorRole role, std::size_t layer, std::span<std::byte> dst) {
  (void)role;
  (void)layer;
  if (dst.size() != src.bytes)
    return Status::internal("gpu: download of buffer #" + std::to_string(src.id) + " (" + std::to_string(src.bytes) +
                            " bytes) into " + std::to_string(dst.size()) + " bytes");
  auto data = impl_->memory(src, "download");
  if (!data) return data.status();
  if (dst.empty()) return Status::ok();
  REMAT_CUDA_CHECK(cudaMemcpyAsync(dst.data(), *data, dst.size(), cudaMemcpyDeviceToHost, impl_->stream.get()));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(impl_->stream.get()));
  return Status::ok();
}

Status CudaDevice::fill(DeviceBuffer dst, std::uint8_t value) {
  auto data = impl_->memory(dst, "fill");
  if (!data) return data.status();
  if (dst.bytes > 0) REMAT_CUDA_CHECK(cudaMemsetAsync(*data, value, dst.bytes, impl_->stream.get()));
  return Status::ok();
}

Status CudaDevice::forward(const ForwardCall& call) {
  Impl& d = *impl_;
  REMAT_RETURN_IF_ERROR(d.requirePrepared(call.layer));
  const std::size_t l = call.layer;
  const LayerState& state = d.layers[l];
  const LayerNumbers& m = d.chain->at(l);
  auto memory = checkForwardCall(*d.allocator, *d.chain, call, state.label, state.requiredFwdWorkspace);
  if (!memory) return memory.status();
  REMAT_RETURN_IF_ERROR(d.useChainHalfType());
  const ForwardMemory& b = *memory;
  const bool wantsExtra = call.mode == ForwardMode::Keep && m.extraBytes > 0;
  const cudaStream_t stream = d.stream.get();
  if (state.kind == LayerKind::Abstract) {
    // As the CPU's abstractForward: k = absorb(absorb(key, x), params); y at k, E at mix(k ^ 1),
    // the workspace at mix(k ^ 2).
    kernels::ByteSpans spans;
    spans.push(b.x, call.input.bytes);
    spans.push(b.params, m.paramBytes);
    REMAT_RETURN_IF_ERROR(kernels::abstractAbsorb(stream, rng::streamKey(call.seed, rng::Purpose::Abstract, l), spans));
    REMAT_RETURN_IF_ERROR(kernels::abstractFillBytes(stream, b.y, m.outBytes, false, 0));
    REMAT_RETURN_IF_ERROR(kernels::abstractFillBytes(stream, b.extra, wantsExtra ? m.extraBytes : 0, true, 1));
    return kernels::abstractFillBytes(stream, b.workspace, call.workspace.bytes, true, 2);
  }
  return forwardLayer(state, l, call.mode, call.seed, d.context(), b.floats())
      .withContext("gpu: " + state.label + " forward");
}

Status CudaDevice::backward(const BackwardCall& call) {
  Impl& d = *impl_;
  REMAT_RETURN_IF_ERROR(d.requirePrepared(call.layer));
  const std::size_t l = call.layer;
  const LayerState& state = d.layers[l];
  const LayerNumbers& m = d.chain->at(l);
  auto memory = checkBackwardCall(*d.allocator, *d.chain, call, state.label, state.requiredBwdWorkspace);
  if (!memory) return memory.status();
  REMAT_RETURN_IF_ERROR(d.useChainHalfType());
  const BackwardMemory& b = *memory;
  const cudaStream_t stream = d.stream.get();
  if (state.kind == LayerKind::Abstract) {
    // As the CPU's abstractBackward: k absorbs dy, x, y, E and the parameters from mix(key ^ 0xB);
    // dx at k (floats when x(l-1) is a real activation), the workspace at mix(k ^ 2), and the
    // parameter gradients get mix(k ^ 3)'s bytes added.
    kernels::ByteSpans spans;
    spans.push(b.dy, m.outBytes);
    spans.push(b.x, call.input.bytes);
    spans.push(b.y, call.output.bytes);
    spans.push(b.extra, call.extra.bytes);
    spans.push(b.params, m.paramBytes);
    const std::uint64_t key = rng::mix64(rng::streamKey(call.seed, rng::Purpose::Abstract, l) ^ 0xB);
    REMAT_RETURN_IF_ERROR(kernels::abstractAbsorb(stream, key, spans));
    const bool dxIsFloat = l > 1 && d.layers[l - 1].real;
    if (dxIsFloat)
      REMAT_RETURN_IF_ERROR(kernels::abstractFillFloats(stream, b.dx, call.gradInput.bytes, false, 0));
    else
      REMAT_RETURN_IF_ERROR(kernels::abstractFillBytes(stream, b.dx, call.gradInput.bytes, false, 0));
    REMAT_RETURN_IF_ERROR(kernels::abstractFillBytes(stream, b.workspace, call.workspace.bytes, true, 2));
    return kernels::abstractAddGradBytes(stream, b.paramGrads, m.paramBytes, 3);
  }
  return backwardLayer(state, l, call.seed, d.context(), b.floats()).withContext("gpu: " + state.label + " backward");
}

Status CudaDevice::lossSeed(const SeedCall& call) {
  Impl& d = *impl_;
  auto memory = checkSeedCall(*d.allocator, d.chain, call);
  if (!memory) return memory.status();
  REMAT_RETURN_IF_ERROR(d.useChainHalfType());
  const std::size_t n = d.chain->size();
  const std::uint64_t bytes = d.chain->outBytes(n);
  std::byte* logits = memory->logits;
  std::byte* grad = memory->gradLogits;
  const LayerState& last = d.layers[n];
  const cudaStream_t stream = d.stream.get();
  if (!last.real) {
    kernels::ByteSpans spans;
    spans.push(logits, bytes);
    const std::uint64_t key = rng::mix64(rng::streamKey(call.seed, rng::Purpose::Abstract, 0) ^ 0x5EED);
    REMAT_RETURN_IF_ERROR(kernels::abstractAbsorb(stream, key, spans));
    return kernels::abstractFillBytes(stream, grad, bytes, false, 0);
  }
  if (last.kind == LayerKind::LmHead) {  // one label per token (labelCount())
    const std::uint64_t tokens = static_cast<std::uint64_t>(last.outShape[0] * last.outShape[1]);
    auto labels = checkedMemory(*d.allocator, call.labels, tokens * sizeof(LabelIndex), "SEED", "labels", false);
    if (!labels) return labels.status();
    REMAT_RETURN_IF_ERROR(
        lmHeadLossSeed(last, stream, reinterpret_cast<const LabelIndex*>(*labels), reinterpret_cast<float*>(grad)));
    return d.scaleFloatSeed(grad, bytes);
  }
  const Index batch = last.outShape[0];
  auto labels = checkedMemory(*d.allocator, call.labels, static_cast<std::uint64_t>(batch) * sizeof(LabelIndex), "SEED",
                              "labels", false);
  if (!labels) return labels.status();
  if (last.outputHalf())  // a mixed precision: the loss's seed from half logits, a half gradient
    return kernels::softmaxCrossEntropyBackwardHalf(
        stream, batch, last.outCount / batch, reinterpret_cast<const kernels::Bf16*>(logits),
        reinterpret_cast<const LabelIndex*>(*labels), reinterpret_cast<kernels::Bf16*>(grad), d.scaler.get());
  REMAT_RETURN_IF_ERROR(kernels::softmaxCrossEntropyBackward(
      stream, batch, last.outCount / batch, reinterpret_cast<const float*>(logits),
      reinterpret_cast<const LabelIndex*>(*labels), reinterpret_cast<float*>(grad)));
  return d.scaleFloatSeed(grad, bytes);
}

Status CudaDevice::Impl::scaleFloatSeed(std::byte* grad, std::uint64_t bytes) const {
  if (!scaler) return Status::ok();  // no GradScaler: the seed as it is
  return kernels::gradScalerMultiply(stream.get(), static_cast<Index>(bytes / sizeof(float)), scaler.get(),
                                     reinterpret_cast<float*>(grad));
}

Result<bool> CudaDevice::unscaleGradients(std::span<const DeviceBuffer> grads) {
  Impl& d = *impl_;
  if (!d.chain || d.chain->step.precision != Precision::Fp16Mixed || !d.scaler)
    return Status::internal("gpu: unscaleGradients outside an fp16-mixed chain");
  const cudaStream_t stream = d.stream.get();
  float* scale = d.scaler.get();
  float* foundInf = scale + 1;
  REMAT_CUDA_CHECK(cudaMemsetAsync(foundInf, 0, sizeof(float), stream));
  for (std::size_t l = 1; l < grads.size() && l <= d.chain->size(); ++l) {
    if (!grads[l].valid() || d.chain->layers[l - 1].kind == LayerKind::Abstract) continue;
    auto g = checkedMemory(*d.allocator, grads[l], d.chain->at(l).paramBytes, "STEP", "gradient", false);
    if (!g) return g.status();
    REMAT_RETURN_IF_ERROR(kernels::gradScalerUnscale(stream, static_cast<Index>(grads[l].bytes / sizeof(float)), scale,
                                                     reinterpret_cast<float*>(*g), foundInf));
  }
  float found = 0.0f;  // scaler.step reads found_inf on the host, as PyTorch's .item()
  REMAT_CUDA_CHECK(cudaMemcpyAsync(&found, foundInf, sizeof found, cudaMemcpyDeviceToHost, stream));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream));
  // scaler.update(): backoff on inf/NaN, growth after growth_interval clean steps.
  float factor = 1.0f;
  if (found != 0.0f) {
    factor = kGradScalerBackoff;
    d.scalerGrowthTracker = 0;
  } else if (++d.scalerGrowthTracker == kGradScalerGrowthInterval) {
    factor = kGradScalerGrowth;
    d.scalerGrowthTracker = 0;
  }
  if (factor != 1.0f) REMAT_RETURN_IF_ERROR(kernels::gradScalerUpdate(stream, factor, scale));
  return found != 0.0f;
}

Status CudaDevice::setLossScale(float scale) {
  if (!impl_->scaler) return Status::invalid("gpu: no GradScaler (the chain is not fp16-mixed with an optimizer)");
  if (!(scale > 0.0f) || !std::isfinite(scale))
    return Status::invalid("gpu: a GradScaler scale must be positive and finite, got " + std::to_string(scale));
  REMAT_CUDA_CHECK(
      cudaMemcpyAsync(impl_->scaler.get(), &scale, sizeof scale, cudaMemcpyHostToDevice, impl_->stream.get()));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(impl_->stream.get()));
  impl_->scalerGrowthTracker = 0;
  return Status::ok();
}

Result<float> CudaDevice::lossScale() const {
  if (!impl_->scaler) return Status::invalid("gpu: no GradScaler (the chain is not fp16-mixed with an optimizer)");
  float scale = 0.0f;
  REMAT_CUDA_CHECK(cudaMemcpyAsync(&scale, impl_->scaler.get(), sizeof scale, cudaMemcpyDeviceToHost, stream()));
  REMAT_CUDA_CHECK(cudaStreamSynchronize(stream()));
  return scale;
}

// Float32 gradients (the GPU keeps float32 masters under a mixed precision), bytes for abstract layers.
Status CudaDevice::accumulateGradient(std::size_t layer, DeviceBuffer dst, DeviceBuffer src) {
  Impl& d = *impl_;
  REMAT_RETURN_IF_ERROR(d.requirePrepared(layer));
  auto m = checkAccumulateCall(*d.allocator, *d.chain, layer, dst, src);
  if (!m) return m.status();
  const cudaStream_t stream = d.stream.get();
  if (d.chain->layers[layer - 1].kind == LayerKind::Abstract)
    return kernels::accumulateBytes(stream, m->bytes, m->dst, m->src);
  if (m->bytes % sizeof(float) != 0)
    return Status::internal("layer " + std::to_string(layer) + " gradient accumulation: parameters are not float32");
  return kernels::accumulateFloats(stream, static_cast<Index>(m->bytes / sizeof(float)),
                                   reinterpret_cast<float*>(m->dst), reinterpret_cast<const float*>(m->src));
}

// The buffers checked as every backend checks them (checkOptimizerCall); the update then runs on
// the device's stream.
Status CudaDevice::optimizerStep(const OptimizerCall& call) {
  Impl& d = *impl_;
  REMAT_RETURN_IF_ERROR(d.requirePrepared(call.layer));
  auto m = checkOptimizerCall(*d.allocator, *d.chain, call);
  if (!m) return m.status();
  const std::uint64_t p = m->bytes;  // the part of the layer's parameters this call updates
  const std::string where = "layer " + std::to_string(call.layer) + " optimizer step";
  std::byte* spans[6] = {m->params, m->grads, m->state, m->stateSquare, m->denominator, m->squareRoot};
  const cudaStream_t stream = d.stream.get();
  if (d.chain->layers[call.layer - 1].kind == LayerKind::Abstract)
    return kernels::abstractOptimizerUpdate(stream, spans[0], spans[1], spans[2], spans[4], p);
  if (p % sizeof(float) != 0) return Status::internal(where + ": parameters are not float32");
  auto floats = [&](int k) { return reinterpret_cast<float*>(spans[k]); };
  const kernels::OptimizerSpans s{
      floats(0), floats(1), floats(2), floats(3), floats(4), floats(5), static_cast<Index>(p / sizeof(float))};
  using H = OptimizerHyperparameters;
  const double t = static_cast<double>(call.step);
  const auto biasCorrection1 = static_cast<float>(1.0 - std::pow(static_cast<double>(H::kBeta1), t));
  kernels::OptimizerScalars k;
  k.learningRate = H::kLearningRate;
  k.momentum = H::kMomentum;
  k.beta1 = H::kBeta1;
  k.beta2 = H::kBeta2;
  k.epsilon = H::kEpsilon;
  k.weightDecay = H::kAdamWWeightDecay;
  k.stepSize = H::kLearningRate / biasCorrection1;
  k.biasCorrection2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(H::kBeta2), t)));
  kernels::OptimizerUpdate update = kernels::OptimizerUpdate::Sgd;
  switch (call.optimizer) {
    case OptimizerKind::Momentum: update = kernels::OptimizerUpdate::Momentum; break;
    case OptimizerKind::Adam: update = kernels::OptimizerUpdate::Adam; break;
    case OptimizerKind::AdamW: update = kernels::OptimizerUpdate::AdamW; break;
    default: break;
  }
  return kernels::optimizerUpdate(stream, update, s, k);
}

}  // namespace gpu
}  // namespace remat
