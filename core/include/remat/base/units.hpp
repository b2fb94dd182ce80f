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

// "4096", "4 KiB", "1.5MiB", "2 GiB", "3 GB" (the decimal-looking units are read as binary ones, as
// GPU vendors print them), case-insensitive, spaces allowed around the number and unit. Anything
// else, a negative number, or a value of 2^64 bytes or more is InvalidInput with a message that
// quotes (at most 40 characters of) the text.
Result<std::uint64_t> parseByteSize(std::string_view text);

}  // namespace remat
