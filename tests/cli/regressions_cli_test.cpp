// The argument lists of tests/data/regressions/cli (its README), each run in-process in a folder
// holding the two chains they name: the exit status and the message expected.json gives, a
// message that fits on a screen, and no file of the folder changed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_runner.hpp"

namespace remat {
namespace {

namespace fs = std::filesystem;

const fs::path kFolder = fs::path(REMAT_TEST_DATA_DIR) / "regressions";

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> argumentsOf(const fs::path& path) {
  std::vector<std::string> args;
  std::string text = readAll(path), line;
  std::istringstream lines(text);
  while (std::getline(lines, line)) args.push_back(line);
  if (!text.empty() && text.back() == '\n') args.emplace_back();  // an empty last argument
  return args;
}

// The CLI lists name their chains relative to the folder they run in.
class RegressionsCli : public testing::TempFolderTest {
 protected:
  void SetUp() override {
    TempFolderTest::SetUp();
    for (const char* name : {"a.json", "r.json"}) fs::copy_file(kFolder / "chains" / name, folder_ / name);
    previous_ = fs::current_path();
    fs::current_path(folder_);
  }
  void TearDown() override {
    fs::current_path(previous_);
    TempFolderTest::TearDown();
  }
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::directory_iterator(folder_)) files[entry.path().filename().string()] = readAll(entry);
    return files;
  }
  fs::path previous_;
};

TEST_F(RegressionsCli, EveryArgumentListFailsAsExpected) {
  const nlohmann::json expected = nlohmann::json::parse(std::ifstream(kFolder / "expected.json"));
  std::size_t lists = 0;
  for (const auto& entry : fs::directory_iterator(kFolder / "cli")) {
    const std::string key = "cli/" + entry.path().filename().string();
    ASSERT_TRUE(expected.contains(key)) << key << " has no entry in expected.json";
    SCOPED_TRACE(key);
    const auto before = snapshot();
    const auto result = testing::runRemat(argumentsOf(entry.path()));
    EXPECT_EQ(result.exitCode, expected[key]["exit"].get<int>()) << result.err.substr(0, 300);
    EXPECT_EQ(result.err.rfind("remat: ", 0), 0u) << result.err.substr(0, 300);
    EXPECT_NE(result.err.find(expected[key]["message"].get<std::string>()), std::string::npos)
        << result.err.substr(0, 300);
    EXPECT_LE(result.err.size(), 1000u) << result.err.substr(0, 300);
    EXPECT_EQ(snapshot(), before) << "the command changed a file of its folder";
    ++lists;
  }
  EXPECT_GE(lists, 10u);
}

// Every ONNX model of regressions/onnx through `remat import --output` and `plan`: exit 2, the
// expected message (named after the file), under 2,000 characters, and nothing written; a model
// that expected.json says "imports" is planned (exit 0).
TEST_F(RegressionsCli, EveryOnnxModelIsRefusedAndNothingIsWritten) {
  const nlohmann::json expected = nlohmann::json::parse(std::ifstream(kFolder / "expected.json"));
  std::size_t models = 0;
  for (const auto& entry : fs::directory_iterator(kFolder / "onnx")) {
    const std::string key = "onnx/" + entry.path().filename().string();
    ASSERT_TRUE(expected.contains(key)) << key << " has no entry in expected.json";
    SCOPED_TRACE(key);
    const auto before = snapshot();
    if (expected[key].contains("imports")) {
      const auto result = testing::runRemat({"plan", entry.path().string(), "--batch", "2", "--planner", "linear"});
      EXPECT_EQ(result.exitCode, 0) << result.err.substr(0, 300);
      EXPECT_EQ(snapshot(), before);
      ++models;
      continue;
    }
    for (const auto& args :
         {std::vector<std::string>{"import", entry.path().string(), "--batch", "2", "--output", "out.json"},
          std::vector<std::string>{"plan", entry.path().string(), "--batch", "2", "--planner", "linear"}}) {
      const auto result = testing::runRemat(args);
      EXPECT_EQ(result.exitCode, 2) << result.err.substr(0, 300);
      EXPECT_EQ(result.err.rfind("remat: error: " + entry.path().string() + ": ", 0), 0u) << result.err.substr(0, 300);
      EXPECT_NE(result.err.find(expected[key]["message"].get<std::string>()), std::string::npos)
          << result.err.substr(0, 300);
      EXPECT_LT(result.err.size(), 2000u);
    }
    EXPECT_EQ(snapshot(), before) << "a refused import wrote a file";
    ++models;
  }
  EXPECT_GE(models, 2u);
}

}  // namespace
}  // namespace remat
