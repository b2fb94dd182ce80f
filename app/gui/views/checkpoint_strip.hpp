#pragma once
// The checkpoint strip: one cell per layer along the chain (width optionally proportional to the
// layer's output bytes), checkpoints drawn as handles on layer boundaries. A click toggles a
// checkpoint, dragging a handle moves it (snapping to boundaries), and the keyboard does the same:
// arrows move a focus cursor, Space toggles, Shift+arrows move the checkpoint under the cursor.
// The strip only asks (signals); the Document decides and the strip shows the plan it is given.
#include <QWidget>
#include <optional>
#include <string>
#include <vector>

#include "common/palette.hpp"
#include "remat/memory/plan.hpp"
#include "remat/model/chain.hpp"
#include "views/strip_geometry.hpp"

class QPainter;

namespace remat::gui {

class CheckpointStrip : public QWidget {
  Q_OBJECT

 public:
  explicit CheckpointStrip(QWidget* parent = nullptr);

  void setChain(const Chain& chain);
  void setPlan(const Plan& plan, std::optional<std::size_t> peakLayer);
  void setProportional(bool proportional);
  bool proportional() const { return proportional_; }
  std::size_t cursor() const { return cursor_; }
  void setCursor(std::size_t layer);
  std::size_t layerCount() const { return names_.size(); }
  // Says at the layer's cell why a click or key there was refused (a tooltip for a few seconds).
  void showRefusal(std::size_t layer, const QString& text);

  // Where things are, in widget pixels (for tests and accessibility).
  StripGeometry stripGeometry() const;
  QPoint cellPoint(std::size_t layer) const;         // the centre of a layer's cell
  QPoint boundaryPoint(std::size_t boundary) const;  // on the boundary after a layer, at handle height

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 signals:
  void toggleRequested(std::size_t layer);
  void moveRequested(std::size_t from, std::size_t to);
  void cursorChanged(std::size_t layer);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  bool event(QEvent* event) override;

 private:
  QRectF cellsRect() const;
  QRectF cellRect(const StripGeometry& geometry, std::size_t layer) const;
  bool isCheckpoint(std::size_t layer) const;
  // What the plan does with a layer's output: Checkpoint, KeptLayer or RecomputedLayer.
  ui::PaletteRole layerRole(std::size_t layer) const;
  void paintCells(QPainter& painter, const StripGeometry& geometry) const;
  void paintCursor(QPainter& painter, const StripGeometry& geometry) const;
  void paintHandles(QPainter& painter, const StripGeometry& geometry) const;
  void paintLayerNumbers(QPainter& painter, const StripGeometry& geometry) const;
  QString layerTooltip(std::size_t layer) const;
  void requestMove(std::size_t from, std::size_t to);

  std::vector<std::string> names_;
  std::vector<std::string> kinds_;
  std::vector<std::uint64_t> bytes_;
  Plan plan_;
  std::optional<std::size_t> peakLayer_;
  bool proportional_ = false;
  std::size_t cursor_ = 1;

  // Mouse state: what the press hit, and the snapped target while a handle is dragged.
  std::optional<std::size_t> pressHandle_;
  std::optional<std::size_t> pressLayer_;
  QPoint pressPos_;
  bool dragging_ = false;
  std::optional<std::size_t> dragTarget_;
};

}  // namespace remat::gui
