#include "remat/base/units.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "remat/base/text.hpp"

namespace remat {
namespace {

constexpr std::array<const char*, 7> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

std::string quoted(std::string_view text) { return quoteText(text, 40); }

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// The power of 1024 a unit names: "" and "b" 0, "k", "kb", "kib" 1, ... "t..." 4; -1 otherwise.
int unitPower(std::string_view unit) {
  std::string lower;
  for (char c : unit) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower.empty() || lower == "b") return 0;
  static constexpr std::array<char, 4> kPrefixes = {'k', 'm', 'g', 't'};
  for (std::size_t i = 0; i < kPrefixes.size(); ++i) {
    const std::string p(1, kPrefixes[i]);
    if (lower == p || lower == p + "b" || lower == p + "ib") return static_cast<int>(i) + 1;
  }
  return -1;
}

}  // namespace

ByteUnit byteUnitFor(double bytes) {
  ByteUnit unit;
  std::size_t index = 0;
  while (bytes / unit.divisor >= 1024.0 && index + 1 < kUnits.size()) {
    unit.divisor *= 1024.0;  // a power of two: the division stays exact
    ++index;
  }
  unit.name = kUnits[index];
  return unit;
}

std::string formatBytes(std::uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const ByteUnit unit = byteUnitFor(static_cast<double>(bytes));
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f %.*s", static_cast<double>(bytes) / unit.divisor,
                static_cast<int>(unit.name.size()), unit.name.data());
  return buffer;
}

Result<std::uint64_t> parseByteSize(std::string_view text) {
  const std::string_view body = trim(text);
  std::size_t numberEnd = 0;
  while (numberEnd < body.size() &&
         (std::isdigit(static_cast<unsigned char>(body[numberEnd])) || body[numberEnd] == '.'))
    ++numberEnd;
  const std::string_view number = body.substr(0, numberEnd);
  const int power = unitPower(trim(body.substr(numberEnd)));
  const auto bad = [&](const std::string& why) { return Status::invalid("bad size " + quoted(text) + ": " + why); };
  if (number.empty() || number.front() == '.' || number.back() == '.' || power < 0)
    return bad("expected a number of bytes, optionally with a unit (B, KiB, MiB, GiB, TiB), e.g. 3.5GiB");
  if (number.find('.') == std::string_view::npos) {
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (error != std::errc() || end != number.data() + number.size()) return bad("more than 2^64 bytes");
    const std::uint64_t scale = std::uint64_t{1} << (10 * power);
    if (value > UINT64_MAX / scale) return bad("more than 2^64 bytes");
    return value * scale;
  }
  double value = 0.0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (error != std::errc() || end != number.data() + number.size())
    return bad("expected a number of bytes, optionally with a unit (B, KiB, MiB, GiB, TiB), e.g. 3.5GiB");
  const long double bytes = std::roundl(static_cast<long double>(value) * std::pow(1024.0L, power));
  if (bytes >= 18446744073709551616.0L) return bad("more than 2^64 bytes");
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace remat
