#pragma once
// The explorer's one palette: the memory chart, the checkpoint strip and its legend, and the
// message boxes take every colour from here, so one role looks the same wherever it is drawn
// (a checkpoint is teal on the strip and on the chart, the peak red on both). QColor only, no Qt
// Charts types: every GUI room includes it as "common/palette.hpp".
#include <QColor>

#include "remat/memory/timeline.hpp"

namespace remat::ui {

enum class PaletteRole {
  Forward,           // forward ops on the chart
  Recompute,         // recompute ops (R, RE)
  Backward,          // backward ops (SEED, B)
  OptimizerStep,     // the optimizer's STEP op
  WeightGradients,   // weight gradients made by the backward pass (--grads on-backward), under its bars
  RecomputeMark,     // the chart's rug under buckets that hold recompute ops
  Static,            // static memory under the ops: the weights (and all of it in the legend)
  StaticInput,       // static memory's parts, stacked under the ops: the input batch
  StaticGradients,   //   weight gradients that exist for the whole step (--grads static)
  StaticOptimizer,   //   the optimizer's state
  KeptLayer,         // a strip cell whose output stays from the forward pass (a light Forward)
  RecomputedLayer,   // a strip cell recomputed in the backward pass (a light Recompute)
  Checkpoint,        // a checkpoint: the strip's cell, the chart's "stored" marker, table tints
  CheckpointHandle,  // the strip's drag handle of a checkpoint
  CheckpointFreed,   // the chart's "freed" marker
  Peak,              // the peak: the strip's frame, the chart's marker and capacity line
  Outline,           // the footprint's step line
  Measured,          // the measured timeline's step line
  MeasuredStale,     // a measured timeline of another plan or chain than the one shown (grey)
  OverCapacity,      // the peak card's text above the device capacity
  ErrorText,         // message boxes: an error
  ErrorBackground,
  ErrorBorder,
  InfoText,  // message boxes: information
  InfoBackground,
  InfoBorder,
  FrontStep,    // the trade-off chart: the least recompute for each peak (a step line)
  FrontPoint,   // the trade-off chart: a plan on the front (click to apply)
  PlannerMark,  // the trade-off chart: a named planner's plan
  CurrentPlan,  // the trade-off chart: the plan the explorer shows now
};

inline QColor paletteColor(PaletteRole role, int alpha = 255) {
  QColor color;
  switch (role) {
    case PaletteRole::Forward: color = QColor(76, 120, 168); break;
    case PaletteRole::Recompute: color = QColor(245, 133, 24); break;
    case PaletteRole::Backward: color = QColor(84, 162, 75); break;
    case PaletteRole::OptimizerStep: color = QColor(140, 86, 75); break;
    case PaletteRole::WeightGradients: color = QColor(188, 160, 50); break;
    case PaletteRole::RecomputeMark: color = paletteColor(PaletteRole::Recompute).darker(125); break;
    case PaletteRole::Static: color = QColor(205, 205, 205); break;
    case PaletteRole::StaticInput: color = QColor(228, 228, 228); break;
    case PaletteRole::StaticGradients: color = QColor(222, 208, 160); break;
    case PaletteRole::StaticOptimizer: color = QColor(180, 180, 196); break;
    case PaletteRole::KeptLayer: color = QColor(164, 194, 226); break;
    case PaletteRole::RecomputedLayer: color = QColor(250, 190, 130); break;
    case PaletteRole::Checkpoint: color = QColor(23, 150, 160); break;
    case PaletteRole::CheckpointHandle: color = QColor(12, 100, 110); break;
    case PaletteRole::CheckpointFreed: color = QColor(110, 110, 110); break;
    case PaletteRole::Peak: color = QColor(214, 39, 40); break;
    case PaletteRole::Outline: color = QColor(40, 40, 40); break;
    case PaletteRole::Measured: color = QColor(148, 52, 160); break;
    case PaletteRole::MeasuredStale: color = QColor(150, 150, 150); break;
    case PaletteRole::OverCapacity: color = QColor(0xc6, 0x28, 0x28); break;
    case PaletteRole::ErrorText: color = QColor(0x8a, 0x1c, 0x1c); break;
    case PaletteRole::ErrorBackground: color = QColor(0xfd, 0xec, 0xea); break;
    case PaletteRole::ErrorBorder: color = QColor(0xf5, 0xc2, 0xc0); break;
    case PaletteRole::InfoText: color = QColor(0x1b, 0x3d, 0x66); break;
    case PaletteRole::InfoBackground: color = QColor(0xe8, 0xf1, 0xfb); break;
    case PaletteRole::InfoBorder: color = QColor(0xb6, 0xd0, 0xee); break;
    case PaletteRole::FrontStep: color = paletteColor(PaletteRole::Checkpoint).darker(130); break;
    case PaletteRole::FrontPoint: color = paletteColor(PaletteRole::Checkpoint); break;
    case PaletteRole::PlannerMark: color = paletteColor(PaletteRole::Recompute); break;
    case PaletteRole::CurrentPlan: color = paletteColor(PaletteRole::Measured); break;
  }
  color.setAlpha(alpha);
  return color;
}

// The role of an op's phase.
inline PaletteRole phaseRole(Phase phase) {
  switch (phase) {
    case Phase::Forward: return PaletteRole::Forward;
    case Phase::Recompute: return PaletteRole::Recompute;
    case Phase::Backward: return PaletteRole::Backward;
    case Phase::Step: return PaletteRole::OptimizerStep;
  }
  return PaletteRole::Forward;
}

inline QColor phaseColor(Phase phase, int alpha = 255) { return paletteColor(phaseRole(phase), alpha); }

// "#rrggbb", for style sheets and rich text.
inline QString paletteName(PaletteRole role) { return paletteColor(role).name(); }

}  // namespace remat::ui
