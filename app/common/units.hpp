#pragma once
// Byte quantities as people read and type them ("1.50 GiB", "512 KiB").
#include <QString>
#include <cstdint>
#include <optional>

namespace remat::ui {

// Bytes in a GiB: the unit of the capacity inputs (spin box, --capacity).
inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// "12 B", "4.00 KiB", "1.50 GiB" (binary units, two decimals above bytes).
QString formatBytes(std::uint64_t bytes);

// The unit an axis uses for values up to maxBytes, the one formatBytes would use for maxBytes:
// divisor and its name ("MiB").
struct ByteUnit {
  double divisor = 1.0;
  QString name = QStringLiteral("B");
};
ByteUnit byteUnitFor(double maxBytes);

// "4096", "4 KiB", "1.5MiB", "2 GiB", "3 GB" (GB read as GiB); nullopt for anything else,
// negative numbers and values beyond 64 bits.
std::optional<std::uint64_t> parseBytes(const QString& text);

// core's readablePlannerName (planners/registry.hpp) as a QString.
QString readablePlannerName(const QString& planner);

}  // namespace remat::ui
