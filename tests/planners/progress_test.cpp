// The planners' progress (PlannerOptions::progress) and what a cancelled planner says.
#include <gtest/gtest.h>

#include <atomic>

#include "remat/model/random_chain.hpp"
#include "remat/planners/planners.hpp"
#include "remat/planners/registry.hpp"

namespace remat {
namespace {

Chain randomChain(std::size_t layers) {
  RandomChainOptions options;
  options.layers = layers;
  options.seed = 3;
  return makeRandomChain(options);
}

TEST(PlannerProgress, FractionsRiseWithinZeroToOne) {
  const Chain chain = randomChain(300000);  // linear reports every 65536 layers
  const Chain small = randomChain(300);
  for (const char* planner : {"dp", "linear", "optimal", "greedy"}) {
    const Chain& target = std::string(planner) == "linear" ? chain : small;
    std::vector<double> seen;
    PlannerOptions options;
    options.progress = [&seen](double fraction) { seen.push_back(fraction); };
    auto result = runPlanner(target, planner, options);
    ASSERT_TRUE(result.isOk()) << planner << ": " << result.status().message();
    ASSERT_GE(seen.size(), 2u) << planner;
    for (std::size_t i = 0; i < seen.size(); ++i) {
      EXPECT_GE(seen[i], 0.0) << planner;
      EXPECT_LE(seen[i], 1.0) << planner;
      if (i > 0) {
        EXPECT_GE(seen[i], seen[i - 1]) << planner << " went back at report " << i;
      }
    }
    EXPECT_LT(seen.front(), 0.5) << planner;  // linear's first report comes after 65536 layers
    EXPECT_EQ(seen.back(), 1.0) << planner;
  }
}

TEST(PlannerProgress, ACancelledPlannerSaysWhichAndHowFar) {
  const Chain chain = randomChain(400);
  for (const char* planner : {"dp", "optimal", "greedy"}) {
    std::atomic<bool> cancel{false};
    PlannerOptions options;
    options.cancelFlag = &cancel;
    // Cancel once half the work is done: the next poll stops the planner.
    options.progress = [&cancel](double fraction) {
      if (fraction >= 0.5) cancel = true;
    };
    auto result = runPlanner(chain, planner, options);
    ASSERT_FALSE(result.isOk()) << planner;
    EXPECT_EQ(result.status().code(), ErrorCode::Cancelled);
    EXPECT_NE(result.status().message().find(std::string("planner ") + planner + " cancelled at "), std::string::npos)
        << result.status().message();
    EXPECT_NE(result.status().message().find("% of its work"), std::string::npos) << result.status().message();
  }
}

}  // namespace
}  // namespace remat
