#pragma once
// The plan tab: the numbers of the current plan (peak, A, R, recompute cost), the checkpoint strip
// and the memory chart, all updated at once from the Document's simulation.
#include <QHash>
#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLayout;
class QLabel;
class QToolButton;

namespace remat::charts {
class MemoryChart;
}

namespace remat::gui {

class CheckpointStrip;
class Document;

class PlanView : public QWidget {
  Q_OBJECT

 public:
  explicit PlanView(Document* document, QWidget* parent = nullptr);

  CheckpointStrip* strip() const { return strip_; }
  charts::MemoryChart* chart() const { return chart_; }
  std::uint64_t capacityBytes() const { return capacityBytes_; }
  // The text a summary card shows now: "peak", "dynamic", "static", "A", "R", "recompute",
  // "checkpoints", "plan".
  QString summaryText(const QString& key) const;
  QString summaryToolTip(const QString& key) const;  // the static card's lists its parts
  void setCapacityBytes(std::uint64_t bytes);

 signals:
  void statusMessage(const QString& text);
  void layerFocused(std::size_t layer);

 private:
  void refreshChain();
  void refreshPlan();
  void refreshChart();
  void applyChartOptions();
  void updatePeakWarning();  // the peak turns red above the capacity line
  QLayout* buildCards();     // the summary cards, wrapping onto more rows when narrow
  QLabel* buildLegend();
  QLayout* buildChartOptions();  // wrapping as the cards
  void connectControls();
  QLabel* addCard(QLayout* row, const QString& key, const QString& title, const QString& tip);

  Document* document_;
  CheckpointStrip* strip_;
  charts::MemoryChart* chart_;
  QHash<QString, QLabel*> values_;
  void setCardValue(const QString& key, const QString& text);
  QCheckBox* showStatic_;
  QCheckBox* proportional_;
  QComboBox* xAxis_;
  QDoubleSpinBox* capacity_;
  double capacityUnitBytes_ = 1024.0 * 1024.0 * 1024.0;  // the unit the capacity box shows: MiB or GiB
  QToolButton* resetZoom_;
  std::uint64_t capacityBytes_ = 0;
};

}  // namespace remat::gui
