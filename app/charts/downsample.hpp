#pragma once
// Downsampling of long series for drawing: contiguous buckets that keep their maximum, so the peak
// of a timeline is never lost however many ops it has. Pure functions, no Qt.
#include <cstddef>
#include <vector>

namespace remat::charts {

struct Bucket {
  std::size_t first = 0;     // first index in the bucket
  std::size_t last = 0;      // last index in the bucket (inclusive)
  std::size_t maxIndex = 0;  // first index holding the bucket's maximum
  double maxValue = 0.0;
  bool operator==(const Bucket&) const = default;
};

// Splits values into at most maxBuckets contiguous buckets of near-equal size (sizes differ by at
// most one) and keeps each bucket's maximum. With values.size() <= maxBuckets every value is its own
// bucket. The buckets cover every index once, in order; maxBuckets 0 is treated as 1.
std::vector<Bucket> downsampleMax(const std::vector<double>& values, std::size_t maxBuckets);

}  // namespace remat::charts
