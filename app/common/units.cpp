#include "common/units.hpp"

#include "common/qt_text.hpp"
#include "remat/base/units.hpp"
#include "remat/planners/registry.hpp"

namespace remat::ui {

QString formatBytes(std::uint64_t bytes) { return QString::fromStdString(remat::formatBytes(bytes)); }

ByteUnit byteUnitFor(double maxBytes) {
  const remat::ByteUnit unit = remat::byteUnitFor(maxBytes);
  return {unit.divisor, toQString(unit.name)};
}

std::optional<std::uint64_t> parseBytes(const QString& text) {
  Result<std::uint64_t> bytes = parseByteSize(text.toStdString());
  if (!bytes) return std::nullopt;
  return *bytes;
}

QString readablePlannerName(const QString& planner) {
  return QString::fromStdString(remat::readablePlannerName(planner.toStdString()));
}

}  // namespace remat::ui
