// The chain and timeline files of tests/data/regressions (its README): every input that ever broke
// a reader is refused, with a message that starts at its place, says what expected.json says, fits
// on a screen and holds no control character.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "remat/input/chain_file.hpp"
#include "remat/input/plan_file.hpp"
#include "remat/report/exporters.hpp"

namespace remat {
namespace {

namespace fs = std::filesystem;

const fs::path kFolder = fs::path(REMAT_TEST_DATA_DIR) / "regressions";

nlohmann::json expectations() { return nlohmann::json::parse(std::ifstream(kFolder / "expected.json")); }

// `place`: what follows the path: a text's ":LINE:COLUMN", or a pickle's ": byte offset N".
void expectPlacedRefusal(const Status& status, const std::string& path, const std::string& needle,
                         const std::string& place = ":[0-9]+:[0-9]+") {
  ASSERT_FALSE(status.isOk()) << path << " was accepted";
  EXPECT_EQ(status.code(), ErrorCode::InvalidInput) << status.message();
  const std::string& message = status.message();
  EXPECT_TRUE(std::regex_search(
      message,
      std::regex("^" + std::regex_replace(path, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") + place + ": ")))
      << "not placed: " << message.substr(0, 300);
  EXPECT_NE(message.find(needle), std::string::npos) << message.substr(0, 300) << "\nlacks: " << needle;
  EXPECT_LE(message.size(), 1000u) << message.substr(0, 300);
  for (unsigned char c : message) EXPECT_GE(c, 0x20) << "a control character in " << message.substr(0, 300);
}

// Every file of a folder, with its expectation.
template <typename Read>
void checkFolder(const std::string& name, Read read, const std::string& place = ":[0-9]+:[0-9]+") {
  const nlohmann::json expected = expectations();
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(kFolder / name)) {
    const std::string key = name + "/" + entry.path().filename().string();
    ASSERT_TRUE(expected.contains(key)) << key << " has no entry in expected.json";
    SCOPED_TRACE(key);
    expectPlacedRefusal(read(entry.path().string()), entry.path().string(), expected[key]["message"], place);
    ++files;
  }
  EXPECT_GE(files, 10u);
}

TEST(Regressions, EveryChainFileIsRefusedWithItsPlace) {
  checkFolder("chain", [](const std::string& path) { return loadChainFile(path).status(); });
}

TEST(Regressions, EveryTimelineFileIsRefusedWithItsPlace) {
  checkFolder("timeline", [](const std::string& path) { return readTimelines(path).status(); });
}

// PyTorch memory snapshots: pickles are placed at a byte offset, JSON at a line and column.
TEST(Regressions, EverySnapshotIsRefusedWithItsPlace) {
  checkFolder(
      "snapshot", [](const std::string& path) { return readTimelines(path).status(); },
      "(:[0-9]+:[0-9]+|: byte offset [0-9]+)");
}

// Plan files (issue 25): the reader of File > Open plan and `--plan FILE`.
TEST(Regressions, EveryPlanFileIsRefusedWithItsPlace) {
  checkFolder("plan", [](const std::string& path) { return readPlanFile(path).status(); });
}

TEST(Regressions, EveryExpectationHasItsFile) {
  const nlohmann::json expected = expectations();
  for (const auto& [key, value] : expected.items()) EXPECT_TRUE(fs::exists(kFolder / key)) << key;
}

// The regression chains that the CLI lists name load.
TEST(Regressions, TheCommandLinesChainsLoad) {
  for (const char* name : {"a.json", "r.json"}) {
    auto chain = loadChainFile((kFolder / "chains" / name).string());
    EXPECT_TRUE(chain.isOk()) << chain.status().message();
  }
}

}  // namespace
}  // namespace remat
