#pragma once
// Internal to the exec stage: the interpreter's tensor program, compiled from the op sequence
// (interpreter_program.cpp): which version of x, E, d and G each op reads and writes, and how many
// readers each version has. The interpreter (interpreter.cpp) runs it.
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/exec/device.hpp"
#include "remat/memory/plan.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat::program {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint32_t kInput = kNone - 1;  // the static x0

struct TensorMeta {
  std::uint64_t bytes = 0;
  // x, E, d; W: a weight gradient (GradMode::OnBackward), held to the step's end; w: B's fresh
  // gradient (GradMode::Static), added into the static G(l) and freed after B
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
  // A tied head's table gradient as PyTorch's autograd holds it (memory-model.md 12.2): written by
  // the head's B, read and freed by B(1). The kernels add into the static table gradient instead;
  // the buffer is held so that a run holds what PyTorch holds.
  std::uint32_t sharedGradIn = kNone, sharedGradOut = kNone;
  // Writes: x(l) (F, R) or d(l-1) (B) or d(n) (SEED); E(l) (keep-mode F, R, RE); the weight
  // gradient G(l) and, for a tied head's B(n), the shared table's G(1) (B under
  // GradMode::OnBackward, when this B is the first to use those parameters).
  std::uint32_t output = kNone, extraOut = kNone, weightGrad = kNone, sharedWeightGrad = kNone;
  std::uint32_t freshGrad = kNone;  // B's fresh gradient under GradMode::Static
  bool freshPerOp = false;          // ... a block's, which the device fills one inner op at a time
  std::uint64_t workspaceBytes = 0;
  std::uint64_t transientBytes = 0;  // RE's copy of x(c)

  std::array<std::uint32_t, 6> reads() const { return {input, gradOutput, bwdInput, bwdOutput, extraIn, sharedGradIn}; }
  std::array<std::uint32_t, 6> writes() const {
    return {output, extraOut, weightGrad, sharedWeightGrad, sharedGradOut, freshGrad};
  }
};

struct Program {
  std::vector<OpProgram> ops;
  std::vector<TensorMeta> tensors;
  std::vector<double> opCost;               // RunProgress's modelled cost of each op
  double stepCost = 0.0;                    // their sum
  std::vector<std::uint32_t> weightGradOf;  // by layer: G(l)'s tensor (kNone: static or p = 0)
};

inline bool isTensor(std::uint32_t id) { return id != kNone && id != kInput; }

// Internal error when an op reads a tensor no earlier op wrote (a bug in buildOpSequence).
Result<Program> compile(const Chain& chain, const Plan& plan);

}  // namespace remat::program
