#include "units.hpp"

#include <QRegularExpression>
#include <array>
#include <cmath>

namespace remat::charts {
namespace {
const std::array<const char*, 7> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
}

QString formatBytes(std::uint64_t bytes) {
  if (bytes < 1024) return QString::number(bytes) + QStringLiteral(" B");
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return QString::number(value, 'f', 2) + QLatin1Char(' ') + QLatin1String(kUnits[unit]);
}

ByteUnit byteUnitFor(double maxBytes) {
  ByteUnit unit;
  std::size_t index = 0;
  while (maxBytes / unit.divisor >= 1024.0 && index + 1 < kUnits.size()) {
    unit.divisor *= 1024.0;
    ++index;
  }
  unit.name = QLatin1String(kUnits[index]);
  return unit;
}

std::optional<std::uint64_t> parseBytes(const QString& text) {
  static const QRegularExpression pattern(
      QStringLiteral(R"(^\s*([0-9]+(?:\.[0-9]+)?)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?\s*$)"),
      QRegularExpression::CaseInsensitiveOption);
  const QRegularExpressionMatch match = pattern.match(text);
  if (!match.hasMatch()) return std::nullopt;
  const QString number = match.captured(1);
  const QString suffix = match.captured(2).toLower();
  int power = 0;
  if (suffix.startsWith('k')) power = 1;
  if (suffix.startsWith('m')) power = 2;
  if (suffix.startsWith('g')) power = 3;
  if (suffix.startsWith('t')) power = 4;
  if (power == 0 && !number.contains('.')) {
    bool ok = false;
    const qulonglong value = number.toULongLong(&ok);
    if (!ok) return std::nullopt;
    return static_cast<std::uint64_t>(value);
  }
  const long double value = number.toDouble() * std::pow(1024.0L, power);
  if (value >= 18446744073709551615.0L) return std::nullopt;
  return static_cast<std::uint64_t>(std::roundl(value));
}

}  // namespace remat::charts
