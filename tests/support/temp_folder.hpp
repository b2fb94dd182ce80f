#pragma once
// A fixture with a fresh folder for the files a test writes, removed after the test. The name holds
// the test suite and the process id: ctest runs each test as its own process, several at once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace remat::testing {

class TempFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string suite = ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    folder_ = std::filesystem::temp_directory_path() / ("remat_" + suite + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder_);
  }
  void TearDown() override { std::filesystem::remove_all(folder_); }

  std::string path(const std::string& name) const { return (folder_ / name).string(); }
  // Writes `text` to the file `name` in the folder; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
    return path(name);
  }

  std::filesystem::path folder_;
};

}  // namespace remat::testing
