#pragma once
// A timeline is the per-op memory of one training step, predicted (simulator) or measured
// (executor). Both are the same plain value type so every chart and exporter takes either.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remat/model/step_options.hpp"

namespace remat {

// Step is the optimizer step that ends the sequence when the step has an optimizer
// (memory-model.md section 11.3); like SEED it has no layer.
enum class OpKind { F, Seed, R, RE, B, Step };
std::string_view opName(OpKind kind);  // "F", "SEED", "R", "RE", "B", "STEP"

// Step: the optimizer step that ends the training step (memory-model.md section 11.3).
enum class Phase { Forward, Recompute, Backward, Step };
inline constexpr std::size_t kPhaseCount = 4;
std::string_view phaseName(Phase phase);  // "forward", "recompute", "backward", "step"

struct Op {
  OpKind kind = OpKind::F;
  std::size_t layer = 0;  // 1..n; 0 for SEED and STEP
  Phase phase() const;
  bool hasLayer() const { return kind != OpKind::Seed && kind != OpKind::Step; }
  bool operator==(const Op&) const = default;
};

// How every table, message, chart and export names an op: "F(3)", "RE(7)", "SEED", "STEP".
std::string opLabel(const Op& op);
// The label and the layer's name when known: "B(12) features.21" ("SEED" alone).
std::string opLabel(const Op& op, const std::vector<std::string>& layerNames);

struct TimelineEntry {
  Op op;
  std::uint64_t footprintBytes = 0;  // bytes alive during the op (before + writes + workspace)
  std::uint64_t liveAfterBytes = 0;  // bytes alive right after the op
  double timeUs = 0.0;               // wall time of the op (measured), or its modelled duration (predicted)
};

struct Timeline {
  std::string planner;                  // which planner's plan (or "checkpoints")
  std::string source;                   // "predicted", "cpu", "gpu"
  int run = 0;                          // step index for measured runs
  std::vector<std::string> layerNames;  // index l-1 for layer l
  std::uint64_t staticBytes = 0;
  // The step it is a timeline of: optimizer, foreach, gradient mode and precision (memory-model.md
  // section 11). Unknown (nullopt) for a file written without them and for a PyTorch snapshot.
  std::optional<StepOptions> step;
  std::vector<TimelineEntry> entries;

  std::uint64_t dynamicPeakBytes() const;
  std::size_t peakIndex() const;  // first entry at the peak; 0 when empty
};

}  // namespace remat
