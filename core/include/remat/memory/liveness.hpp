#pragma once
// Which tensors are alive during each op of a plan's step (docs/memory-model.md sections 2-3), built
// from the same tensor graph the simulator sweeps (which reports only the sums). The explorer uses
// it to say what is alive at the peak and when each checkpoint is stored and freed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat {

struct TensorLife {
  // WeightGradient: G(l), the parameter gradient B(l) allocates under GradMode::OnBackward (alive
  // to the step's end), or its fresh gradient under GradMode::Static (freed after B(l)).
  enum class Kind { Activation, Gradient, Extra, WeightGradient };
  Kind kind = Kind::Activation;
  std::size_t layer = 0;  // x(l), d(l) or E(l)
  std::uint64_t bytes = 0;
  std::size_t writer = 0;                 // op index that allocates it
  std::optional<std::size_t> lastReader;  // op index after which it is freed; none: freed after writer
  std::size_t freedAfter() const { return lastReader ? *lastReader : writer; }
};

struct LivenessTrace {
  std::vector<Op> ops;
  std::vector<TensorLife> tensors;          // in allocation order
  std::vector<std::uint64_t> scratchBytes;  // per op: workspace, plus the transient copy of RE

  // Tensors alive during op (allocated at or before it, freed at or after it), in allocation order.
  std::vector<std::size_t> aliveDuring(std::size_t op) const;
  std::uint64_t footprint(std::size_t op) const;  // alive tensors + scratch: the simulator's footprint
  // Per op (ops.size() values), the bytes of the tensors of this kind alive during it; O(ops +
  // tensors). The explorer draws the weight gradients' growth during backward with it.
  std::vector<std::uint64_t> bytesAlivePerOp(TensorLife::Kind kind) const;
};

// The plan must be valid for the chain.
LivenessTrace traceLiveness(const Chain& chain, const Plan& plan);

// The simulation of a plan (simulate()) and its liveness trace from one op sequence and one tensor
// graph: what the explorer shows of the plan it holds, computed once per edit. `liveness` is
// replaced, and left empty when the simulation fails.
Result<Simulation> simulateWithLiveness(const Chain& chain, const Plan& plan, LivenessTrace& liveness);

// How many op sequences this thread has built (buildOpSequence, simulator.hpp): what the tests and
// the benchmark of "each result once" count (one per checkpoint drag in the explorer).
std::uint64_t opSequenceBuildCount();

// "x12", "dx12", "E12", "dW12": the model's names of the tensors.
std::string tensorName(const TensorLife& tensor);

// When each checkpoint's kept output is allocated (its forward op) and freed (its last reader).
struct CheckpointLife {
  std::size_t layer = 0;
  std::size_t storedOp = 0;
  std::size_t freedOp = 0;
};
std::vector<CheckpointLife> checkpointLives(const LivenessTrace& trace, const Plan& plan);

}  // namespace remat
