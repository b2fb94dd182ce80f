#include "views/checkpoint_strip.hpp"

#include <QApplication>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "common/palette.hpp"
#include "common/units.hpp"

namespace remat::gui {
namespace {
constexpr double kMargin = 10.0;
constexpr double kHandleTop = 4.0;
constexpr double kCellTop = 16.0;
constexpr double kCellHeight = 34.0;
constexpr double kLabelHeight = 16.0;
constexpr double kHandleTolerancePx = 5.0;
constexpr double kMinCellPx = 2.0;
constexpr int kRefusalShownMs = 6000;
constexpr int kMinSeparatedCellPx = 4;  // narrower cells get no separator: it would hide them
}  // namespace

CheckpointStrip::CheckpointStrip(QWidget* parent) : QWidget(parent) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(false);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  setAccessibleName(tr("Checkpoint strip"));
  setAccessibleDescription(
      tr("One cell per layer. Click or press Space to toggle a checkpoint; drag a handle or "
         "press Shift+Left/Right to move it."));
}

void CheckpointStrip::setChain(const Chain& chain) {
  names_.clear();
  kinds_.clear();
  bytes_.clear();
  for (const ChainLayer& layer : chain.layers) {
    names_.push_back(layer.name);
    kinds_.emplace_back(kindName(layer.kind));
    bytes_.push_back(layer.numbers.outBytes);
  }
  cursor_ = std::clamp<std::size_t>(cursor_, 1, std::max<std::size_t>(1, names_.size()));
  dragging_ = false;
  pressHandle_.reset();
  pressLayer_.reset();
  update();
}

void CheckpointStrip::setPlan(const Plan& plan, std::optional<std::size_t> peakLayer) {
  plan_ = plan;
  peakLayer_ = peakLayer;
  update();
}

void CheckpointStrip::setProportional(bool proportional) {
  proportional_ = proportional;
  update();
}

void CheckpointStrip::setCursor(std::size_t layer) {
  if (names_.empty()) return;
  layer = std::clamp<std::size_t>(layer, 1, names_.size());
  if (layer == cursor_) return;
  cursor_ = layer;
  update();
  emit cursorChanged(cursor_);
}

QRectF CheckpointStrip::cellsRect() const {
  return {kMargin, kCellTop, std::max(1.0, width() - 2 * kMargin), kCellHeight};
}

StripGeometry CheckpointStrip::stripGeometry() const {
  const QRectF r = cellsRect();
  if (!proportional_) return StripGeometry::uniform(names_.size(), r.left(), r.width());
  std::vector<double> weights(bytes_.begin(), bytes_.end());
  return StripGeometry::proportional(weights, r.left(), r.width(), kMinCellPx);
}

QPoint CheckpointStrip::cellPoint(std::size_t layer) const {
  const StripGeometry g = stripGeometry();
  return QPointF(g.cellCenter(layer), cellsRect().center().y()).toPoint();
}

QPoint CheckpointStrip::boundaryPoint(std::size_t boundary) const {
  return QPointF(stripGeometry().boundaryX(boundary), kCellTop + 4.0).toPoint();
}

QSize CheckpointStrip::sizeHint() const { return {600, static_cast<int>(kCellTop + kCellHeight + kLabelHeight + 4)}; }

QSize CheckpointStrip::minimumSizeHint() const { return {120, sizeHint().height()}; }

bool CheckpointStrip::isCheckpoint(std::size_t layer) const {
  return std::binary_search(plan_.checkpoints.begin(), plan_.checkpoints.end(), layer);
}

ui::PaletteRole CheckpointStrip::layerRole(std::size_t layer) const {
  // Layers after the last checkpoint keep their outputs from the forward pass; the others are
  // recomputed segment by segment in the backward pass.
  const std::size_t lastStart = plan_.checkpoints.empty() ? 0 : plan_.checkpoints.back();
  if (isCheckpoint(layer)) return ui::PaletteRole::Checkpoint;
  return layer > lastStart ? ui::PaletteRole::KeptLayer : ui::PaletteRole::RecomputedLayer;
}

QRectF CheckpointStrip::cellRect(const StripGeometry& geometry, std::size_t layer) const {
  const QRectF cells = cellsRect();
  return {geometry.cellLeft(layer), cells.top(), geometry.cellRight(layer) - geometry.cellLeft(layer), cells.height()};
}

void CheckpointStrip::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing, false);
  painter.fillRect(rect(), palette().window());
  if (names_.empty()) {
    painter.setPen(palette().color(QPalette::PlaceholderText));
    painter.drawText(cellsRect(), Qt::AlignCenter, tr("No chain: open a chain file or pick a zoo model"));
    return;
  }
  const StripGeometry g = stripGeometry();
  paintCells(painter, g);
  painter.setRenderHint(QPainter::Antialiasing, true);
  if (peakLayer_ && *peakLayer_ >= 1 && *peakLayer_ <= names_.size()) {
    painter.setPen(QPen(ui::paletteColor(ui::PaletteRole::Peak), 2.0));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(cellRect(g, *peakLayer_).adjusted(-1, -1, 1, 1));
  }
  paintCursor(painter, g);
  paintHandles(painter, g);
  paintLayerNumbers(painter, g);
}

