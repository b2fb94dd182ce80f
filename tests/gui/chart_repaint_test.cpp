// What keeps a checkpoint toggle within a frame on big chains (issue 25, item 10), as behaviour:
// the phase fills are drawn one column per pixel, where a bar narrower than a pixel still claims
// its pixel (a lone peak among thousands of ops stays visible); and a toggle changes numbers
// without laying the view out again (fixed-size card values), so only what changed repaints.
// The times themselves are a benchmark: `remat-explorer --measure-update N` (docs/benchmarks.md).
#include <gtest/gtest.h>

#include <QLabel>
#include <QTest>
#include <algorithm>

#include "charts/fill_columns.hpp"
#include "charts/memory_chart.hpp"
#include "document/document.hpp"
#include "gui_test_env.hpp"
#include "views/plan_view.hpp"

namespace remat::charts {
namespace {

constexpr int kForward = static_cast<int>(Phase::Forward);
constexpr int kBackward = static_cast<int>(Phase::Backward);

// One axis unit is one pixel; y grows downwards from 100 at value 0.
const PixelMapping kPixels{0.0, 1.0, 100.0, -1.0};

TEST(FillColumns, EachColumnHoldsTheHighestBarTouchingItAndItsPhase) {
  const std::vector<PhaseBar> bars = {
      {0.0, 4.0, 10.0, kForward}, {4.0, 6.0, 30.0, kBackward}, {6.0, 8.0, 20.0, kForward}};
  const ColumnFills fills = columnFills(bars, 0.0, kPixels, 0, 10);
  ASSERT_EQ(fills.columns.size(), 10u);
  EXPECT_EQ(fills.baseY, 100);
  EXPECT_EQ(fills.columns[0], (FillColumn{90, kForward}));
  EXPECT_EQ(fills.columns[4], (FillColumn{70, kBackward}));
  EXPECT_EQ(fills.columns[7], (FillColumn{80, kForward}));
  EXPECT_FALSE(fills.columns[8].filled());
  EXPECT_EQ(fills.minTop(), 70);
  const std::vector<FillRun> runs = fillRuns(fills);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0], (FillRun{0, 4, 90, kForward}));
  EXPECT_EQ(runs[1], (FillRun{4, 6, 70, kBackward}));
  EXPECT_EQ(runs[2], (FillRun{6, 8, 80, kForward}));
}

TEST(FillColumns, ABarNarrowerThanAPixelKeepsItsPixelAndTheMaximumWins) {
  // A thousand bars in ten pixels: one spike among them must reach its column.
  std::vector<PhaseBar> bars;
  for (int i = 0; i < 1000; ++i)
    bars.push_back({i * 0.01, (i + 1) * 0.01, i == 537 ? 90.0 : 5.0, i == 537 ? kBackward : kForward});
  const ColumnFills fills = columnFills(bars, 0.0, kPixels, 0, 10);
  EXPECT_EQ(fills.columns[5], (FillColumn{10, kBackward}));
  for (std::size_t x : {0u, 3u, 8u}) EXPECT_EQ(fills.columns[x], (FillColumn{95, kForward})) << x;
}

TEST(FillColumns, BarsAreClippedToThePlotAndBarsBelowTheBaseAreSkipped) {
  const std::vector<PhaseBar> bars = {
      {-20.0, 3.0, 50.0, kForward}, {3.0, 40.0, 60.0, kBackward}, {5.0, 6.0, 10.0, kForward}};
  const ColumnFills fills = columnFills(bars, 20.0, kPixels, 2, 8);  // static base at 20: bar 3 is under it
  ASSERT_EQ(fills.columns.size(), 6u);
  EXPECT_EQ(fills.baseY, 80);
  EXPECT_EQ(fills.columns[0], (FillColumn{50, kForward}));  // pixel 2
  for (std::size_t x = 1; x < 6; ++x) EXPECT_EQ(fills.columns[x], (FillColumn{40, kBackward})) << x;
}

// A timeline of `ops` ops, the first half forward, the second backward, each op `bytes` high.
Timeline plateau(std::size_t ops, std::uint64_t bytes) {
  Timeline timeline;
  timeline.source = "predicted";
  for (std::size_t i = 0; i < ops; ++i)
    timeline.entries.push_back({Op{i < ops / 2 ? OpKind::F : OpKind::B, 1}, bytes, 0u, 1.0});
  return timeline;
}

