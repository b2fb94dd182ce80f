#pragma once
// What this process has mapped (/proc/self/maps): the in-process proof of which shared libraries
// a code path loaded.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <string_view>

namespace remat::testing {

// The paths of the mapped files whose names contain any of `fragments`.
inline std::set<std::string> mappedFilesContaining(std::initializer_list<std::string_view> fragments) {
  std::ifstream maps("/proc/self/maps");
  EXPECT_TRUE(maps.good()) << "cannot read /proc/self/maps";
  std::set<std::string> found;
  for (std::string line; std::getline(maps, line);) {
    const std::size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    for (std::string_view fragment : fragments)
      if (path.find(fragment) != std::string::npos) found.insert(path);
  }
  return found;
}

// The CUDA libraries the GPU backend links, as far as they are mapped here.
inline std::set<std::string> mappedCudaLibraries() {
  return mappedFilesContaining({"libcudart", "libcublas", "libcudnn"});
}

}  // namespace remat::testing
