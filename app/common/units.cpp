#include "common/units.hpp"

#include "common/qt_text.hpp"
#include "remat/base/units.hpp"

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
  const QString prefix = QStringLiteral("budget:");
  if (!planner.startsWith(prefix)) return planner;
  const std::optional<std::uint64_t> bytes = parseBytes(planner.mid(prefix.size()));
  if (!bytes) return planner;
  return QStringLiteral("budget (dynamic %1 %2)").arg(QChar(0x2264)).arg(formatBytes(*bytes));
}

}  // namespace remat::ui
