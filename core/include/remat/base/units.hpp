#pragma once
// Byte quantities as people read and type them: the one formatting of bytes that the command
// line, the explorer and every message share.
#include <cstdint>
#include <string>
#include <string_view>

#include "remat/base/status.hpp"

namespace remat {

// "12 B", "4.00 KiB", "1.50 GiB": binary units, two decimals above bytes.
std::string formatBytes(std::uint64_t bytes);

// The binary unit formatBytes writes `bytes` in: the largest of B, KiB, ... EiB that keeps the
// value at 1 or more (B below 1024), as its divisor and name. For axes scaled like the text.
struct ByteUnit {
  double divisor = 1.0;
  std::string_view name = "B";
};
ByteUnit byteUnitFor(double bytes);

// "4096", "4 KiB", "1.5MiB", "2 GiB", "3 GB" (the decimal-looking units are read as binary ones, as
// GPU vendors print them), case-insensitive, spaces allowed around the number and unit. Anything
// else, a negative number, or a value of 2^64 bytes or more is InvalidInput with a message that
// quotes (at most 40 characters of) the text.
Result<std::uint64_t> parseByteSize(std::string_view text);

}  // namespace remat
