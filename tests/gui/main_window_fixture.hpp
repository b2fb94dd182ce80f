#pragma once
// A fixture with a shown main window, at a size where every panel has room, and a temporary folder
// for the files a test writes or opens.
#include <gtest/gtest.h>

#include <QString>
#include <QTemporaryDir>

#include "gui_test_env.hpp"
#include "window/main_window.hpp"

namespace remat::gui::test {

class MainWindowFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    window_.resize(1300, 850);
    window_.show();
  }
  QString path(const QString& name) const { return dir_.filePath(name); }

  QTemporaryDir dir_;
  MainWindow window_;
};

}  // namespace remat::gui::test
