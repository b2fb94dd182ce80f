// The profiler: one layer at a time, its forward and backward timed through Device::timeMs on
// buffers that OwnedBuffers releases on every exit path.
#include "remat/exec/profiler.hpp"

#include <algorithm>
#include <functional>

#include "remat/base/text.hpp"
#include "remat/base/units.hpp"
#include "remat/exec/device_calls.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/exec/owned_buffers.hpp"
#include "remat/model/precision.hpp"

namespace remat {

double medianOf(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

namespace {

struct ProfileContext {
  const Chain& chain;
  Device& device;
  const ProfileOptions& options;
};

// What a layer's forward writes and its backward reads again; all owned by the layer's scope.
struct ForwardTensors {
  DeviceBuffer output;  // x(l): becomes the next layer's input
  DeviceBuffer extra;
  DeviceBuffer workspace;
  DeviceBuffer params;
  DeviceBuffer paramGrads;
  DeviceBuffer sharedParams;  // a tied lm_head's: the token embedding's table and its gradient
  DeviceBuffer sharedParamGrads;
};

// Runs body once to warm up, then `repeats` times through the device's timer; the median in ms.
Result<double> timeMedianMs(Device& device, int repeats, const std::function<Status()>& body) {
  REMAT_RETURN_IF_ERROR(body());
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    auto ms = device.timeMs(body);
    if (!ms) return ms.status();
    times.push_back(*ms);
  }
  return medianOf(std::move(times));
}

// An empty handle for zero bytes, as the memory model passes no buffer then.
Result<DeviceBuffer> allocateUnlessEmpty(OwnedBuffers& owned, std::uint64_t bytes, const std::string& what) {
  if (bytes == 0) return DeviceBuffer{};
  return owned.allocate(bytes, what);
}

// Layer l's initial parameters and zeroed gradients (nothing for p = 0).
Status allocateParams(const ProfileContext& c, std::size_t l, const std::string& where, OwnedBuffers& owned,
                      DeviceBuffer& params, DeviceBuffer& grads) {
  const std::uint64_t bytes = c.chain.at(l).paramBytes;
  if (bytes == 0) return Status::ok();
  auto values = initialParameters(c.chain, l, c.options.seed);
  if (!values) return values.status();
  auto held = owned.allocate(bytes, where + ", parameters");
  if (!held) return held.status();
  params = *held;
  REMAT_RETURN_IF_ERROR(c.device.upload(params, TensorRole::Parameters, l, *values));
  auto gradients = owned.allocate(bytes, where + ", parameter gradients");
  if (!gradients) return gradients.status();
  grads = *gradients;
  return c.device.fill(grads, 0);
}

Result<ForwardTensors> allocateForward(const ProfileContext& c, std::size_t l, std::uint64_t workspaceBytes,
                                       const std::string& where, OwnedBuffers& owned) {
  const LayerNumbers& m = c.chain.at(l);
  ForwardTensors t;
  auto output = owned.allocate(m.outBytes, where + ", x(l)");
  if (!output) return output.status();
  t.output = *output;
  auto extra = allocateUnlessEmpty(owned, m.extraBytes, where + ", E(l)");
  if (!extra) return extra.status();
  t.extra = *extra;
  auto workspace = allocateUnlessEmpty(owned, workspaceBytes, where + ", forward workspace");
  if (!workspace) return workspace.status();
  t.workspace = *workspace;
  REMAT_RETURN_IF_ERROR(allocateParams(c, l, where, owned, t.params, t.paramGrads));
  if (const std::size_t owner = sharedParamsLayer(c.chain, l); owner > 0)
    REMAT_RETURN_IF_ERROR(allocateParams(c, owner, where + ", shared", owned, t.sharedParams, t.sharedParamGrads));
  return t;
}

Result<double> timeForward(const ProfileContext& c, std::size_t l, DeviceBuffer input, const ForwardTensors& t) {
  ForwardCall call;
  call.layer = l;
  call.mode = ForwardMode::Keep;
  call.input = input;
  call.output = t.output;
  call.extra = t.extra;
  call.workspace = t.workspace;
  call.params = t.params;
  call.sharedParams = t.sharedParams;
  call.seed = c.options.seed;
  return timeMedianMs(c.device, c.options.repeats, [&] { return c.device.forward(call); });
}

// The backward's own buffers (d(l), d(l-1), its workspace) are released before the next layer.
Result<double> timeBackward(const ProfileContext& c, std::size_t l, DeviceBuffer input, const ForwardTensors& t,
                            std::uint64_t workspaceBytes, const std::string& where) {
  const LayerNumbers& m = c.chain.at(l);
  OwnedBuffers owned(c.device.allocator());
  BackwardCall call;
  call.layer = l;
  auto gradOutput = owned.allocate(m.outBytes, where + ", d(l)");
  if (!gradOutput) return gradOutput.status();
  call.gradOutput = *gradOutput;
  REMAT_RETURN_IF_ERROR(c.device.fill(call.gradOutput, 0));
  if (m.needsInput) call.input = input;
  if (m.needsOutput) call.output = t.output;
  call.extra = t.extra;
  auto gradInput = allocateUnlessEmpty(owned, l > 1 ? c.chain.outBytes(l - 1) : 0, where + ", d(l-1)");
  if (!gradInput) return gradInput.status();
  call.gradInput = *gradInput;
  auto workspace = allocateUnlessEmpty(owned, workspaceBytes, where + ", backward workspace");
  if (!workspace) return workspace.status();
  call.workspace = *workspace;
  call.params = t.params;
  call.paramGrads = t.paramGrads;
  call.sharedParams = t.sharedParams;
  call.sharedParamGrads = t.sharedParamGrads;
  call.seed = c.options.seed;
  return timeMedianMs(c.device, c.options.repeats, [&] { return c.device.backward(call); });
}

// Profiles layer l on `input` (x(l-1)); its x(l) stays in `owned` and is returned in `output`.
Result<LayerProfile> profileLayer(const ProfileContext& c, std::size_t l, DeviceBuffer input, OwnedBuffers& owned,
                                  DeviceBuffer& output) {
  const ChainLayer& layer = c.chain.layers[l - 1];
  const std::string where = "profiling layer " + std::to_string(l) + " ('" + layer.name + "')";
  LayerProfile profile;
  profile.layer = l;
  profile.name = layer.name;
  profile.measured = layer.kind != LayerKind::Abstract;
  auto wf = c.device.requiredWorkspaceBytes(l, Pass::Forward);
  if (!wf) return wf.status().withContext(where);
  auto wb = c.device.requiredWorkspaceBytes(l, Pass::Backward);
  if (!wb) return wb.status().withContext(where);
  // Abstract layers keep their stated workspaces (the kernels fill whatever they are given).
  profile.fwdWorkspaceBytes = profile.measured ? *wf : layer.numbers.fwdWorkspaceBytes;
  profile.bwdWorkspaceBytes = profile.measured ? *wb : layer.numbers.bwdWorkspaceBytes;
  auto tensors = allocateForward(c, l, profile.fwdWorkspaceBytes, where, owned);
  if (!tensors) return tensors.status();
  auto fwdMs = timeForward(c, l, input, *tensors);
  if (!fwdMs) return fwdMs.status().withContext(where + ", forward");
  auto bwdMs = timeBackward(c, l, input, *tensors, profile.bwdWorkspaceBytes, where);
  if (!bwdMs) return bwdMs.status().withContext(where + ", backward");
  profile.fwdMs = *fwdMs;
  profile.bwdMs = *bwdMs;
  auto kernels = c.device.describeLayer(l);
  if (!kernels) return kernels.status().withContext(where);
  profile.kernels = *kernels;
  output = tensors->output;
  return profile;
}

void writeMeasured(const ChainLayer& layer, const LayerProfile& profile, ChainSpec& spec) {
  if (!profile.measured) return;
  LayerSpec& written = spec.layers[layer.specIndex];
  written.hasMeasuredWorkspace = true;
  written.numbers.fwdWorkspaceBytes = profile.fwdWorkspaceBytes;
  written.numbers.bwdWorkspaceBytes = profile.bwdWorkspaceBytes;
  written.hasMeasuredCost = true;
  written.numbers.fwdCost = profile.fwdMs;
  written.numbers.bwdCost = profile.bwdMs;
}

}  // namespace

Status checkAnyPlanCanFit(const Chain& chain, Device& device) {
  std::uint64_t largest = 0;
  for (std::size_t l = 1; l <= chain.size(); ++l) largest = std::max(largest, chain.outBytes(l));
  const std::uint64_t least = chain.staticBytes() + largest;  // buildChain keeps the chain's sums in 64 bits
  auto available = device.availableBytes();
  if (!available) return available.status();
  if (least <= *available) return Status::ok();
  return Status::outOfMemory("no plan of chain " + quoteText(chain.name, 40) + " fits on " + device.name() +
                             ": its static memory and its largest activation alone take " + formatBytes(least) +
                             ", and the device has " + formatBytes(*available) +
                             " available; try a smaller batch or input");
}

namespace {

// The chain of a spec whose workspaces were raised, with the chain's step options. Under a mixed
// precision the rebuild adds autocast's scratch (the half weight gradient) on top of a stated
// workspace (memory-model.md 11.7) while the device's need already includes it: what was added
// beyond `wanted` is taken off the spec and the chain built once more, so each raised layer ends
// at exactly max(the device's need, the chain's own number).
Result<Chain> rebuildWithStep(ChainSpec spec, const Chain& chain, const std::vector<std::size_t>& raised,
                              const std::vector<std::pair<std::uint64_t, std::uint64_t>>& wanted) {
  for (int attempt = 0;; ++attempt) {
    auto built = buildChain(spec);
    if (!built) return built.status();
    auto stepped = withStepOptions(std::move(built).value(), chain.step);
    if (!stepped) return stepped.status();
    bool exact = true;
    for (std::size_t k = 0; k < raised.size(); ++k) {
      const ChainLayer& layer = stepped->layers[raised[k] - 1];
      LayerSpec& written = spec.layers[layer.specIndex];
      const std::uint64_t overF =
          layer.numbers.fwdWorkspaceBytes - std::min(layer.numbers.fwdWorkspaceBytes, wanted[k].first);
      const std::uint64_t overB =
          layer.numbers.bwdWorkspaceBytes - std::min(layer.numbers.bwdWorkspaceBytes, wanted[k].second);
      if (overF == 0 && overB == 0) continue;
      exact = false;
      written.numbers.fwdWorkspaceBytes -= std::min(written.numbers.fwdWorkspaceBytes, overF);
      written.numbers.bwdWorkspaceBytes -= std::min(written.numbers.bwdWorkspaceBytes, overB);
    }
    if (exact || attempt == 1) return stepped;
  }
}

}  // namespace

Result<WorkspaceFit> fitWorkspacesToDevice(const Chain& chain, Device& device) {
  // Preparing the kernels of a huge input takes seconds: a hopeless chain is refused first.
  REMAT_RETURN_IF_ERROR(checkAnyPlanCanFit(chain, device));
  REMAT_RETURN_IF_ERROR(device.prepare(chain));
  WorkspaceFit fit;
  ChainSpec spec = chain.spec;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> wanted;  // per raised layer: wf, wb
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    const ChainLayer& layer = chain.layers[l - 1];
    if (layer.kind == LayerKind::Abstract) continue;
    auto wf = device.requiredWorkspaceBytes(l, Pass::Forward);
    if (!wf) return wf.status();
    auto wb = device.requiredWorkspaceBytes(l, Pass::Backward);
    if (!wb) return wb.status();
    const LayerNumbers& m = layer.numbers;
    if (*wf <= m.fwdWorkspaceBytes && *wb <= m.bwdWorkspaceBytes) continue;
    LayerSpec& written = spec.layers[layer.specIndex];
    written.hasMeasuredWorkspace = true;
    written.numbers.fwdWorkspaceBytes = std::max(*wf, m.fwdWorkspaceBytes);
    written.numbers.bwdWorkspaceBytes = std::max(*wb, m.bwdWorkspaceBytes);
    wanted.emplace_back(written.numbers.fwdWorkspaceBytes, written.numbers.bwdWorkspaceBytes);
    fit.raisedLayers.push_back(l);
  }
  if (fit.raisedLayers.empty()) {
    fit.chain = chain;
    return fit;
  }
  // The step options are not in the spec: they travel with the chain (a precision rebuilds it).
  auto rebuilt = rebuildWithStep(std::move(spec), chain, fit.raisedLayers, wanted);
  if (!rebuilt) return rebuilt.status().withContext("fitting the workspaces of chain '" + chain.name + "'");
  fit.chain = std::move(rebuilt).value();
  return fit;
}

