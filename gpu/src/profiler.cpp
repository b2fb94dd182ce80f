#include "remat/gpu/profiler.hpp"

#include <algorithm>

#include "remat/gpu/cuda_check.hpp"
#include "remat/exec/interpreter.hpp"

namespace remat::gpu {

double medianOf(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

namespace {

// Buffers released on every exit path, so a failed layer leaves the device as it was.
class ScopedBuffers {
 public:
  explicit ScopedBuffers(DeviceAllocator& allocator) : allocator_(allocator) {}
  ~ScopedBuffers() {
    for (const DeviceBuffer& b : held_) (void)allocator_.release(b);
  }
  ScopedBuffers(const ScopedBuffers&) = delete;
  ScopedBuffers& operator=(const ScopedBuffers&) = delete;

  Result<DeviceBuffer> allocate(std::uint64_t bytes, const std::string& what) {
    auto b = allocator_.allocate(bytes);
    if (!b) return b.status().withContext(what);
    held_.push_back(*b);
    return *b;
  }
  // Hands a buffer over to the caller (it is no longer released here), or takes one over.
  void forget(const DeviceBuffer& buffer) { std::erase(held_, buffer); }
  void adopt(const DeviceBuffer& buffer) { held_.push_back(buffer); }

 private:
  DeviceAllocator& allocator_;
  std::vector<DeviceBuffer> held_;
};

// Runs `body` once to warm up, then `repeats` times between CUDA events; the median in ms.
template <typename Body>
Result<double> timeMedianMs(cudaStream_t stream, int repeats, Body body) {
  auto start = createEvent();
  if (!start) return start.status();
  auto stop = createEvent();
  if (!stop) return stop.status();
  REMAT_RETURN_IF_ERROR(body());
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    REMAT_CUDA_CHECK(cudaEventRecord(start->get(), stream));
    REMAT_RETURN_IF_ERROR(body());
    REMAT_CUDA_CHECK(cudaEventRecord(stop->get(), stream));
    REMAT_CUDA_CHECK(cudaEventSynchronize(stop->get()));
    float ms = 0.0f;
    REMAT_CUDA_CHECK(cudaEventElapsedTime(&ms, start->get(), stop->get()));
    times.push_back(ms);
  }
  return medianOf(std::move(times));
}

}  // namespace

Result<ProfileResult> profileChain(const Chain& chain, CudaDevice& device, const ProfileOptions& options) {
  if (device.options().workspacePolicy != WorkspacePolicy::Profile)
    return Status::internal("profileChain needs a device created with WorkspacePolicy::Profile");
  if (options.repeats < 1) return Status::invalid("repeats must be at least 1, got " + std::to_string(options.repeats));
  REMAT_RETURN_IF_ERROR(device.prepare(chain));
  DeviceAllocator& allocator = device.allocator();
  ProfileResult result;
  result.spec = chain.spec;
  result.device = device.info().describe();

  ScopedBuffers outer(allocator);
  auto input = outer.allocate(chain.inputBytes, "the input x0");
  if (!input) return input.status();
  REMAT_RETURN_IF_ERROR(device.upload(*input, TensorRole::Activation, 0, initialInput(chain, options.seed)));
  DeviceBuffer x = *input;

  for (std::size_t l = 1; l <= chain.size(); ++l) {
    const ChainLayer& layer = chain.layers[l - 1];
    const LayerNumbers& m = layer.numbers;
    const std::string where = "profiling layer " + std::to_string(l) + " ('" + layer.name + "')";
    LayerProfile profile;
    profile.layer = l;
    profile.name = layer.name;
    profile.measured = layer.kind != LayerKind::Abstract;
    ScopedBuffers scoped(allocator);
    auto wf = device.requiredWorkspaceBytes(l, Pass::Forward);
    if (!wf) return wf.status();
    auto wb = device.requiredWorkspaceBytes(l, Pass::Backward);
    if (!wb) return wb.status();
    // Abstract layers keep their stated workspaces (the kernels fill whatever they are given).
    const std::uint64_t fwdBytes = profile.measured ? *wf : m.fwdWorkspaceBytes;
    const std::uint64_t bwdBytes = profile.measured ? *wb : m.bwdWorkspaceBytes;

    auto output = scoped.allocate(m.outBytes, where + ", x(l)");
    if (!output) return output.status();
    DeviceBuffer extra, fwdWorkspace, params, grads;
    if (m.extraBytes > 0) {
      auto b = scoped.allocate(m.extraBytes, where + ", E(l)");
      if (!b) return b.status();
      extra = *b;
    }
    if (fwdBytes > 0) {
      auto b = scoped.allocate(fwdBytes, where + ", forward workspace");
      if (!b) return b.status();
      fwdWorkspace = *b;
    }
    if (m.paramBytes > 0) {
      auto values = initialParameters(chain, l, options.seed);
      if (!values) return values.status();
      auto b = scoped.allocate(m.paramBytes, where + ", parameters");
      if (!b) return b.status();
      params = *b;
      REMAT_RETURN_IF_ERROR(device.upload(params, TensorRole::Parameters, l, *values));
      auto g = scoped.allocate(m.paramBytes, where + ", parameter gradients");
      if (!g) return g.status();
      grads = *g;
      REMAT_RETURN_IF_ERROR(device.fill(grads, 0));
    }

    ForwardCall fwd;
    fwd.layer = l;
    fwd.mode = ForwardMode::Keep;
    fwd.input = x;
    fwd.output = *output;
    fwd.extra = extra;
    fwd.workspace = fwdWorkspace;
    fwd.params = params;
    fwd.seed = options.seed;
    auto fwdMs = timeMedianMs(device.stream(), options.repeats, [&] { return device.forward(fwd); });
    if (!fwdMs) return fwdMs.status().withContext(where + ", forward");

    {
      // The backward's own buffers go before the next layer's forward.
      ScopedBuffers backward(allocator);
      auto dy = backward.allocate(m.outBytes, where + ", d(l)");
      if (!dy) return dy.status();
      REMAT_RETURN_IF_ERROR(device.fill(*dy, 0));
      BackwardCall bwd;
      bwd.layer = l;
      bwd.gradOutput = *dy;
      if (m.needsInput) bwd.input = x;
      if (m.needsOutput) bwd.output = *output;
      bwd.extra = extra;
      if (l > 1) {
        auto dx = backward.allocate(chain.outBytes(l - 1), where + ", d(l-1)");
        if (!dx) return dx.status();
        bwd.gradInput = *dx;
      }
      if (bwdBytes > 0) {
        auto b = backward.allocate(bwdBytes, where + ", backward workspace");
        if (!b) return b.status();
        bwd.workspace = *b;
      }
      bwd.params = params;
      bwd.paramGrads = grads;
      bwd.seed = options.seed;
      auto bwdMs = timeMedianMs(device.stream(), options.repeats, [&] { return device.backward(bwd); });
      if (!bwdMs) return bwdMs.status().withContext(where + ", backward");
      profile.bwdMs = *bwdMs;
    }
    profile.fwdMs = *fwdMs;
    profile.fwdWorkspaceBytes = fwdBytes;
    profile.bwdWorkspaceBytes = bwdBytes;
    if (auto text = device.describeLayer(l)) profile.kernels = *text;

    if (profile.measured) {
      LayerSpec& spec = result.spec.layers[layer.specIndex];
      spec.hasMeasuredWorkspace = true;
      spec.numbers.fwdWorkspaceBytes = fwdBytes;
      spec.numbers.bwdWorkspaceBytes = bwdBytes;
      spec.hasMeasuredCost = true;
      spec.numbers.fwdCost = profile.fwdMs;
      spec.numbers.bwdCost = profile.bwdMs;
    }
    result.layers.push_back(std::move(profile));

    // x(l) becomes the next layer's input; x(l-1) goes.
    scoped.forget(*output);
    outer.forget(x);
    REMAT_RETURN_IF_ERROR(allocator.release(x));
    x = *output;
    outer.adopt(x);
  }
  REMAT_RETURN_IF_ERROR(device.synchronize());
  return result;
}

}  // namespace remat::gpu
