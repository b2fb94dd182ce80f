#include "remat/memory/timeline.hpp"

namespace remat {

std::string_view opName(OpKind kind) {
  switch (kind) {
    case OpKind::F: return "F";
    case OpKind::Seed: return "SEED";
    case OpKind::R: return "R";
    case OpKind::RE: return "RE";
    case OpKind::B: return "B";
    case OpKind::Step: return "STEP";
  }
  return "?";
}

std::string_view phaseName(Phase phase) {
  switch (phase) {
    case Phase::Forward: return "forward";
    case Phase::Recompute: return "recompute";
    case Phase::Backward: return "backward";
    case Phase::Step: return "step";
  }
  return "?";
}

std::string opLabel(const Op& op) {
  if (!op.hasLayer()) return std::string(opName(op.kind));
  return std::string(opName(op.kind)) + "(" + std::to_string(op.layer) + ")";
}

std::string opLabel(const Op& op, const std::vector<std::string>& layerNames) {
  std::string label = opLabel(op);
  if (op.hasLayer() && op.layer >= 1 && op.layer <= layerNames.size() && !layerNames[op.layer - 1].empty())
    label += " " + layerNames[op.layer - 1];
  return label;
}

// SEED starts the backward pass: it writes the first gradient. STEP is a phase of its own, as
// PyTorch's optimizer.step() is a call of its own after loss.backward().
Phase Op::phase() const {
  switch (kind) {
    case OpKind::F: return Phase::Forward;
    case OpKind::R:
    case OpKind::RE: return Phase::Recompute;
    case OpKind::Seed:
    case OpKind::B: return Phase::Backward;
    case OpKind::Step: return Phase::Step;
  }
  return Phase::Forward;
}

std::uint64_t Timeline::dynamicPeakBytes() const {
  std::uint64_t peak = 0;
  for (const auto& e : entries) peak = e.footprintBytes > peak ? e.footprintBytes : peak;
  return peak;
}

std::size_t Timeline::peakIndex() const {
  std::size_t index = 0;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (entries[i].footprintBytes > entries[index].footprintBytes) index = i;
  return index;
}

}  // namespace remat