Result<ProfileResult> profileChain(const Chain& chain, Device& device, const ProfileOptions& options) {
  if (options.repeats < 1) return Status::invalid("repeats must be at least 1, got " + std::to_string(options.repeats));
  REMAT_RETURN_IF_ERROR(device.prepare(chain));
  const ProfileContext context{chain, device, options};
  ProfileResult result;
  result.spec = chain.spec;
  result.device = device.describe();
  OwnedBuffers current(device.allocator());  // x(l-1), the input of the layer being profiled
  auto x0 = current.allocate(chain.inputBytes, "the input x0");
  if (!x0) return x0.status();
  REMAT_RETURN_IF_ERROR(device.upload(*x0, TensorRole::Activation, 0, initialInput(chain, options.seed)));
  DeviceBuffer input = *x0;
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    OwnedBuffers layerBuffers(device.allocator());
    DeviceBuffer output;
    auto profile = profileLayer(context, l, input, layerBuffers, output);
    if (!profile) return profile.status();
    writeMeasured(chain.layers[l - 1], *profile, result.spec);
    result.layers.push_back(std::move(*profile));
    // x(l) becomes the next layer's input; x(l-1) goes.
    auto next = layerBuffers.releaseToCaller(output);
    if (!next) return next.status();
    REMAT_RETURN_IF_ERROR(current.adopt(*next));
    REMAT_RETURN_IF_ERROR(current.release(input));
    input = *next;
  }
  REMAT_RETURN_IF_ERROR(device.synchronize());
  return result;
}

}  // namespace remat
