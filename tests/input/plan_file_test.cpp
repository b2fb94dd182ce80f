// Plan files read back: the JSON `remat plan --json` writes, placed on a chain by its layers'
// names when they match, by numbers otherwise, and refused with a placed message when neither fits.
#include "remat/input/plan_file.hpp"

#include <gtest/gtest.h>

#include "remat/model/chain.hpp"

namespace remat {
namespace {

// Five abstract layers "l1".."l5".
Chain fiveLayers() {
  Chain chain = makeAbstractChain("five", 1000, std::vector<LayerNumbers>(5, LayerNumbers{.outBytes = 100}));
  for (std::size_t i = 0; i < chain.layers.size(); ++i) chain.layers[i].name = "l" + std::to_string(i + 1);
  return chain;
}

TEST(PlanFile, ReadsWhatPlanJsonWrites) {
  Result<PlanFile> file = parsePlanFile(
      R"({"planner": "dp", "objective": "A", "checkpoints": [2, 4], "checkpoint_names": ["l2", "l4"],
          "peak_bytes": 123, "chain": "five"})",
      "plan.json");
  ASSERT_TRUE(file.isOk()) << file.status().message();
  EXPECT_EQ(file->planner, "dp");
  EXPECT_EQ(file->chain, "five");
  EXPECT_EQ(file->checkpoints, (std::vector<std::size_t>{2, 4}));
  Result<PlacedPlan> placed = placePlan(*file, fiveLayers());
  ASSERT_TRUE(placed.isOk()) << placed.status().message();
  EXPECT_EQ(placed->checkpoints, (std::vector<std::size_t>{2, 4}));
  EXPECT_TRUE(placed->byNames);
}

TEST(PlanFile, NamesWinOverNumbersWhenTheChainWasEdited) {
  Chain edited = fiveLayers();
  edited.layers.insert(edited.layers.begin(), edited.layers.front());  // a layer inserted at the front
  edited.layers.front().name = "new";
  Result<PlanFile> file = parsePlanFile(R"({"checkpoints": [2, 4], "checkpoint_names": ["l2", "l4"]})", "p.json");
  ASSERT_TRUE(file.isOk());
  Result<PlacedPlan> placed = placePlan(*file, edited);
  ASSERT_TRUE(placed.isOk()) << placed.status().message();
  EXPECT_EQ(placed->checkpoints, (std::vector<std::size_t>{3, 5}));  // the same layers, one further
  EXPECT_TRUE(placed->byNames);
}

TEST(PlanFile, NumbersWhenTheNamesDoNotMatch) {
  Result<PlanFile> file = parsePlanFile(R"({"checkpoints": [1, 3], "checkpoint_names": ["a", null]})", "p.json");
  ASSERT_TRUE(file.isOk()) << file.status().message();
  Result<PlacedPlan> placed = placePlan(*file, fiveLayers());
  ASSERT_TRUE(placed.isOk()) << placed.status().message();
  EXPECT_EQ(placed->checkpoints, (std::vector<std::size_t>{1, 3}));
  EXPECT_FALSE(placed->byNames);
  Result<PlanFile> bare = parsePlanFile(R"({"checkpoints": []})", "p.json");  // store all
  ASSERT_TRUE(bare.isOk());
  EXPECT_TRUE(placePlan(*bare, fiveLayers())->checkpoints.empty());
}

TEST(PlanFile, APlanThatFitsNeitherWaySaysWhereAndWhy) {
  Result<PlanFile> file =
      parsePlanFile("{\n  \"checkpoints\": [2, 9],\n  \"checkpoint_names\": [\"x\", \"y\"]\n}", "p.json");
  ASSERT_TRUE(file.isOk());
  Result<PlacedPlan> placed = placePlan(*file, fiveLayers());
  ASSERT_FALSE(placed.isOk());
  EXPECT_EQ(placed.status().message(),
            "p.json:2:3: checkpoints[1]: layer 9 is not a checkpoint of chain 'five' (its 5 layers allow 1..4); nor do "
            "its checkpoint_names all name layers of that chain");
  Result<PlanFile> unsorted = parsePlanFile(R"({"checkpoints": [3, 2]})", "p.json");
  ASSERT_TRUE(unsorted.isOk());
  EXPECT_NE(placePlan(*unsorted, fiveLayers()).status().message().find("comes after layer 3"), std::string::npos);
  Result<PlanFile> last = parsePlanFile(R"({"checkpoints": [5]})", "p.json");  // the last layer is never one
  EXPECT_FALSE(placePlan(*last, fiveLayers()).isOk());
}

TEST(PlanFile, MalformedFilesArePlacedErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"[1, 2]", "p.json:1:1: a plan file is a JSON object"},
      {"{}", "p.json:1:1: field 'checkpoints' is missing"},
      {R"({"checkpoints": "1,2"})", "p.json:1:2: field 'checkpoints' must be a list of layer numbers, not string"},
      {R"({"checkpoints": [1, -2]})", "p.json:1:2: field 'checkpoints' item 1 must be a layer number, not number '-2'"},
      {R"({"checkpoints": [1.5]})", "p.json:1:2: field 'checkpoints' item 0 must be a layer number"},
      {R"({"checkpoints": [1], "checkpoint_names": []})", "field 'checkpoint_names' must be a list of 1 layer names"},
      {R"({"checkpoints": [1], "checkpoint_names": [3]})",
       "field 'checkpoint_names' item 0 must be a layer name or null"},
      {R"({"checkpoints": [1], "planner": 7})", "field 'planner' must be a string"},
      {R"({"checkpoints": [1]} x)", "p.json:1:"},
  };
  for (const auto& [text, expected] : cases) {
    Result<PlanFile> file = parsePlanFile(text, "p.json");
    ASSERT_FALSE(file.isOk()) << text;
    EXPECT_NE(file.status().message().find(expected), std::string::npos) << text << "\n" << file.status().message();
  }
  EXPECT_FALSE(readPlanFile("/nonexistent/plan.json").isOk());
}

}  // namespace
}  // namespace remat