// Cells on whole pixels, then a one-pixel separator at every boundary wide enough for one: drawn
// after all fills, so no neighbour's fill covers it and every pair of layers stays apart.
void CheckpointStrip::paintCells(QPainter& painter, const StripGeometry& g) const {
  const QRectF cells = cellsRect();
  const int top = static_cast<int>(std::lround(cells.top()));
  const int height = static_cast<int>(std::lround(cells.height()));
  const auto edge = [&g](std::size_t boundary) { return static_cast<int>(std::lround(g.boundaryX(boundary))); };
  const std::size_t n = names_.size();
  // One fill per run of equal pixels (cellRuns): a thousand one-pixel fills were a tenth of a
  // checkpoint toggle's repaint.
  std::vector<int> edges(n + 1);
  std::vector<int> roles(n);
  for (std::size_t b = 0; b <= n; ++b) edges[b] = edge(b);
  for (std::size_t l = 1; l <= n; ++l) roles[l - 1] = static_cast<int>(layerRole(l));
  for (const CellRun& run : cellRuns(edges, roles))
    painter.fillRect(QRect(run.left, top, run.right - run.left, height),
                     ui::paletteColor(static_cast<ui::PaletteRole>(run.value)));
  // The last layer's output is always kept: hatched, it cannot be a checkpoint.
  const QRect last(edge(n - 1), top, std::max(1, edge(n) - edge(n - 1)), height);
  painter.fillRect(last, QBrush(ui::paletteColor(ui::PaletteRole::Forward, 110), Qt::BDiagPattern));
  const QColor separator = palette().color(QPalette::Base);
  for (std::size_t b = 1; b < n; ++b) {
    if (std::min(edge(b) - edge(b - 1), edge(b + 1) - edge(b)) >= kMinSeparatedCellPx)
      painter.fillRect(QRect(edge(b), top, 1, height), separator);
  }
}

// The focus cursor: a dashed frame when focused, a small caret otherwise.
void CheckpointStrip::paintCursor(QPainter& painter, const StripGeometry& g) const {
  const QRectF cell = cellRect(g, cursor_);
  QPen pen(palette().color(QPalette::Text), hasFocus() ? 1.5 : 1.0, hasFocus() ? Qt::DashLine : Qt::SolidLine);
  painter.setPen(pen);
  painter.setBrush(Qt::NoBrush);
  if (hasFocus()) painter.drawRect(cell.adjusted(-2, -2, 2, 2));
  QPainterPath caret;
  const double cx = cell.center().x();
  caret.moveTo(cx, cell.bottom() + 2);
  caret.lineTo(cx - 4, cell.bottom() + 7);
  caret.lineTo(cx + 4, cell.bottom() + 7);
  caret.closeSubpath();
  painter.fillPath(caret, palette().color(QPalette::Text));
}

void CheckpointStrip::paintHandles(QPainter& painter, const StripGeometry& g) const {
  const double bottom = cellsRect().bottom();
  auto drawHandle = [&](double x, const QColor& color, bool dashed) {
    painter.setPen(QPen(color, 2.0, dashed ? Qt::DashLine : Qt::SolidLine));
    painter.drawLine(QPointF(x, kHandleTop + 6), QPointF(x, bottom + 2));
    QPainterPath head;
    head.moveTo(x - 5, kHandleTop);
    head.lineTo(x + 5, kHandleTop);
    head.lineTo(x, kHandleTop + 8);
    head.closeSubpath();
    painter.fillPath(head, color);
  };
  const QColor handle = ui::paletteColor(ui::PaletteRole::CheckpointHandle);
  for (std::size_t c : plan_.checkpoints) {
    QColor color = handle;
    if (dragging_ && pressHandle_ == c) color.setAlpha(90);
    drawHandle(g.boundaryX(c), color, false);
  }
  if (dragging_ && dragTarget_) drawHandle(g.boundaryX(*dragTarget_), handle.darker(130), true);
}

// Layer numbers under the strip: first, last and a few in between when they fit.
void CheckpointStrip::paintLayerNumbers(QPainter& painter, const StripGeometry& g) const {
  const QRectF cells = cellsRect();
  const std::size_t n = names_.size();
  painter.setPen(palette().color(QPalette::WindowText));
  QFont font = painter.font();
  font.setPointSizeF(font.pointSizeF() * 0.85);
  painter.setFont(font);
  const double labelTop = cells.bottom() + 7;
  const std::size_t labels = std::clamp<std::size_t>(static_cast<std::size_t>(cells.width() / 70.0), 2, 12);
  double lastRight = -1e9;
  for (std::size_t i = 0; i < labels; ++i) {
    const std::size_t l = 1 + (n - 1) * i / std::max<std::size_t>(1, labels - 1);
    const double x = g.cellCenter(l);
    const QRectF box(x - 20, labelTop, 40, kLabelHeight);
    if (box.left() <= lastRight) continue;
    painter.drawText(box, Qt::AlignHCenter | Qt::AlignTop, QString::number(l));
    lastRight = box.right();
  }
}

