#pragma once
// std::string_view -> QString without assuming a terminating NUL: how core's names (kinds, dtypes,
// phases, planners) reach the explorer's widgets.
#include <QString>
#include <string_view>

namespace remat::ui {

inline QString toQString(std::string_view text) {
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

}  // namespace remat::ui
