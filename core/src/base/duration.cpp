#include "remat/base/duration.hpp"

#include <cmath>
#include <cstdio>

namespace remat {

std::string formatDuration(double seconds) {
  char text[32];
  if (seconds < 1e-3) {
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  } else if (seconds < 1.0) {
    std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.2f s", seconds);
  }
  return text;
}

std::string formatTimeLeft(double seconds) {
  if (!(seconds >= 0.0)) return "";
  char text[48];
  if (seconds < 10.0) {
    std::snprintf(text, sizeof text, "about %.1f s left", seconds);
  } else if (seconds < 90.0) {
    std::snprintf(text, sizeof text, "about %.0f s left", seconds);
  } else if (seconds < 3600.0) {
    std::snprintf(text, sizeof text, "about %.0f min left", seconds / 60.0);
  } else {
    const long minutes = std::lround(seconds / 60.0);
    std::snprintf(text, sizeof text, "about %ld h %02ld min left", minutes / 60, minutes % 60);
  }
  return text;
}

}  // namespace remat
