// The schedule interpreter. It compiles the op sequence into a tensor program of its own (which
// version of x, E and d each op reads and writes, and how many readers each version has) and
// then runs it: allocate an op's writes, workspace and transient copy; run the kernel; free the
// scratch, every read whose reader count drops to zero and every write nobody reads. The
// allocator's high-water mark over that window is the op's measured footprint.
#include "remat/exec/interpreter.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <span>

#include "interpreter_program.hpp"
#include "interpreter_support.hpp"
#include "optimizer_run.hpp"
#include "remat/exec/counter_rng.hpp"
#include "remat/exec/device_calls.hpp"
#include "remat/exec/owned_buffers.hpp"
#include "remat/memory/simulator.hpp"

namespace remat {
namespace {

using program::compile;
using program::isTensor;
using program::kInput;
using program::kNone;
using program::OpProgram;
using program::Program;
using program::TensorMeta;
}  // namespace

struct Interpreter::State {
  Chain chain;
  Device* device = nullptr;
  InterpreterOptions options;
  OwnedBuffer input;
  OwnedBuffer labels;
  std::vector<OwnedBuffer> params;  // index l; holds nothing when p = 0
  std::vector<OwnedBuffer> grads;   // static gradients only (in-place and static GradMode)
  // The optimizer's state (memory-model.md section 11.1), zeroed as torch.zeros_like makes it:
  // momentum_buffer or exp_avg, and exp_avg_sq. PyTorch creates it in the first step; here it
  // exists from the start, so every measured step is the steady state.
  std::vector<OwnedBuffer> state, stateSquare;
  int updates = 0;  // optimizer steps taken: Adam's step count, a host integer as in PyTorch
  std::uint64_t staticBytes = 0;
  std::uint64_t labelBytes = 0;
  // Host copy for digests, kept between runs so large downloads do not fault in fresh pages.
  std::vector<std::byte> host;

  std::span<std::byte> hostSpan(std::uint64_t bytes) {
    if (host.size() < bytes) host.resize(bytes);
    return {host.data(), static_cast<std::size_t>(bytes)};
  }

  // A buffer that is uploaded (zeroed for Raw) before it is handed out, so a failure leaves
  // nothing half-initialised.
  Result<OwnedBuffer> allocateStatic(std::uint64_t bytes, TensorRole role, std::size_t layer,
                                     std::span<const std::byte> data) {
    auto buffer = OwnedBuffer::allocate(device->allocator(), bytes, "allocating the static tensors");
    if (!buffer) return buffer.status();
    if (role == TensorRole::Raw) {
      REMAT_RETURN_IF_ERROR(device->fill(buffer->get(), 0));
    } else {
      REMAT_RETURN_IF_ERROR(device->upload(buffer->get(), role, layer, data));
    }
    return buffer;
  }

  // x0, the labels, and each layer's parameters (initialised) and parameter gradients; sets
  // staticBytes (the labels included, as the model counts them: staticBreakdown).
  Status uploadModel() {
    const std::uint64_t before = device->allocator().bytesHeld();
    auto x0 = allocateStatic(chain.inputBytes, TensorRole::Activation, 0, initialInput(chain, options.seed));
    if (!x0) return x0.status();
    input = std::move(*x0);
    REMAT_RETURN_IF_ERROR(uploadLabels());
    params.resize(chain.size() + 1);
    grads.resize(chain.size() + 1);
    state.resize(chain.size() + 1);
    stateSquare.resize(chain.size() + 1);
    const std::uint64_t stateBuffers = optimizerStateFactor(chain.step.optimizer);
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      const std::uint64_t p = chain.at(l).paramBytes;
      if (p == 0) continue;
      std::span<std::byte> values = hostSpan(p);
      REMAT_RETURN_IF_ERROR(writeInitialParameters(chain, l, options.seed, values));
      auto layerParams = allocateStatic(p, TensorRole::Parameters, l, values);
      if (!layerParams) return layerParams.status();
      params[l] = std::move(*layerParams);
      for (std::vector<OwnedBuffer>* slot : {&grads, &state, &stateSquare}) {
        const bool wanted = slot == &grads ? hasStaticGradients(chain.step.grads)
                                           : (slot == &state ? stateBuffers >= 1 : stateBuffers >= 2);
        if (!wanted) continue;
        auto buffer = allocateStatic(p, TensorRole::Raw, l, {});
        if (!buffer) return buffer.status();
        (*slot)[l] = std::move(*buffer);
      }
    }
    staticBytes = device->allocator().bytesHeld() - before;
    return Status::ok();
  }

