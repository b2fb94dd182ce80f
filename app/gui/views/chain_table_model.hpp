#pragma once
// The layer table: row 0 is the input, then one row per layer of the chain spec (flatten views
// included, though the memory model folds them away). Columns show each layer's name, kind,
// output shape and bytes, flags (in/out), extras, parameters and settings (the kind's fields). Edits go to the
// Document as chain edits: a refused edit keeps the old chain and is reported by editRefused.
#include <QAbstractTableModel>
#include <vector>

#include "document/chain_edits.hpp"
#include "document/document.hpp"

namespace remat::gui {

class ChainTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { Layer, Name, Kind, OutputShape, OutputBytes, Flags, Extras, Params, Settings, ColumnCount };
  static constexpr int kChainLayerRole = Qt::UserRole + 1;  // the model layer 1..n of a row (0: input / view)
  static constexpr int kSpecIndexRole = Qt::UserRole + 2;   // index into ChainSpec::layers (-1: input)

  explicit ChainTableModel(Document* document, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;

  // The row of a model layer (1..n), and the other way round (0 for the input and views).
  int rowForLayer(std::size_t layer) const;
  std::size_t layerForRow(int row) const;

 signals:
  void editRefused(const QString& message);
  void editAccepted(const QString& description);

 private:
  struct RowCache {
    std::size_t chainLayer = 0;  // 1..n, 0 for the input and flatten views
    QString settings;
    QString outputShape;
  };
  void rebuildCache();
  bool submit(Result<ChainEdit> edit);
  QVariant toolTip(std::size_t row, int column) const;

  Document* document_;
  std::vector<RowCache> rows_;                 // one per table row
  std::vector<std::size_t> shownCheckpoints_;  // the plan the tints show
};

}  // namespace remat::gui
