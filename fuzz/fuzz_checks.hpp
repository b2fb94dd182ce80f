#pragma once
// What every fuzz target checks beyond "no crash, no leak, no sanitizer report": the properties
// issue 15 asks of every message. A violation aborts, which libFuzzer reports as a crash with its
// input.
#include <cstdio>
#include <cstdlib>
#include <string>

namespace remat::fuzz {

// Messages fit on a screen: the longest list in a message (a kind's fields) is far below this.
inline constexpr std::size_t kMaxMessageChars = 1000;

[[noreturn]] inline void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz check failed: %s\n%.2000s\n", what, detail.c_str());
  std::abort();
}

// An error message of a reader: names the source first, fits the bound, holds no control
// character (a quote of hostile text is escaped).
inline void checkMessage(const std::string& message, const std::string& source) {
  if (message.rfind(source, 0) != 0) fail("the message does not start with the file name", message);
  if (message.size() > kMaxMessageChars) fail("the message is too long", message.substr(0, 400));
  for (unsigned char c : message)
    if (c < 0x20 || c == 0x7F) fail("the message holds a control character", message);
}

}  // namespace remat::fuzz