  // The int64 labels of a real chain (none for an abstract last layer); sets labelBytes.
  Status uploadLabels() {
    const std::vector<LabelIndex> values = options.labels.empty() ? initialLabels(chain, options.seed) : options.labels;
    const ChainLayer& last = chain.layers.back();
    if (last.kind == LayerKind::Abstract || last.outputShape.empty()) return Status::ok();
    if (values.size() != labelCount(chain))
      return Status::invalid(std::to_string(values.size()) + " labels given for " + std::to_string(labelCount(chain)) +
                             (last.kind == LayerKind::LmHead ? " tokens" : " samples"));
    std::vector<std::byte> bytes(values.size() * sizeof(LabelIndex));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    const std::uint64_t before = device->allocator().bytesHeld();
    auto buffer = allocateStatic(bytes.size(), TensorRole::Labels, 0, bytes);
    if (!buffer) return buffer.status();
    labels = std::move(*buffer);
    labelBytes = device->allocator().bytesHeld() - before;
    return Status::ok();
  }
};

namespace {

using Clock = std::chrono::steady_clock;

double microseconds(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What a run obeys and reports across its steps: the cancel flag and the progress callback.
class RunMonitor {
 public:
  RunMonitor(const RunOptions& options, const Program& program)
      : options_(options), program_(program), start_(Clock::now()) {}

  void beginStep(int step) { step_ = step; }
  // Before op i of the current step: Cancelled once the flag is set, else reports progress.
  Status beforeOp(std::size_t i) {
    const std::size_t count = program_.ops.size();
    if (options_.cancel != nullptr && options_.cancel->load())
      return Status::cancelled("cancelled before op " + std::to_string(i + 1) + " of " + std::to_string(count) + " (" +
                               opLabel(program_.ops[i].op) + ") of step " + std::to_string(step_ + 1) + " of " +
                               std::to_string(options_.steps));
    if (options_.progress) {
      RunProgress progress;
      progress.step = step_;
      progress.steps = options_.steps;
      progress.opIndex = i;
      progress.opCount = count;
      progress.op = program_.ops[i].op;
      progress.elapsedSeconds = seconds(Clock::now() - start_);
      progress.costDone = costDone_;
      progress.costTotal = program_.stepCost * options_.steps;
      options_.progress(progress);
    }
    return Status::ok();
  }
  void afterOp(std::size_t i) { costDone_ += program_.opCost[i]; }

 private:
  const RunOptions& options_;
  const Program& program_;
  const Clock::time_point start_;
  int step_ = 0;
  double costDone_ = 0.0;
};

// One training step of a compiled program. It owns the buffers of the step's dynamic tensors,
// each from the op that writes it until its last reader has run, so whichever way the step ends
// the device is left holding only the static tensors.
class StepRun {
 public:
  // gradients: when set, called with each layer's weight gradient (invalid for p = 0) once the
  // backward pass is done, before the step's last op frees them (GradMode::OnBackward).
  StepRun(Interpreter::State& state, const Program& program, std::uint64_t stepSeed, RunMonitor& monitor,
          std::function<Status(const std::vector<DeviceBuffer>&)> gradients = {})
      : gradients_(std::move(gradients)),
        state_(state),
        monitor_(monitor),
        device_(*state.device),
        allocator_(device_.allocator()),
        program_(program),
        stepSeed_(stepSeed),
        baselineBytes_(allocator_.bytesHeld()),
        buffers_(program.tensors.size()),
        readers_(program.tensors.size()) {
    for (std::size_t t = 0; t < readers_.size(); ++t) readers_[t] = program.tensors[t].readers;
  }

  // The op loop: appends one entry per op to `timeline` and, when `digests` is given, the digest
  // of every tensor each op writes. Internal error when the step leaves dynamic bytes behind.
  Status runOps(Timeline& timeline, std::vector<TensorDigest>* digests) {
    timeline.entries.reserve(program_.ops.size());
    for (std::size_t i = 0; i < program_.ops.size(); ++i) {
      REMAT_RETURN_IF_ERROR(monitor_.beforeOp(i));
      auto entry = runOp(i, digests);
      if (!entry) return entry.status();
      timeline.entries.push_back(*entry);
      monitor_.afterOp(i);
    }
    if (allocator_.bytesHeld() != baselineBytes_)
      return Status::internal("the step ended with " + std::to_string(allocator_.bytesHeld() - baselineBytes_) +
                              " dynamic bytes still held");
    return Status::ok();
  }

 private:
  // Op i from its first allocation to its last release: the allocator's high-water mark over that
  // window is its footprint; its time leaves out the digests.
  Result<TimelineEntry> runOp(std::size_t i, std::vector<TensorDigest>* digests) {
    const OpProgram& p = program_.ops[i];
    allocator_.resetPeak();
    const auto start = Clock::now();
    REMAT_RETURN_IF_ERROR(allocate(p));
    Status status = dispatch(p);
    if (status) status = device_.synchronize();
    if (!status) return status.withContext(opLabel(p.op));
    const auto kernelEnd = Clock::now();
    if (digests != nullptr) {
      Status digested = digestWrites(i, p, *digests);
      if (!digested) return digested.withContext(opLabel(p.op) + " digest");
    }
    const auto freeStart = Clock::now();
    Status freed = releaseFinished(p);
    if (!freed) return freed.withContext(opLabel(p.op));
    const auto end = Clock::now();

    TimelineEntry entry;
    entry.op = p.op;
    entry.footprintBytes = allocator_.peakBytes() - baselineBytes_;
    entry.liveAfterBytes = allocator_.bytesHeld() - baselineBytes_;
    entry.timeUs = microseconds(kernelEnd - start) + microseconds(end - freeStart);
    return entry;
  }

  // The op's writes, its workspace and (RE) the transient x(l), in that order.
  Status allocate(const OpProgram& p) {
    for (std::uint32_t id : p.writes())
      if (isTensor(id)) REMAT_RETURN_IF_ERROR(allocateInto(buffers_[id], program_.tensors[id].bytes, p, ""));
    if (p.workspaceBytes > 0) REMAT_RETURN_IF_ERROR(allocateInto(workspace_, p.workspaceBytes, p, " workspace"));
    if (p.transientBytes > 0 || (p.op.kind == OpKind::RE && !isTensor(p.output)))
      REMAT_RETURN_IF_ERROR(allocateInto(transient_, p.transientBytes, p, " transient x"));
    return Status::ok();
  }

  // The error names the op and `part` only when it fails, keeping string work out of the timing.
  Status allocateInto(OwnedBuffer& slot, std::uint64_t bytes, const OpProgram& p, const char* part) {
    auto buffer = OwnedBuffer::allocate(allocator_, bytes);
    if (!buffer) return buffer.status().withContext(opLabel(p.op) + part);
    slot = std::move(*buffer);
    return Status::ok();
  }

  Status dispatch(const OpProgram& p) {
    switch (p.op.kind) {
      case OpKind::F:
      case OpKind::R:
      case OpKind::RE: return device_.forward(forwardCall(p));
      case OpKind::Seed: return device_.lossSeed(seedCall(p));
      case OpKind::B:
        // A gradient made on backward starts at zero: the kernels add into it.
        for (std::uint32_t id : {p.weightGrad, p.sharedWeightGrad, p.freshGrad})
          if (isTensor(id)) REMAT_RETURN_IF_ERROR(device_.fill(buffers_[id].get(), 0));
        REMAT_RETURN_IF_ERROR(device_.backward(backwardCall(p)));
        // AccumulateGrad's `variable.grad += new_grad` (GradMode::Static; a block's device does it per op).
        if (isTensor(p.freshGrad) && !p.freshPerOp)
          return device_.accumulateGradient(p.op.layer, state_.grads[p.op.layer].get(), buffers_[p.freshGrad].get());
        return Status::ok();
      case OpKind::Step: return detail::runOptimizerStep(device_, state_.chain, state_.updates, optimizerBuffers());
    }
    return Status::internal(opLabel(p.op) + ": unknown op kind");
  }

  ForwardCall forwardCall(const OpProgram& p) const {
    ForwardCall call;
    call.layer = p.op.layer;
    call.mode = p.mode;
    call.input = buffer(p.input);
    // RE's x(l) is a tensor version when B(l) reads it, else the transient buffer.
    call.output = p.op.kind == OpKind::RE && !isTensor(p.output) ? transient_.get() : buffer(p.output);
    call.extra = buffer(p.extraOut);
    call.workspace = workspace_.get();
    call.params = state_.params[p.op.layer].get();
    // A tied lm_head reads the token embedding's table (static, like every parameter).
    if (const std::size_t owner = sharedParamsLayer(state_.chain, p.op.layer); owner > 0)
      call.sharedParams = state_.params[owner].get();
    call.seed = stepSeed_;
    return call;
  }

  SeedCall seedCall(const OpProgram& p) const {
    SeedCall call;
    call.logits = buffer(p.input);
    call.labels = state_.labels.get();
    call.gradLogits = buffer(p.output);
    call.seed = stepSeed_;
    return call;
  }

  BackwardCall backwardCall(const OpProgram& p) const {
    BackwardCall call;
    call.layer = p.op.layer;
    call.gradOutput = buffer(p.gradOutput);
    call.input = buffer(p.bwdInput);
    call.output = buffer(p.bwdOutput);
    call.extra = buffer(p.extraIn);
    call.gradInput = buffer(p.output);
    call.workspace = workspace_.get();
    call.params = state_.params[p.op.layer].get();
    const bool wholeLayerFresh = isTensor(p.freshGrad) && !p.freshPerOp;
    call.paramGrads = wholeLayerFresh ? buffer(p.freshGrad) : weightGradient(p.op.layer);
    if (p.freshPerOp) call.freshParamGrads = buffer(p.freshGrad);
    if (const std::size_t owner = sharedParamsLayer(state_.chain, p.op.layer); owner > 0) {
      call.sharedParams = state_.params[owner].get();
      call.sharedParamGrads = weightGradient(owner);  // static, or made by this B (the first to use it)
    }
    call.seed = stepSeed_;
    return call;
  }

  // G(l): the static buffer, or the one B(l) allocated (GradMode::OnBackward).
  DeviceBuffer weightGradient(std::size_t l) const {
    const std::uint32_t id = program_.weightGradOf[l];
    return isTensor(id) ? buffers_[id].get() : state_.grads[l].get();
  }

  detail::OptimizerBuffers optimizerBuffers() const {
    detail::OptimizerBuffers b;
    const std::size_t n = state_.chain.size();
    for (auto* v : {&b.params, &b.grads, &b.state, &b.stateSquare}) v->resize(n + 1);
    for (std::size_t l = 1; l <= n; ++l) {
      b.params[l] = state_.params[l].get();
      b.grads[l] = weightGradient(l);
      b.state[l] = state_.state[l].get();
      b.stateSquare[l] = state_.stateSquare[l].get();
    }
    return b;
  }

  // Downloaded in canonical layout into the state's host copy, then hashed.
  Status digestWrites(std::size_t i, const OpProgram& p, std::vector<TensorDigest>& digests) {
    for (std::uint32_t id : p.writes()) {
      if (!isTensor(id) || program_.tensors[id].kind == 'S') continue;  // held, never written (a tied head's)
      const TensorMeta& meta = program_.tensors[id];
      const TensorRole role = meta.kind == 'E'                       ? TensorRole::Extra
                              : meta.kind == 'W' || meta.kind == 'w' ? TensorRole::Parameters
                                                                     : TensorRole::Activation;
      std::span<std::byte> bytes = state_.hostSpan(meta.bytes);
      REMAT_RETURN_IF_ERROR(device_.download(buffers_[id].get(), role, meta.layer, bytes));
      digests.push_back({i, p.op, meta.kind, meta.layer, checksumBytes(bytes)});
    }
    return Status::ok();
  }

  // The scratch, every read whose last reader this op was, and every write nobody reads.
  Status releaseFinished(const OpProgram& p) {
    REMAT_RETURN_IF_ERROR(workspace_.release());
    REMAT_RETURN_IF_ERROR(transient_.release());
    for (std::uint32_t id : p.reads())
      if (isTensor(id) && --readers_[id] == 0) REMAT_RETURN_IF_ERROR(buffers_[id].release());
    for (std::uint32_t id : p.writes())
      if (isTensor(id) && program_.tensors[id].readers == 0 && program_.tensors[id].kind != 'W')
        REMAT_RETURN_IF_ERROR(buffers_[id].release());
    if (&p == &program_.ops.back()) return releaseWeightGradients();
    return Status::ok();
  }

  // After the step's last op (STEP, or B(1) without an optimizer): zero_grad(set_to_none=True)
  // drops the gradients made on backward. The caller's sink sees them first.
  Status releaseWeightGradients() {
    const std::size_t n = state_.chain.size();
    if (gradients_) {
      std::vector<DeviceBuffer> byLayer(n + 1);
      for (std::size_t l = 1; l <= n; ++l) byLayer[l] = weightGradient(l);
      REMAT_RETURN_IF_ERROR(gradients_(byLayer));
    }
    for (std::size_t l = 1; l <= n; ++l)
      if (isTensor(program_.weightGradOf[l])) REMAT_RETURN_IF_ERROR(buffers_[program_.weightGradOf[l]].release());
    return Status::ok();
  }

  DeviceBuffer buffer(std::uint32_t id) const {
    if (id == kInput) return state_.input.get();
    return isTensor(id) ? buffers_[id].get() : DeviceBuffer{};
  }

  std::function<Status(const std::vector<DeviceBuffer>&)> gradients_;
  Interpreter::State& state_;
  RunMonitor& monitor_;
  Device& device_;
  DeviceAllocator& allocator_;
  const Program& program_;
  const std::uint64_t stepSeed_;
  const std::uint64_t baselineBytes_;   // the static tensors
  std::vector<OwnedBuffer> buffers_;    // by tensor id; held from the writing op to the last reader
  std::vector<std::uint32_t> readers_;  // by tensor id: the readers still to run
  OwnedBuffer workspace_;
  OwnedBuffer transient_;
};

// Step `step` (static parameter gradients zeroed first): appends its timeline and time to `result` (and,
// when asked, the digests). Errors name the step.
Status runStep(Interpreter::State& s, const Program& program, const RunOptions& options, int step,
               const std::vector<std::string>& layerNames, RunMonitor& monitor, RunResult& result) {
  const bool lastStep = step + 1 == options.steps;
  std::vector<TensorDigest>* digests = options.captureDigests && lastStep ? &result.digests : nullptr;
  const std::uint64_t stepSeed = rng::streamKey(s.options.seed, rng::Purpose::Step, static_cast<std::uint64_t>(step));
  const auto stepStart = Clock::now();
  for (const OwnedBuffer& g : s.grads)
    if (g.valid()) REMAT_RETURN_IF_ERROR(s.device->fill(g.get(), 0));

  Timeline timeline;
  timeline.planner = options.planner;
  timeline.source = s.device->name();
  timeline.run = step;
  timeline.layerNames = layerNames;
  timeline.staticBytes = s.staticBytes;
  timeline.step = s.chain.step;
  monitor.beginStep(step);
  // Gradients made on backward are gone after the step: the last step's are read before that.
  std::function<Status(const std::vector<DeviceBuffer>&)> gradients;
  if (lastStep && s.chain.step.grads == GradMode::OnBackward && (options.captureGradients || options.digestGradients))
    gradients = [&](const std::vector<DeviceBuffer>& grads) {
      return detail::collectGradients(*s.device, s.chain.size(), options, grads, result);
    };
  Status status = StepRun(s, program, stepSeed, monitor, std::move(gradients)).runOps(timeline, digests);
  if (!status) return status.withContext("step " + std::to_string(step));
  result.stepSeconds.push_back(seconds(Clock::now() - stepStart));
  result.timelines.push_back(std::move(timeline));
  return Status::ok();
}

}  // namespace

Interpreter::Interpreter(std::unique_ptr<State> state) : state_(std::move(state)) {}
Interpreter::~Interpreter() = default;

const Chain& Interpreter::chain() const { return state_->chain; }
std::uint64_t Interpreter::staticBytes() const { return state_->staticBytes; }

Result<std::unique_ptr<Interpreter>> Interpreter::create(const Chain& chain, Device& device,
                                                         const InterpreterOptions& options) {
  if (chain.size() == 0) return Status::invalid("chain '" + chain.name + "' has no layers");
  REMAT_RETURN_IF_ERROR(device.prepare(chain));
  REMAT_RETURN_IF_ERROR(detail::checkWorkspaces(chain, device));
  auto state = std::make_unique<State>();
  state->chain = chain;
  state->device = &device;
  state->options = options;
  REMAT_RETURN_IF_ERROR(state->uploadModel());
  return std::unique_ptr<Interpreter>(new Interpreter(std::move(state)));
}

Result<RunResult> Interpreter::run(const Plan& plan, const RunOptions& options) {
  State& s = *state_;
  REMAT_RETURN_IF_ERROR(validatePlan(plan, s.chain.size()));
  if (options.steps < 1) return Status::invalid("steps must be at least 1, got " + std::to_string(options.steps));
  auto program = compile(s.chain, plan);
  if (!program) return program.status();

  RunResult result;
  result.staticBytes = s.staticBytes;
  result.labelBytes = s.labelBytes;
  std::vector<std::string> layerNames;
  for (const ChainLayer& layer : s.chain.layers) layerNames.push_back(layer.name);
  RunMonitor monitor(options, *program);
  for (int step = 0; step < options.steps; ++step)
    REMAT_RETURN_IF_ERROR(runStep(s, *program, options, step, layerNames, monitor, result));
  if (hasStaticGradients(s.chain.step.grads)) {
    std::vector<DeviceBuffer> grads(s.chain.size() + 1);
    for (std::size_t l = 1; l <= s.chain.size(); ++l) grads[l] = s.grads[l].get();
    REMAT_RETURN_IF_ERROR(detail::collectGradients(*s.device, s.chain.size(), options, grads, result));
  }
  return result;
}

Result<RunResult> runPlan(const Chain& chain, const Plan& plan, Device& device, const InterpreterOptions& init,
                          const RunOptions& options) {
  auto interpreter = Interpreter::create(chain, device, init);
  if (!interpreter) return interpreter.status();
  return (*interpreter)->run(plan, options);
}

}  // namespace remat
