// Planning through the command line loads no CUDA library: the in-process proof that `remat plan`
// starts without CUDA (devices_test shows the same check sees CUDA once the GPU module loads).
#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "process_maps.hpp"

namespace remat {
namespace {

TEST(PlanningLoadsNoCuda, APlanLeavesNoCudaLibraryMapped) {
  EXPECT_TRUE(testing::mappedCudaLibraries().empty()) << "the test program itself links CUDA";
  const auto r = testing::runRemat({"plan", "zoo:vgg11", "--planner", "linear"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_FALSE(testing::mappedFilesContaining({"libstdc++"}).empty()) << "the maps are read";
  const auto cuda = testing::mappedCudaLibraries();
  EXPECT_TRUE(cuda.empty()) << "mapped after planning: " << *cuda.begin();
}

}  // namespace
}  // namespace remat
