// libFuzzer target: the PyTorch memory snapshot reader (snapshot.hpp), pickle and JSON, whichever
// the input's first byte chooses (both are tried: as it is, and after a pickle's PROTO 4 header
// when it has none). What the reader accepts exports (JSON and pickle) to snapshots that read back
// to the same timelines; what it refuses gets a placed, bounded message.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_checks.hpp"
#include "remat/report/snapshot.hpp"

namespace {

// The exporter's addresses stay unique while the bytes it allocates in all stay far below 2^64.
bool exportable(const std::vector<remat::Timeline>& timelines) {
  long double bytes = 0;
  for (const remat::Timeline& t : timelines) {
    bytes += static_cast<long double>(t.staticBytes);
    for (const remat::TimelineEntry& e : t.entries) bytes += 2.0L * static_cast<long double>(e.footprintBytes);
  }
  return bytes < 0x1p60L;
}

void check(const std::string& data, const std::string& source) {
  auto timelines = remat::parseSnapshot(data, source);
  if (!timelines) return remat::fuzz::checkMessage(timelines.status().message(), source);
  if (!exportable(*timelines)) return;
  for (auto write : {remat::timelinesToSnapshotJson, remat::timelinesToSnapshotPickle}) {
    const std::string written = write(*timelines);
    auto again = remat::parseSnapshot(written, "again");
    if (!again) remat::fuzz::fail("an exported snapshot does not read back", again.status().message());
    if (write(*again) != written)
      remat::fuzz::fail("an exported snapshot reads back as another", written.substr(0, 2000));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  check(bytes, "fuzz.pickle");
  // The opcodes alone (the dictionary's), behind a valid header.
  if (size == 0 || data[0] != 0x80) check(std::string("\x80\x04", 2) + bytes, "fuzz.pickle");
  return 0;
}
