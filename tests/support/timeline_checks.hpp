#pragma once
// Timelines compared field by field, for the tests of the formats that write and read them back.
#include <gtest/gtest.h>

#include <vector>

#include "remat/memory/timeline.hpp"

namespace remat::testing {

// Equal in every field a timeline format keeps: names, source, run, static bytes, layer names, and
// each entry's op, footprint, live bytes and time (exact: formats write shortest round-trip text).
inline void expectSameTimelines(const std::vector<Timeline>& a, const std::vector<Timeline>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].planner, b[i].planner);
    EXPECT_EQ(a[i].source, b[i].source);
    EXPECT_EQ(a[i].run, b[i].run);
    EXPECT_EQ(a[i].staticBytes, b[i].staticBytes);
    EXPECT_EQ(a[i].layerNames, b[i].layerNames);
    EXPECT_EQ(a[i].step, b[i].step) << "timeline " << i << "'s step options";
    ASSERT_EQ(a[i].entries.size(), b[i].entries.size());
    for (std::size_t k = 0; k < a[i].entries.size(); ++k) {
      const TimelineEntry& x = a[i].entries[k];
      const TimelineEntry& y = b[i].entries[k];
      EXPECT_EQ(x.op, y.op) << "entry " << k;
      EXPECT_EQ(x.footprintBytes, y.footprintBytes) << "entry " << k;
      EXPECT_EQ(x.liveAfterBytes, y.liveAfterBytes) << "entry " << k;
      EXPECT_EQ(x.timeUs, y.timeUs) << "entry " << k;
    }
  }
}

}  // namespace remat::testing
