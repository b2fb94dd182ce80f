// libFuzzer target: the CSV and JSON timeline readers, both on every input. What a reader accepts
// writes back to text that reads to the same timelines; what it refuses gets a placed, bounded
// message.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_checks.hpp"
#include "remat/report/exporters.hpp"

namespace {

using Reader = remat::Result<std::vector<remat::Timeline>> (*)(const std::string&, const std::string&);
using Writer = std::string (*)(const std::vector<remat::Timeline>&);

void check(const std::string& text, const std::string& source, Reader read, Writer write) {
  auto timelines = read(text, source);
  if (!timelines) return remat::fuzz::checkMessage(timelines.status().message(), source);
  const std::string written = write(*timelines);
  auto again = read(written, "again");
  if (!again) remat::fuzz::fail("written timelines do not read back", again.status().message());
  if (write(*again) != written) remat::fuzz::fail("written timelines read back as others", written.substr(0, 2000));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check(text, "fuzz.csv", remat::parseTimelinesCsv, remat::timelinesToCsv);
  check(text, "fuzz.json", remat::parseTimelinesJson, remat::timelinesToJson);
  return 0;
}
