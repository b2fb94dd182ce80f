#pragma once
// The explorer's colours for layer roles, shared by the strip, its legend and the chart's phases.
#include <QColor>

namespace remat::gui {

enum class StripRole { Kept, Recomputed, Checkpoint, Handle, Peak };

inline QColor stripColor(StripRole role) {
  switch (role) {
    case StripRole::Kept: return {164, 194, 226};        // stored through the forward pass (blue, as forward)
    case StripRole::Recomputed: return {250, 190, 130};  // recomputed in the backward pass (orange)
    case StripRole::Checkpoint: return {23, 150, 160};   // kept as a checkpoint (teal)
    case StripRole::Handle: return {12, 100, 110};
    case StripRole::Peak: return {214, 39, 40};
  }
  return {};
}

}  // namespace remat::gui
