// The schedule interpreter. It compiles the op sequence into a tensor program of its own (which
// version of x, E and d each op reads and writes, and how many readers each version has) and
// then runs it: allocate an op's writes, workspace and transient copy; run the kernel; free the
// scratch, every read whose reader count drops to zero and every write nobody reads. The
// allocator's high-water mark over that window is the op's measured footprint.
#include "remat/exec/interpreter.hpp"

#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <span>

#include "remat/exec/counter_rng.hpp"
#include "remat/memory/simulator.hpp"

namespace remat {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint32_t kInput = kNone - 1;  // the static x0

struct TensorMeta {
  std::uint64_t bytes = 0;
  char kind = 'x';
  std::size_t layer = 0;
  std::uint32_t readers = 0;
};

struct OpProgram {
  Op op;
  ForwardMode mode = ForwardMode::Discard;
  // Reads: x(l-1) (F, R, RE; x(n) for SEED), and for B: d(l), x(l-1), x(l), E(l).
  std::uint32_t input = kNone;
  std::uint32_t gradOutput = kNone, bwdInput = kNone, bwdOutput = kNone, extraIn = kNone;
  // Writes: x(l) (F, R) or d(l-1) (B) or d(n) (SEED); E(l) (keep-mode F, R, RE).
  std::uint32_t output = kNone, extraOut = kNone;
  std::uint64_t workspaceBytes = 0;
  std::uint64_t transientBytes = 0;  // RE's copy of x(c)

