#include "chart_tooltip.hpp"

#include <QEvent>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QToolTip>
#include <QWidget>
#include <utility>

namespace remat::charts {
namespace {

constexpr int kTooltipShownMs = 10 * 60 * 1000;  // as long as the pointer rests (moving updates it)

}  // namespace

ChartTooltip::ChartTooltip(QWidget* view, TextAt textAt) : view_(view), textAt_(std::move(textAt)) {}

bool ChartTooltip::handle(QEvent* event) {
  switch (event->type()) {
    case QEvent::MouseMove: {
      auto* mouse = static_cast<QMouseEvent*>(event);
      if (mouse->buttons() == Qt::NoButton) showAt(mouse->position().toPoint(), mouse->globalPosition().toPoint());
      return false;
    }
    case QEvent::ToolTip: {
      // Answered here: left to the scene, a help event with no item tooltip hides ours.
      auto* help = static_cast<QHelpEvent*>(event);
      showAt(help->pos(), help->globalPos());
      return true;
    }
    case QEvent::Leave: hide(); return false;
    default: return false;
  }
}

void ChartTooltip::showAt(const QPoint& viewportPosition, const QPoint& globalPosition) {
  const QString text = textAt_(viewportPosition);
  if (text.isEmpty()) return hide();
  QToolTip::showText(globalPosition, text, view_, QRect(), kTooltipShownMs);
}

void ChartTooltip::hide() { QToolTip::hideText(); }

}  // namespace remat::charts
