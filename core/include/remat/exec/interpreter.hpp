#pragma once
// The schedule interpreter: runs a training step exactly as a plan says (the op sequence of
// buildOpSequence, docs/memory-model.md section 2) on a Device, and measures it. Every tensor is
// allocated through the device's allocator when the op that writes it starts and freed right after
// its last reader, by the interpreter's own reference counts over the op list; per op it records
// the allocator's high-water mark during the op (footprint), the bytes held after it (live-after)
// and its wall time, as a Timeline of source device.name(). With exact kernels, the measured
// timeline equals the simulator's prediction byte for byte.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/exec/device.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat {

struct InterpreterOptions {
  // Seeds the input batch, the parameters (Kaiming-uniform), the labels and the dropout masks.
  std::uint64_t seed = 0;
  // Class labels, one per sample (one per token after lm_head: labelCount()); empty: drawn from the seed.
  std::vector<LabelIndex> labels;
};

// Where a run stands, handed to RunOptions::progress before each op runs.
struct RunProgress {
  int step = 0;  // 0-based
  int steps = 1;
  std::size_t opIndex = 0;      // 0-based, within the step
  std::size_t opCount = 0;      // ops per step
  Op op;                        // the op about to run
  double elapsedSeconds = 0.0;  // since run() started
  // The modelled cost (fwd_cost of F, R and RE ops, bwd_cost of B ops; SEED none) of the ops run so
  // far and of the whole run, all steps: their ratio is the fraction done by the chain's own
  // measure of work (GFLOP, or milliseconds once profiled), steadier than the op count.
  double costDone = 0.0;
  double costTotal = 0.0;

  // costDone / costTotal in [0, 1] (op counts when the chain has no costs).
  double fraction() const;
  // The time left by the rate so far, in seconds; negative while nothing is done to estimate from.
  double secondsLeft() const;
};

struct RunOptions {
  int steps = 1;
  std::string planner = "checkpoints";  // written into the timelines
  // Download the parameter gradients (canonical layout) after the last step.
  bool captureGradients = false;
  // Only a 64-bit digest of each layer's parameter gradients (raw device bytes, so comparable
  // between runs on the same device): cheap bitwise comparisons of large models.
  bool digestGradients = false;
  // Digest every tensor each op writes (downloaded in canonical layout, outside the op's timing):
  // lets tests check that a recompute reproduces the original bit for bit.
  bool captureDigests = false;
  // Checked before every op (and before each step): once it is set, run() stops before the next op
  // and returns Cancelled, after the step has given back every byte it held. Null: never cancelled.
  const std::atomic<bool>* cancel = nullptr;
  // Called on the running thread before every op; keep it cheap (it is outside the op's timing).
  std::function<void(const RunProgress&)> progress = {};
};

struct TensorDigest {
  std::size_t opIndex = 0;
  Op op;
  // 'x' (x(layer)), 'E' (E(layer)), 'd' (d(layer)), 'W' (G(layer), gradients on backward), 'w' (B's
  // fresh gradient of layer, static gradients)
  char tensor = 'x';
  std::size_t layer = 0;
  std::uint64_t digest = 0;
};

struct RunResult {
  std::vector<Timeline> timelines;  // one per step, run = step index, source = the device's name
  std::uint64_t staticBytes = 0;    // measured: x0 + labels + parameters (+ static gradients) + optimizer state
  std::uint64_t labelBytes = 0;     // measured: the int64 labels, a part of staticBytes
  std::vector<double> stepSeconds;  // wall time of each step
  // Per layer (index l-1), the parameter gradients after the last step; empty unless captured.
  std::vector<std::vector<std::byte>> parameterGradients;
  std::vector<std::uint64_t> parameterGradientDigests;  // per layer (index l-1); 0 when p = 0
  std::vector<TensorDigest> digests;                    // of the last step, in op order; empty unless captured
};

// Holds a chain's static tensors (x0, parameters, static gradients, optimizer state, labels) on a device, allocated
// and initialised once, and runs plans over them.
class Interpreter {
 public:
  // Prepares the device for the chain, checks that the chain's workspaces cover what the device's
  // kernels need (InvalidInput naming the layer and the pass otherwise: profile the chain on the
  // device, or fit its workspaces first with fitWorkspacesToDevice, profiler.hpp), and allocates and
  // uploads the static tensors.
  static Result<std::unique_ptr<Interpreter>> create(const Chain& chain, Device& device,
                                                     const InterpreterOptions& options = {});
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Runs options.steps training steps of the plan with the chain's step options (memory-model.md
  // section 11): static parameter gradients are zeroed before each step, gradients made on backward
  // are allocated by their B and freed after the step's last op, and an optimizer's STEP op updates
  // the weights (without one, they stay as initialised and every step computes the same).
  // Cancelled (see RunOptions::cancel) leaves the device holding only the static tensors.
  Result<RunResult> run(const Plan& plan, const RunOptions& options = {});

  const Chain& chain() const;
  std::uint64_t staticBytes() const;

  struct State;

 private:
  explicit Interpreter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// create + run in one call.
Result<RunResult> runPlan(const Chain& chain, const Plan& plan, Device& device, const InterpreterOptions& init = {},
                          const RunOptions& options = {});

// The deterministic initial values the interpreter uploads, in canonical layout (device.hpp):
// x0 uniform in [-1, 1) (random bytes for a byte-only input); conv2d and linear weights
// Kaiming-uniform (bound sqrt(6 / fan_in)) and biases uniform in +-1/sqrt(fan_in); batch-norm
// gamma 1 and beta 0; random bytes for abstract layers. Labels uniform over the classes of x(n).
// Token models: x0 holds token ids (float32 values of whole numbers uniform in [0, vocab)), the
// embedding tables are uniform in [-1, 1), and there is one label per token (labelCount).
std::vector<std::byte> initialInput(const Chain& chain, std::uint64_t seed);
Result<std::vector<std::byte>> initialParameters(const Chain& chain, std::size_t layer, std::uint64_t seed);
// The same into a caller's buffer of exactly p bytes (no allocation: large models).
Status writeInitialParameters(const Chain& chain, std::size_t layer, std::uint64_t seed, std::span<std::byte> out);
std::vector<LabelIndex> initialLabels(const Chain& chain, std::uint64_t seed);

}  // namespace remat
