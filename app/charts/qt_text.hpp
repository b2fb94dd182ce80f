#pragma once
// std::string_view -> QString without assuming a terminating NUL.
#include <QString>
#include <string_view>

namespace remat::gui {

inline QString toQString(std::string_view text) {
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

}  // namespace remat::gui
