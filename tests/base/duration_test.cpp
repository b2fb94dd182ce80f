// Durations: the one formatting of times, and of the time left that progress lines show.
#include "remat/base/duration.hpp"

#include <gtest/gtest.h>

namespace remat {
namespace {

TEST(Duration, PicksTheUnitBySize) {
  EXPECT_EQ(formatDuration(850e-6), "850.0 us");
  EXPECT_EQ(formatDuration(0.04739), "47.39 ms");
  EXPECT_EQ(formatDuration(2.5), "2.50 s");
}

TEST(Duration, TimeLeftReadsAsMinutesAndHoursWhenLong) {
  EXPECT_EQ(formatTimeLeft(-1.0), "");
  EXPECT_EQ(formatTimeLeft(2.0), "about 2.0 s left");
  EXPECT_EQ(formatTimeLeft(23.4), "about 23 s left");
  EXPECT_EQ(formatTimeLeft(240.0), "about 4 min left");
  EXPECT_EQ(formatTimeLeft(3900.0), "about 1 h 05 min left");
}

}  // namespace
}  // namespace remat
