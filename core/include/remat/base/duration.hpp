#pragma once
// Durations as people read them: the one formatting of times that the command line, the explorer
// and the charts share (planning times, op times).
#include <string>

namespace remat {

// "850.0 us", "47.39 ms", "2.50 s": one decimal below a millisecond, two from there on.
std::string formatDuration(double seconds);

// What a progress line says of the time left: "about 8.5 s left", "about 23 s left", "about 4 min
// left", "about 1 h 05 min left"; empty when `seconds` is negative (nothing to estimate from yet).
std::string formatTimeLeft(double seconds);

}  // namespace remat
