#pragma once
// A fixture with a shown main window, at a size where every panel has room, and a temporary folder
// for the files a test writes or opens.
#include <gtest/gtest.h>

#include <QString>
#include <QTemporaryDir>

#include "document/document.hpp"
#include "gui_test_env.hpp"
#include "views/step_bar.hpp"
#include "window/main_window.hpp"

namespace remat::gui::test {

class MainWindowFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    window_.resize(1300, 850);
    window_.show();
    // The views' tests compare with core's simulation of the paper's model (no optimizer step,
    // static gradients); the explorer's own default, PyTorch 2's step, is step_options_gui_test's.
    if (!keepDefaultStep_) {
      ASSERT_TRUE(window_.document()->setStepOptions(StepOptions{}).isOk());
      window_.stepBar()->setStepOptions(StepOptions{});
    }
  }
  QString path(const QString& name) const { return dir_.filePath(name); }

  QTemporaryDir dir_;
  MainWindow window_;
  bool keepDefaultStep_ = false;  // set in a constructor: start at the explorer's default step
};

}  // namespace remat::gui::test
