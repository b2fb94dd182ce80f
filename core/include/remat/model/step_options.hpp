#pragma once
// What the training step does besides forward and backward (docs/memory-model.md section 11): the
// optimizer, whether it runs its foreach (multi-tensor) implementation, and when the weight
// gradients exist. One place for the options, their names and what they cost in bytes.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"

namespace remat {

struct Chain;
struct ChainLayer;

enum class OptimizerKind { None, Sgd, Momentum, Adam, AdamW };
// When the weight gradients exist and how a layer's backward adds into them (section 11.2):
// - InPlace: static buffers the backward kernels add into directly: the paper's model (sections 1
//   to 10) and core's default, what a framework with fused gradient accumulation does.
// - Static: PyTorch's zero_grad(set_to_none=False): static buffers too, but each B(l) first makes
//   its gradient in a fresh buffer of p(l) bytes, which AccumulateGrad adds in and frees.
// - OnBackward: zero_grad(set_to_none=True), PyTorch 2's default: B(l)'s fresh buffer becomes G(l),
//   alive until the step's end.
enum class GradMode { InPlace, Static, OnBackward };
// The step's dtypes (memory-model.md section 11.7): float32, the whole model in half (the chain
// file's dtype), or torch.autocast in half around float32 master weights.
enum class Precision { Fp32, Bf16, Fp16, Bf16Mixed, Fp16Mixed };

// Core's defaults (none, foreach on, in-place) are the model before section 11: static memory
// a(0) + 2P, no optimizer step; the front ends default to kPyTorchDefaultStep instead.
struct StepOptions {
  OptimizerKind optimizer = OptimizerKind::None;
  bool foreach = true;
  GradMode grads = GradMode::InPlace;
  // Set together with the layer numbers it changes: withPrecision / withStepOptions
  // (remat/model/precision.hpp); buildChain sets it from the chain file's dtype.
  Precision precision = Precision::Fp32;
  bool operator==(const StepOptions&) const = default;
};

// The step a PyTorch 2 training loop takes unless told otherwise, and the front ends' default (the
// `remat` commands, the explorer): AdamW (the usual choice for today's networks; the issue's
// "what a PyTorch 2 user gets"), its foreach implementation (torch.optim's default on CUDA) and
// zero_grad()'s set_to_none=True (gradients made by each layer's backward, freed after the step).
inline constexpr StepOptions kPyTorchDefaultStep{OptimizerKind::AdamW, true, GradMode::OnBackward};

std::string_view optimizerName(OptimizerKind kind);  // "none", "sgd", "momentum", "adam", "adamw"
std::span<const OptimizerKind> optimizerKinds();     // every kind, in the order messages list them
// InvalidInput naming the value and the valid ones.
Result<OptimizerKind> parseOptimizer(std::string_view name);
std::string_view gradModeName(GradMode mode);  // "in-place", "static", "on-backward"
Result<GradMode> parseGradMode(std::string_view name);
std::span<const GradMode> gradModes();  // static, on-backward, in-place: the order the explorer lists them
// In-place and static: the gradients are part of the static block (P bytes the whole step).
inline bool hasStaticGradients(GradMode mode) { return mode != GradMode::OnBackward; }
Result<bool> parseForeach(std::string_view name);     // "on" / "off"
std::string_view precisionName(Precision precision);  // "fp32", "bf16", "fp16", "bf16-mixed", "fp16-mixed"
std::span<const Precision> precisions();              // every precision, in the order messages list them
Result<Precision> parsePrecision(std::string_view name);
inline bool isMixedPrecision(Precision p) { return p == Precision::Bf16Mixed || p == Precision::Fp16Mixed; }
// "adamw, foreach on, gradients on backward" (", bf16-mixed" appended when not fp32).
std::string describeStepOptions(const StepOptions& options);

// Bytes of optimizer state per parameter byte in the steady state (second and later steps):
// 0, 0, 1 (momentum_buffer), 2 (exp_avg, exp_avg_sq), 2.
std::uint64_t optimizerStateFactor(OptimizerKind kind);

// The static block of section 11.1, by part. total() is Chain::staticBytes().
struct StaticBreakdown {
  std::uint64_t inputBytes = 0;           // a(0)
  std::uint64_t labelBytes = 0;           // the loss's int64 labels: labelCount() * 8 (0 for an abstract chain)
  std::uint64_t weightBytes = 0;          // P
  std::uint64_t gradientBytes = 0;        // P under in-place and static gradients, else 0
  std::uint64_t optimizerStateBytes = 0;  // S
  std::uint64_t total() const { return inputBytes + labelBytes + weightBytes + gradientBytes + optimizerStateBytes; }
};
StaticBreakdown staticBreakdown(const Chain& chain);
// The parts in words: "(input + labels + parameters + parameter gradients)" (core's default),
// "(input + labels + parameters + optimizer state)" (gradients on backward, Adam), ...; no
// "labels" for a chain without them (an abstract last layer).
std::string describeStaticParts(const Chain& chain);

// The bytes of layer l's parameter tensors in PyTorch's order (ChainLayer::paramTensors in the
// layer's parameter dtype), summing to p(l); one tensor of p(l) bytes where the kind does not split
// them or the split does not add up; empty for p(l) = 0.
std::vector<std::uint64_t> paramTensorBytes(const ChainLayer& layer);

// The optimizer step's scratch (section 11.3): P for foreach Adam/AdamW; for their single-tensor
// loop the max over parameter tensors t, in order, of bytes(previous tensor) + 2 bytes(t) (the
// previous tensor's denominator, t's square root and quotient); 0 for SGD and momentum.
std::uint64_t optimizerScratchBytes(const Chain& chain);

// The hyperparameters the executors update with: PyTorch's defaults (torch.optim), with lr 1e-3
// for every optimizer (SGD's default since PyTorch 2.2) and momentum 0.9.
struct OptimizerHyperparameters {
  static constexpr float kLearningRate = 1e-3f;
  static constexpr float kMomentum = 0.9f;
  static constexpr float kBeta1 = 0.9f;
  static constexpr float kBeta2 = 0.999f;
  static constexpr float kEpsilon = 1e-8f;
  static constexpr float kAdamWWeightDecay = 1e-2f;
};

// True when the op sequence ends in a STEP op (every optimizer but none).
inline bool hasOptimizerStep(const StepOptions& options) { return options.optimizer != OptimizerKind::None; }

// The layer whose parameters layer l reads besides its own and adds its gradient into: 1 for a
// tied lm_head (its weight is the token embedding's table), 0 for every other layer.
std::size_t sharedParamsLayer(const Chain& chain, std::size_t l);

// Under GradMode::OnBackward, index l (1..n; size n + 1): the layer whose backward allocates G(l),
// the first backward that uses l's parameters (section 11.2). That is B(l), except for a table a
// later layer shares: a tied head's B(n) makes the token embedding's G(1) (PyTorch's AccumulateGrad
// keeps the first gradient that reaches the .grad of None, then B(1) adds into it).
std::vector<std::size_t> weightGradientWriters(const Chain& chain);

// The fresh gradient B(l) makes under GradMode::Static before AccumulateGrad adds it into the
// static G(l), alive during B(l) only: p(l) bytes, or for a block its largest inner op's
// parameters (ChainLayer::largestOpParamCount: the executors make one inner op's gradient at a time
// there, as PyTorch does); 0 under the other modes.
std::uint64_t freshGradientBytes(const Chain& chain, std::size_t l);

// The footprint of the STEP op, which no plan changes: the gradients alive before it (all of
// them under OnBackward) plus its scratch; 0 without an optimizer step.
std::uint64_t optimizerStepFootprint(const Chain& chain);

}  // namespace remat