void CheckpointStrip::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton || names_.empty()) return QWidget::mousePressEvent(event);
  const StripGeometry g = stripGeometry();
  const double x = event->position().x();
  pressPos_ = event->position().toPoint();
  dragging_ = false;
  dragTarget_.reset();
  pressHandle_ = g.handleAt(x, plan_.checkpoints, kHandleTolerancePx);
  pressLayer_ = pressHandle_ ? std::nullopt : g.layerAt(x);
  event->accept();
}

void CheckpointStrip::mouseMoveEvent(QMouseEvent* event) {
  // The press state says whether a handle is held (a move event's buttons are not needed).
  if (!pressHandle_) return QWidget::mouseMoveEvent(event);
  if (!dragging_ && (event->position().toPoint() - pressPos_).manhattanLength() < QApplication::startDragDistance())
    return;
  dragging_ = true;
  dragTarget_ = stripGeometry().snapBoundary(event->position().x(), 1, names_.size() - 1);
  update();
}

void CheckpointStrip::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return QWidget::mouseReleaseEvent(event);
  const std::optional<std::size_t> handle = pressHandle_;
  const std::optional<std::size_t> layer = pressLayer_;
  const bool dragged = dragging_;
  const std::optional<std::size_t> target = dragTarget_;
  pressHandle_.reset();
  pressLayer_.reset();
  dragging_ = false;
  dragTarget_.reset();
  update();
  if (dragged && handle && target) {
    if (*target != *handle) requestMove(*handle, *target);
  } else if (handle) {
    setCursor(*handle);
    emit toggleRequested(*handle);
  } else if (layer) {
    setCursor(*layer);
    emit toggleRequested(*layer);
  }
}

void CheckpointStrip::showRefusal(std::size_t layer, const QString& text) {
  if (names_.empty()) return;
  layer = std::clamp<std::size_t>(layer, 1, names_.size());
  QToolTip::showText(mapToGlobal(cellPoint(layer)), text, this, QRect(), kRefusalShownMs);
}

void CheckpointStrip::requestMove(std::size_t from, std::size_t to) {
  emit moveRequested(from, to);
  // The Document answers synchronously through setPlan; the cursor follows an accepted move.
  if (isCheckpoint(to) && !isCheckpoint(from)) setCursor(to);
}

void CheckpointStrip::keyPressEvent(QKeyEvent* event) {
  if (names_.empty()) return QWidget::keyPressEvent(event);
  const std::size_t n = names_.size();
  const bool shift = event->modifiers() & Qt::ShiftModifier;
  switch (event->key()) {
    case Qt::Key_Left:
    case Qt::Key_Right: {
      const bool left = event->key() == Qt::Key_Left;
      if (shift) {
        if (isCheckpoint(cursor_)) {
          const std::size_t to = left ? cursor_ - 1 : cursor_ + 1;
          if (to >= 1 && to < n) requestMove(cursor_, to);
        }
      } else {
        setCursor(left ? (cursor_ > 1 ? cursor_ - 1 : 1) : cursor_ + 1);
      }
      break;
    }
    case Qt::Key_Home: setCursor(1); break;
    case Qt::Key_End: setCursor(n); break;
    case Qt::Key_PageUp: setCursor(cursor_ > 10 ? cursor_ - 10 : 1); break;
    case Qt::Key_PageDown: setCursor(cursor_ + 10); break;
    case Qt::Key_Space:
    case Qt::Key_Return:
    case Qt::Key_Enter: emit toggleRequested(cursor_); break;
    case Qt::Key_Delete:
    case Qt::Key_Backspace:
      if (isCheckpoint(cursor_)) emit toggleRequested(cursor_);
      break;
    default: return QWidget::keyPressEvent(event);
  }
  event->accept();
}

bool CheckpointStrip::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const std::optional<std::size_t> layer = stripGeometry().layerAt(help->pos().x());
    if (layer && !names_.empty()) {
      QToolTip::showText(help->globalPos(), layerTooltip(*layer), this);
    } else {
      QToolTip::hideText();
      event->ignore();
    }
    return true;
  }
  if (event->type() == QEvent::FocusIn || event->type() == QEvent::FocusOut) update();
  return QWidget::event(event);
}

QString CheckpointStrip::layerTooltip(std::size_t layer) const {
  QString role;
  switch (layerRole(layer)) {
    case ui::PaletteRole::Checkpoint: role = tr("checkpoint: its output is kept"); break;
    case ui::PaletteRole::KeptLayer: role = tr("kept from the forward pass (last segment)"); break;
    default: role = tr("recomputed in the backward pass"); break;
  }
  if (layer == names_.size()) role += tr("\nthe last layer: its output is always kept, it cannot be a checkpoint");
  return tr("Layer %1: %2 (%3)\noutput %4\n%5")
      .arg(layer)
      .arg(QString::fromStdString(names_[layer - 1]), QString::fromStdString(kinds_[layer - 1]),
           ui::formatBytes(bytes_[layer - 1]), role);
}

}  // namespace remat::gui
