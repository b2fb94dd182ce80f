#include "downsample.hpp"

#include <algorithm>

namespace remat::charts {

std::vector<Bucket> downsampleMax(const std::vector<double>& values, std::size_t maxBuckets) {
  const std::size_t count = values.size();
  std::vector<Bucket> buckets;
  if (count == 0) return buckets;
  const std::size_t bucketCount = std::min(count, std::max<std::size_t>(maxBuckets, 1));
  buckets.reserve(bucketCount);
  for (std::size_t b = 0; b < bucketCount; ++b) {
    // Integer boundaries floor(b * count / bucketCount): sizes differ by at most one.
    const std::size_t first = b * count / bucketCount;
    const std::size_t end = (b + 1) * count / bucketCount;
    Bucket bucket{first, end - 1, first, values[first]};
    for (std::size_t i = first + 1; i < end; ++i) {
      if (values[i] > bucket.maxValue) {
        bucket.maxValue = values[i];
        bucket.maxIndex = i;
      }
    }
    buckets.push_back(bucket);
  }
  return buckets;
}

}  // namespace remat::charts