int hue(QRgb pixel) {
  const QColor colour(pixel);
  return colour.hsvSaturation() > 40 ? colour.hsvHue() : -1;  // -1: grey (background, grid, outline)
}

// The fills are drawn once into an image and blitted on later repaints: new data must redraw
// them, and each half of the step keeps its phase's colour.
TEST(MemoryChartFills, ThePhasesAreShadedAndNewDataRedrawsTheCachedFills) {
  MemoryChart chart;
  chart.resize(700, 420);
  ChartOptions options;
  options.includeStatic = false;
  chart.setOptions(options);
  ChartData data;
  data.predicted = plateau(6000, 100000000u);
  chart.setData(data);
  QImage image = chart.renderImage(QSize(700, 420));
  const QPoint forward = chart.viewportPosition({1500.0, 30000000.0});
  const QPoint backward = chart.viewportPosition({4500.0, 30000000.0});
  EXPECT_GE(hue(image.pixel(forward)), 0);
  EXPECT_GE(hue(image.pixel(backward)), 0);
  EXPECT_NE(hue(image.pixel(forward)), hue(image.pixel(backward)));
  // Same axes (the peak stays), lower plateau except one op: the old shading must be gone.
  data.predicted = plateau(6000, 10000000u);
  data.predicted.entries[10].footprintBytes = 100000000u;
  chart.setData(data);
  image = chart.renderImage(QSize(700, 420));
  EXPECT_EQ(chart.viewportPosition({1500.0, 30000000.0}), forward);
  EXPECT_EQ(hue(image.pixel(forward)), -1);
  EXPECT_EQ(hue(image.pixel(backward)), -1);
}

}  // namespace
}  // namespace remat::charts

namespace remat::gui {
namespace {

// Counts the layout requests a widget receives.
class LayoutRequests : public QObject {
 public:
  int count = 0;
  bool eventFilter(QObject*, QEvent* event) override {
    if (event->type() == QEvent::LayoutRequest) ++count;
    return false;
  }
};

// A plan view on the small CNN, shown.
class PlanViewToggle : public ::testing::Test {
 protected:
  void SetUp() override {
    view.resize(1100, 700);
    view.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&view));
    document.resetChain(test::smallCnn(), QString());
  }
  Document document;  // declared before the view: destroyed after it
  PlanView view{&document};
};

TEST_F(PlanViewToggle, ATogglesNewNumbersDoNotLayTheViewOutAgainAndCardsKeepTheirWidth) {
  ASSERT_TRUE(document.applyPlan(Plan{{3, 9}}, QStringLiteral("manual")).isOk());
  QCoreApplication::processEvents();
  // Two rounds of toggling let every card reach the widest of the values it shows.
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(document.toggleCheckpoint(5).isOk());
    QCoreApplication::processEvents();
    ASSERT_TRUE(document.toggleCheckpoint(5).isOk());
    QCoreApplication::processEvents();
  }
  auto* peak = view.findChild<QLabel*>(QStringLiteral("value_peak"));
  auto* checkpoints = view.findChild<QLabel*>(QStringLiteral("value_checkpoints"));
  ASSERT_NE(peak, nullptr);
  ASSERT_NE(checkpoints, nullptr);
  const int peakWidth = peak->width();
  LayoutRequests requests;
  view.installEventFilter(&requests);
  for (int i = 0; i < 4; ++i) {
    const QString before = checkpoints->text();
    ASSERT_TRUE(document.toggleCheckpoint(5).isOk());
    QCoreApplication::processEvents();
    EXPECT_NE(checkpoints->text(), before);  // the numbers did change
  }
  view.removeEventFilter(&requests);
  EXPECT_EQ(requests.count, 0);
  EXPECT_EQ(peak->width(), peakWidth);
}

TEST_F(PlanViewToggle, AnotherChainsCardsFitItsOwnNumbers) {
  QCoreApplication::processEvents();
  auto* checkpoints = view.findChild<QLabel*>(QStringLiteral("value_checkpoints"));
  ASSERT_NE(checkpoints, nullptr);
  checkpoints->setFixedWidth(400);  // as if an earlier chain had shown a very wide value
  document.resetChain(test::smallCnn(), QString());
  QCoreApplication::processEvents();
  EXPECT_LT(checkpoints->width(), 400);
  EXPECT_EQ(checkpoints->minimumWidth(), checkpoints->sizeHint().width());
}

}  // namespace
}  // namespace remat::gui
