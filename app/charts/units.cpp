#include "units.hpp"

#include "remat/base/units.hpp"

#include <array>
#include <cmath>

namespace remat::charts {
namespace {
const std::array<const char*, 7> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
}

QString formatBytes(std::uint64_t bytes) { return QString::fromStdString(remat::formatBytes(bytes)); }

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
  Result<std::uint64_t> bytes = parseByteSize(text.toStdString());
  if (!bytes) return std::nullopt;
  return *bytes;
}

}  // namespace remat::charts
