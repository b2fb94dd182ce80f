#pragma once
// The chain editor: the layer table with add / remove / move buttons and an inline message that
// says why an edit was refused (the chain keeps its last valid state).
#include <QWidget>

class QHBoxLayout;
class QLabel;
class QTableView;
class QToolButton;

namespace remat::gui {

class ChainTableModel;
class Document;

class LayerPanel : public QWidget {
  Q_OBJECT

 public:
  explicit LayerPanel(Document* document, QWidget* parent = nullptr);

  ChainTableModel* model() const { return model_; }
  QTableView* view() const { return view_; }
  QToolButton* addButton() const { return add_; }
  QString message() const;  // the inline message shown now (empty when hidden)

  // Selects a model layer's row (from the strip's cursor) without emitting layerSelected.
  void selectLayer(std::size_t layer);

 signals:
  void layerSelected(std::size_t layer);  // a row of a model layer was selected
  void statusMessage(const QString& text);
  void newChainRequested();  // Add without a chain: start one to add to

 public slots:
  void addLayer();
  void removeLayer();
  void moveLayer(int delta);

 private:
  QHBoxLayout* buildButtons();
  QTableView* buildTable();
  void connectControls();
  void refreshSummary();  // the chain's name, size, input and parameters over the table
  void showMessage(const QString& text, bool error);
  int currentSpecIndex() const;  // -1 when the input row or nothing is selected
  void updateButtons();

  Document* document_;
  ChainTableModel* model_;
  QTableView* view_;
  QLabel* message_;
  QLabel* summary_;
  QToolButton* add_;
  QToolButton* remove_;
  QToolButton* up_;
  QToolButton* down_;
  bool selecting_ = false;
};

}  // namespace remat::gui
