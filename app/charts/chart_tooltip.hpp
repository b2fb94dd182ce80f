#pragma once
// The charts' one tooltip behaviour (the memory chart and the trade-off chart): the chart says what
// a point of its view shows; the tooltip follows the pointer, stays while it rests (Qt's default
// hides a tooltip after a few seconds, and a QGraphicsView answers the resting pointer's help event
// without an item tooltip by hiding ours, about 0.7 s later), and goes when the pointer leaves.
#include <QPoint>
#include <QString>
#include <functional>

class QEvent;
class QWidget;

namespace remat::charts {

class ChartTooltip {
 public:
  // What the tooltip says at a point of the view's viewport; empty: no tooltip there. It may do
  // more (the memory chart says which op is hovered).
  using TextAt = std::function<QString(const QPoint& viewportPosition)>;

  ChartTooltip(QWidget* view, TextAt textAt);

  // For the chart's event filter on the view's viewport: mouse moves (not consumed), the help event
  // (consumed: answered with our text) and leaving. True when the event is consumed.
  bool handle(QEvent* event);
  // Shows the text at a point (moves also call this), or hides it when there is none.
  void showAt(const QPoint& viewportPosition, const QPoint& globalPosition);
  static void hide();

 private:
  QWidget* view_;
  TextAt textAt_;
};

}  // namespace remat::charts
