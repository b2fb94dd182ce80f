#pragma once
// One QApplication for a GUI test program (GoogleTest's main creates none), offscreen, with
// settings kept away from the user's.
#include <gtest/gtest.h>

#include <QApplication>
#include <QDir>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <memory>

#include "chain_helpers.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/model/chain.hpp"

namespace remat::gui::test {

class QtEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    configDir_ = std::make_unique<QTemporaryDir>();
    qputenv("XDG_CONFIG_HOME", configDir_->path().toUtf8());
    QStandardPaths::setTestModeEnabled(true);
    static int argc = 1;
    static char name[] = "remat_gui_test";
    static char* argv[] = {name, nullptr};
    app_ = std::make_unique<QApplication>(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("RematExplorerTests"));
    QApplication::setApplicationName(QStringLiteral("remat-explorer-tests"));
  }
  void TearDown() override { app_.reset(); }

 private:
  std::unique_ptr<QTemporaryDir> configDir_;
  std::unique_ptr<QApplication> app_;
};

inline ::testing::Environment* const kQtEnvironment = ::testing::AddGlobalTestEnvironment(new QtEnvironment);

// A zoo chain, built; fails the test when the zoo or shape inference refuses.
inline Chain zooChainBuilt(const std::string& name, std::int64_t batch = 8, std::int64_t resolution = 64) {
  return testing::zooBuilt(name, {.batch = batch, .resolution = resolution});
}

// The small CNN example from the resources (real kinds, with a flatten view).
inline Chain smallCnn() {
  Result<Chain> chain = loadChainFile(REMAT_SOURCE_DIR "/resources/examples/small_cnn.json");
  EXPECT_TRUE(chain.isOk()) << chain.status().message();
  return chain.isOk() ? *chain : Chain{};
}

}  // namespace remat::gui::test
