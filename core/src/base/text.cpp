#include "remat/base/text.hpp"

#include <cstdio>

namespace remat {

std::size_t utf8SequenceLength(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte (RFC 3629 table 3-7)
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  return length;
}

std::string quoteText(std::string_view text, std::size_t maxChars) {
  std::string out = "'";
  std::size_t chars = 0;
  std::size_t i = 0;
  while (i < text.size() && chars < maxChars) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const std::size_t length = utf8SequenceLength(text.substr(i));
    char escape[8];
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (length == 0 || c < 0x20 || c == 0x7F) {
      std::snprintf(escape, sizeof escape, "\\x%02X", c);
      out += escape;
    } else {
      out.append(text.substr(i, length));
      i += length;
      ++chars;
      continue;
    }
    ++i;
    ++chars;
  }
  if (i < text.size()) out += "...";
  return out + "'";
}

}  // namespace remat