  std::array<std::uint32_t, 5> reads() const { return {input, gradOutput, bwdInput, bwdOutput, extraIn}; }
};

struct Program {
  std::vector<OpProgram> ops;
  std::vector<TensorMeta> tensors;
};

bool isTensor(std::uint32_t id) { return id != kNone && id != kInput; }

// The op sequence as a tensor program: each op reads the newest version written before it.
Result<Program> compile(const Chain& chain, const Plan& plan) {
  const std::size_t n = chain.size();
  const std::size_t lastSegmentStart = plan.checkpoints.empty() ? 0 : plan.checkpoints.back();
  Program program;
  std::vector<std::uint32_t> x(n + 1, kNone), extra(n + 1, kNone), grad(n + 1, kNone);
  x[0] = kInput;
  auto tensor = [&](std::uint64_t bytes, char kind, std::size_t layer) {
    program.tensors.push_back({bytes, kind, layer, 0});
    return static_cast<std::uint32_t>(program.tensors.size() - 1);
  };
  for (const Op& op : buildOpSequence(chain, plan)) {
    OpProgram p;
    p.op = op;
    const std::size_t l = op.layer;
    switch (op.kind) {
      case OpKind::F:
      case OpKind::R: {
        const LayerNumbers& m = chain.at(l);
        const bool keep = op.kind == OpKind::R || l > lastSegmentStart;
        p.mode = keep ? ForwardMode::Keep : ForwardMode::Discard;
        p.input = x[l - 1];
        p.output = x[l] = tensor(m.outBytes, 'x', l);
        if (keep && m.extraBytes > 0) p.extraOut = extra[l] = tensor(m.extraBytes, 'E', l);
        p.workspaceBytes = m.fwdWorkspaceBytes;
        break;
      }
      case OpKind::RE: {
        const LayerNumbers& m = chain.at(l);
        p.mode = ForwardMode::Keep;
        p.input = x[l - 1];
        p.extraOut = extra[l] = tensor(m.extraBytes, 'E', l);
        p.workspaceBytes = m.fwdWorkspaceBytes;
        p.transientBytes = m.outBytes;
        break;
      }
      case OpKind::Seed:
        p.input = x[n];
        p.output = grad[n] = tensor(chain.at(n).outBytes, 'd', n);
        break;
      case OpKind::B: {
        const LayerNumbers& m = chain.at(l);
        p.gradOutput = grad[l];
        if (m.needsInput) p.bwdInput = x[l - 1];
        if (m.needsOutput) p.bwdOutput = x[l];
        if (m.extraBytes > 0) p.extraIn = extra[l];
        if (l > 1) p.output = grad[l - 1] = tensor(chain.at(l - 1).outBytes, 'd', l - 1);
        p.workspaceBytes = m.bwdWorkspaceBytes;
        if (p.gradOutput == kNone || (m.needsInput && p.bwdInput == kNone) || (m.needsOutput && p.bwdOutput == kNone) ||
            (m.extraBytes > 0 && p.extraIn == kNone))
          return Status::internal("B(" + std::to_string(l) + ") reads a tensor no earlier op wrote");
        break;
      }
    }
    if (op.kind != OpKind::B && p.input == kNone)
      return Status::internal(opLabel(op) + " reads an unwritten x");
    for (std::uint32_t id : p.reads())
      if (isTensor(id)) ++program.tensors[id].readers;
    program.ops.push_back(p);
  }
  return program;
}

using Clock = std::chrono::steady_clock;

double microseconds(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

struct Interpreter::State {
  Chain chain;
  Device* device = nullptr;
  InterpreterOptions options;
  DeviceBuffer input;
  DeviceBuffer labels;
  std::vector<DeviceBuffer> params;  // index l; invalid when p = 0
  std::vector<DeviceBuffer> grads;
  std::uint64_t staticBytes = 0;
  std::uint64_t labelBytes = 0;
  // Host copy for digests, kept between runs so large downloads do not fault in fresh pages.
  std::vector<std::byte> host;

  ~State() {
    if (device == nullptr) return;
    DeviceAllocator& a = device->allocator();
    auto drop = [&](DeviceBuffer& b) {
      if (b.valid()) (void)a.release(b);
      b = {};
    };
    drop(input);
    drop(labels);
    for (auto& b : params) drop(b);
    for (auto& b : grads) drop(b);
  }

  std::span<std::byte> hostSpan(std::uint64_t bytes) {
    if (host.size() < bytes) host.resize(bytes);
    return {host.data(), static_cast<std::size_t>(bytes)};
  }

  Result<DeviceBuffer> allocateStatic(std::uint64_t bytes, TensorRole role, std::size_t layer,
                                      std::span<const std::byte> data) {
    auto buffer = device->allocator().allocate(bytes);
    if (!buffer) return buffer.status().withContext("allocating the static tensors");
    if (role == TensorRole::Raw) {
      REMAT_RETURN_IF_ERROR(device->fill(*buffer, 0));
    } else {
      // Upload before handing the buffer out, so a failure leaves nothing half-initialised.
      Status status = device->upload(*buffer, role, layer, data);
      if (!status) {
        (void)device->allocator().release(*buffer);
        return status;
      }
    }
    return buffer;
  }
};

Interpreter::Interpreter(std::unique_ptr<State> state) : state_(std::move(state)) {}
Interpreter::~Interpreter() = default;

const Chain& Interpreter::chain() const { return state_->chain; }
std::uint64_t Interpreter::staticBytes() const { return state_->staticBytes; }

Result<std::unique_ptr<Interpreter>> Interpreter::create(const Chain& chain, Device& device,
                                                         const InterpreterOptions& options) {
  if (chain.size() == 0) return Status::invalid("chain '" + chain.name + "' has no layers");
  REMAT_RETURN_IF_ERROR(device.prepare(chain));
  const std::size_t n = chain.size();
  for (std::size_t l = 1; l <= n; ++l) {
    const LayerNumbers& m = chain.at(l);
    for (Pass pass : {Pass::Forward, Pass::Backward}) {
      auto needed = device.requiredWorkspaceBytes(l, pass);
      if (!needed) return needed.status();
      const std::uint64_t given = pass == Pass::Forward ? m.fwdWorkspaceBytes : m.bwdWorkspaceBytes;
      if (*needed > given)
        return Status::invalid("layer " + std::to_string(l) + " ('" + chain.layers[l - 1].name + "'): the " +
                               device.name() + " kernels need " + std::to_string(*needed) + " bytes of " +
                               (pass == Pass::Forward ? "forward" : "backward") + " workspace, the chain gives " +
                               (pass == Pass::Forward ? "wf" : "wb") + " = " + std::to_string(given) +
                               " (profile the chain on this device)");
    }
  }
  auto state = std::make_unique<State>();
  state->chain = chain;
  state->device = &device;
  state->options = options;
  state->params.resize(n + 1);
  state->grads.resize(n + 1);
  DeviceAllocator& allocator = device.allocator();
  const std::uint64_t before = allocator.bytesHeld();

  auto input = state->allocateStatic(chain.inputBytes, TensorRole::Activation, 0, initialInput(chain, options.seed));
  if (!input) return input.status();
  state->input = *input;
  for (std::size_t l = 1; l <= n; ++l) {
    const std::uint64_t p = chain.at(l).paramBytes;
    if (p == 0) continue;
    std::span<std::byte> values = state->hostSpan(p);
    REMAT_RETURN_IF_ERROR(writeInitialParameters(chain, l, options.seed, values));
    auto params = state->allocateStatic(p, TensorRole::Parameters, l, values);
    if (!params) return params.status();
    state->params[l] = *params;
    auto grads = state->allocateStatic(p, TensorRole::Raw, l, {});
    if (!grads) return grads.status();
    state->grads[l] = *grads;
  }
  state->staticBytes = allocator.bytesHeld() - before;

  std::vector<std::int32_t> labels = options.labels.empty() ? initialLabels(chain, options.seed) : options.labels;
  const ChainLayer& last = chain.layers.back();
  if (last.kind != LayerKind::Abstract && !last.outputShape.empty()) {
    if (labels.size() != static_cast<std::size_t>(last.outputShape[0]))
      return Status::invalid(std::to_string(labels.size()) + " labels given for a batch of " +
                             std::to_string(last.outputShape[0]));
    std::vector<std::byte> bytes(labels.size() * sizeof(std::int32_t));
    std::memcpy(bytes.data(), labels.data(), bytes.size());
    const std::uint64_t beforeLabels = allocator.bytesHeld();
    auto buffer = state->allocateStatic(bytes.size(), TensorRole::Labels, 0, bytes);
    if (!buffer) return buffer.status();
    state->labels = *buffer;
    state->labelBytes = allocator.bytesHeld() - beforeLabels;
  }
  return std::unique_ptr<Interpreter>(new Interpreter(std::move(state)));
}

Result<RunResult> Interpreter::run(const Plan& plan, const RunOptions& options) {
  State& s = *state_;
  const Chain& chain = s.chain;
  Device& device = *s.device;
  DeviceAllocator& allocator = device.allocator();
  REMAT_RETURN_IF_ERROR(validatePlan(plan, chain.size()));
  if (options.steps < 1) return Status::invalid("steps must be at least 1, got " + std::to_string(options.steps));
  auto program = compile(chain, plan);
  if (!program) return program.status();
  const std::vector<OpProgram>& ops = program->ops;

  RunResult result;
  result.staticBytes = s.staticBytes;
  result.labelBytes = s.labelBytes;
  std::vector<std::string> layerNames;
  for (const ChainLayer& layer : chain.layers) layerNames.push_back(layer.name);

  for (int step = 0; step < options.steps; ++step) {
    const bool lastStep = step + 1 == options.steps;
    const bool digests = options.captureDigests && lastStep;
    const std::uint64_t stepSeed = rng::streamKey(s.options.seed, rng::Purpose::Step, static_cast<std::uint64_t>(step));
    const auto stepStart = Clock::now();
    for (const DeviceBuffer& g : s.grads)
      if (g.valid()) REMAT_RETURN_IF_ERROR(device.fill(g, 0));
    const std::uint64_t baseline = allocator.bytesHeld();

    Timeline timeline;
    timeline.planner = options.planner;
    timeline.source = device.name();
    timeline.run = step;
    timeline.layerNames = layerNames;
    timeline.staticBytes = s.staticBytes;
    timeline.entries.reserve(ops.size());

    std::vector<DeviceBuffer> buffers(program->tensors.size());
    std::vector<std::uint32_t> readers(program->tensors.size());
    for (std::size_t t = 0; t < readers.size(); ++t) readers[t] = program->tensors[t].readers;
    DeviceBuffer workspace, transient;
    // Frees whatever is still held after a failure, so the device is left as it was found.
    auto abandon = [&](Status status) -> Status {
      for (DeviceBuffer& b : buffers)
        if (b.valid()) (void)allocator.release(b);
      if (workspace.valid()) (void)allocator.release(workspace);
      if (transient.valid()) (void)allocator.release(transient);
      return status.withContext("step " + std::to_string(step));
    };
    auto buffer = [&](std::uint32_t id) -> DeviceBuffer {
      if (id == kInput) return s.input;
      return isTensor(id) ? buffers[id] : DeviceBuffer{};
    };
    auto allocate = [&](std::uint64_t bytes, DeviceBuffer& out) -> Status {
      auto b = allocator.allocate(bytes);
      if (!b) return b.status();
      out = *b;
      return Status::ok();
    };

    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpProgram& p = ops[i];
      const std::size_t l = p.op.layer;
      allocator.resetPeak();
      const auto start = Clock::now();
      for (std::uint32_t id : {p.output, p.extraOut})
        if (isTensor(id)) {
          Status st = allocate(program->tensors[id].bytes, buffers[id]);
          if (!st) return abandon(st.withContext(opLabel(p.op)));
        }
      if (p.workspaceBytes > 0) {
        Status st = allocate(p.workspaceBytes, workspace);
        if (!st) return abandon(st.withContext(opLabel(p.op) + " workspace"));
      }
      if (p.transientBytes > 0 || p.op.kind == OpKind::RE) {
        Status st = allocate(p.transientBytes, transient);
        if (!st) return abandon(st.withContext(opLabel(p.op) + " transient x"));
      }

      Status status;
      switch (p.op.kind) {
        case OpKind::F:
        case OpKind::R:
        case OpKind::RE: {
          ForwardCall call;
          call.layer = l;
          call.mode = p.mode;
          call.input = buffer(p.input);
          call.output = p.op.kind == OpKind::RE ? transient : buffer(p.output);
          call.extra = buffer(p.extraOut);
          call.workspace = workspace;
          call.params = s.params[l];
          call.seed = stepSeed;
          status = device.forward(call);
          break;
        }
        case OpKind::Seed: {
          SeedCall call;
          call.logits = buffer(p.input);
          call.labels = s.labels;
          call.gradLogits = buffer(p.output);
          call.seed = stepSeed;
          status = device.lossSeed(call);
          break;
        }
        case OpKind::B: {
          BackwardCall call;
          call.layer = l;
          call.gradOutput = buffer(p.gradOutput);
          call.input = buffer(p.bwdInput);
          call.output = buffer(p.bwdOutput);
          call.extra = buffer(p.extraIn);
          call.gradInput = buffer(p.output);
          call.workspace = workspace;
          call.params = s.params[l];
          call.paramGrads = s.grads[l];
          call.seed = stepSeed;
          status = device.backward(call);
          break;
        }
      }
      if (status) status = device.synchronize();
      if (!status) return abandon(status.withContext(opLabel(p.op)));
      const auto kernelEnd = Clock::now();

      if (digests) {
        for (std::uint32_t id : {p.output, p.extraOut}) {
          if (!isTensor(id)) continue;
          const TensorMeta& meta = program->tensors[id];
          const TensorRole role = meta.kind == 'E' ? TensorRole::Extra : TensorRole::Activation;
          std::span<std::byte> bytes = s.hostSpan(meta.bytes);
          Status st = device.download(buffers[id], role, meta.layer, bytes);
          if (!st) return abandon(st.withContext(opLabel(p.op) + " digest"));
          result.digests.push_back({i, p.op, meta.kind, meta.layer, checksumBytes(bytes)});
        }
      }

      const auto freeStart = Clock::now();
      auto release = [&](DeviceBuffer& b) -> Status {
        Status st = allocator.release(b);
        b = {};
        return st;
      };
      Status freed;
      if (workspace.valid() && freed) freed = release(workspace);
      if (transient.valid() && freed) freed = release(transient);
      for (std::uint32_t id : p.reads())
        if (freed && isTensor(id) && --readers[id] == 0) freed = release(buffers[id]);
      for (std::uint32_t id : {p.output, p.extraOut})
        if (freed && isTensor(id) && program->tensors[id].readers == 0) freed = release(buffers[id]);
      if (!freed) return abandon(freed.withContext(opLabel(p.op)));
      const auto end = Clock::now();

      TimelineEntry entry;
      entry.op = p.op;
      entry.footprintBytes = allocator.peakBytes() - baseline;
      entry.liveAfterBytes = allocator.bytesHeld() - baseline;
      entry.timeUs = microseconds(kernelEnd - start) + microseconds(end - freeStart);
      timeline.entries.push_back(entry);
    }
    if (allocator.bytesHeld() != baseline)
      return abandon(Status::internal("the step ended with " + std::to_string(allocator.bytesHeld() - baseline) +
                                      " dynamic bytes still held"));
    result.stepSeconds.push_back(std::chrono::duration<double>(Clock::now() - stepStart).count());
    result.timelines.push_back(std::move(timeline));
  }

  if (options.digestGradients) {
    result.parameterGradientDigests.assign(chain.size(), 0);
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      if (!s.grads[l].valid()) continue;
      auto digest = device.checksum(s.grads[l]);
      if (!digest) return digest.status();
      result.parameterGradientDigests[l - 1] = *digest;
    }
  }
  if (options.captureGradients) {
    result.parameterGradients.resize(chain.size());
    for (std::size_t l = 1; l <= chain.size(); ++l) {
      if (!s.grads[l].valid()) continue;
      std::vector<std::byte>& bytes = result.parameterGradients[l - 1];
      bytes.resize(s.grads[l].bytes);
      REMAT_RETURN_IF_ERROR(device.download(s.grads[l], TensorRole::Parameters, l, bytes));
    }
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
