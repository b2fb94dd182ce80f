#pragma once
// What every reader of the project's files shares (chain files, timelines, imported models): the
// size limits, reading a whole file safely, and places in a text ("file:line:column") for messages.
// docs/formats.md section 0 states the limits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "remat/base/status.hpp"

namespace remat {

// Input files larger than these are refused before they are read.
inline constexpr std::uint64_t kMaxChainFileBytes = std::uint64_t{64} << 20;      // 64 MiB
inline constexpr std::uint64_t kMaxTimelineFileBytes = std::uint64_t{128} << 20;  // 128 MiB
// ONNX models carry their weights; protobuf parses no message of 2 GiB or more.
inline constexpr std::uint64_t kMaxOnnxFileBytes = (std::uint64_t{2} << 30) - 1;

// Reads the whole regular file `path` of at most maxBytes bytes. Refused before reading, as an
// IoError naming the path and `what` ("chain file"): a path that cannot be opened (with the
// system's reason), anything but a regular file (a folder, a device such as /dev/zero, a pipe),
// and a file over maxBytes (also one that grows past it while it is read).
Result<std::string> readInputFile(const std::string& path, std::uint64_t maxBytes, std::string_view what);

// A place in a text: 1-based line, and 1-based column counted in characters (UTF-8 code points;
// a byte that is not valid UTF-8 counts as one).
struct TextPlace {
  std::size_t line = 1;
  std::size_t column = 1;
};
TextPlace placeAt(std::string_view text, std::size_t offset);

// "source:line:column" of byte `offset` of text.
std::string placeText(const std::string& source, std::string_view text, std::size_t offset);

// Text files never hold a NUL byte: InvalidInput at the first one ("source:3:7: a NUL byte ...").
// (A JSON parser that stops there would ignore the rest of the file.)
Status rejectNulBytes(std::string_view text, const std::string& source);

}  // namespace remat
