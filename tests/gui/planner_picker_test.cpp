// The planner picker lists core's planner registry: its names in order, its descriptions as the
// items' tooltips, and every planner can be picked and gives back a name core accepts.
#include "views/planner_picker.hpp"

#include <gtest/gtest.h>

#include <QComboBox>
#include <QSignalSpy>

#include "common/qt_text.hpp"
#include "gui_test_env.hpp"
#include "remat/planners/registry.hpp"

namespace remat::gui {
namespace {

TEST(PlannerPicker, ListsTheRegistryWithItsDescriptions) {
  PlannerPicker picker;
  const std::span<const PlannerEntry> registry = plannerRegistry();
  QComboBox* combo = picker.combo();
  ASSERT_EQ(combo->count(), static_cast<int>(registry.size()));
  for (int i = 0; i < combo->count(); ++i) {
    const PlannerEntry& entry = registry[static_cast<std::size_t>(i)];
    EXPECT_EQ(combo->itemText(i), QString::fromStdString(entry.listedName()));
    EXPECT_EQ(combo->itemData(i, Qt::ToolTipRole).toString(), ui::toQString(entry.description));
  }
}

TEST(PlannerPicker, EveryRegisteredPlannerCanBePicked) {
  PlannerPicker picker;
  QSignalSpy changed(&picker, &PlannerPicker::plannerChanged);
  for (const PlannerEntry& entry : plannerRegistry()) {
    const QString name = ui::toQString(entry.name) + (entry.hasParameter() ? QStringLiteral(":7") : QString());
    ASSERT_TRUE(picker.setPlannerName(name)) << name.toStdString();
    EXPECT_EQ(picker.plannerName(), name);
    EXPECT_TRUE(checkPlannerName(picker.plannerName().toStdString()).isOk()) << name.toStdString();
    EXPECT_EQ(picker.combo()->currentText(), QString::fromStdString(entry.listedName()));
  }
  EXPECT_GT(changed.count(), 0);
}

TEST(PlannerPicker, RefusesWhatCoreRefuses) {
  PlannerPicker picker;
  ASSERT_TRUE(picker.setPlannerName(QStringLiteral("dp")));
  for (const char* bad : {"", "DP", "uniform", "uniform:", "uniform:0", "uniform:x", "uniform:-2", "best"})
    EXPECT_FALSE(picker.setPlannerName(QString::fromLatin1(bad))) << bad;
  EXPECT_EQ(picker.plannerName(), QStringLiteral("dp"));
}

}  // namespace
}  // namespace remat::gui
