#pragma once
// Quoting text that came from outside (a file, an argument) in messages. Whatever the text holds,
// the quote is short, printable and on one line: a message always fits on a screen, and a
// terminal never receives control characters from a hostile file.
#include <cstddef>
#include <string>
#include <string_view>

namespace remat {

// Messages quote at most this many characters of what the user wrote.
inline constexpr std::size_t kMaxQuotedChars = 80;

// The text between single quotes, cut after maxChars characters (UTF-8 code points) with "..."
// before the closing quote. Control characters and bytes that are not valid UTF-8 are written as
// \n, \t or \xNN.
std::string quoteText(std::string_view text, std::size_t maxChars = kMaxQuotedChars);

// The length in bytes of the valid UTF-8 sequence at the start of text (1 to 4), or 0 when the
// first byte does not start one (text must not be empty).
std::size_t utf8SequenceLength(std::string_view text);

}  // namespace remat
