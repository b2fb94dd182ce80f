#include "views/chain_table_model.hpp"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <algorithm>
#include <iterator>

#include "common/palette.hpp"
#include "common/qt_text.hpp"
#include "common/units.hpp"
#include "document/plan_insight.hpp"
#include "remat/model/token_input.hpp"

namespace remat::gui {

ChainTableModel::ChainTableModel(Document* document, QObject* parent)
    : QAbstractTableModel(parent), document_(document) {
  rebuildCache();
  connect(document_, &Document::chainChanged, this, [this]() {
    beginResetModel();
    rebuildCache();
    endResetModel();
  });
  // Checkpoint rows are tinted: repaint the rows whose checkpoint state changed.
  connect(document_, &Document::simulationChanged, this, [this]() {
    std::vector<std::size_t> changed;
    std::set_symmetric_difference(shownCheckpoints_.begin(), shownCheckpoints_.end(),
                                  document_->plan().checkpoints.begin(), document_->plan().checkpoints.end(),
                                  std::back_inserter(changed));
    shownCheckpoints_ = document_->plan().checkpoints;
    for (std::size_t layer : changed) {
      const int row = rowForLayer(layer);
      if (row >= 0) emit dataChanged(index(row, 0), index(row, ColumnCount - 1), {Qt::BackgroundRole, Qt::ToolTipRole});
    }
  });
}

void ChainTableModel::rebuildCache() {
  rows_.clear();
  shownCheckpoints_ = document_->plan().checkpoints;
  if (!document_->hasChain()) return;
  const Chain& chain = document_->chain();
  const ChainSpec& spec = chain.spec;
  rows_.resize(spec.layers.size() + 1);
  rows_[0].settings = QString::fromStdString(inputSettingsText(spec));
  rows_[0].outputShape =
      chain.inputShape.empty() ? QStringLiteral("-") : QString::fromStdString(shapeToString(chain.inputShape));
  for (std::size_t l = 1; l <= chain.size(); ++l) {
    const ChainLayer& layer = chain.layers[l - 1];
    RowCache& row = rows_[layer.specIndex + 1];
    row.chainLayer = l;
    row.outputShape =
        layer.outputShape.empty() ? QStringLiteral("-") : QString::fromStdString(shapeToString(layer.outputShape));
  }
  const std::vector<std::string> settings = allLayerSettingsTexts(spec);
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    rows_[i + 1].settings = i < settings.size() ? QString::fromStdString(settings[i]) : QString();
    if (rows_[i + 1].chainLayer == 0) rows_[i + 1].outputShape = tr("(view)");
  }
}

int ChainTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int ChainTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

int ChainTableModel::rowForLayer(std::size_t layer) const {
  if (!document_->hasChain() || layer < 1 || layer > document_->chain().size()) return -1;
  return static_cast<int>(document_->chain().layers[layer - 1].specIndex) + 1;
}

std::size_t ChainTableModel::layerForRow(int row) const {
  return row >= 0 && static_cast<std::size_t>(row) < rows_.size() ? rows_[static_cast<std::size_t>(row)].chainLayer : 0;
}

QVariant ChainTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  static const char* const titles[ColumnCount] = {"#",     "Name",   "Kind",   "Output shape", "Output",
                                                  "Flags", "Extras", "Params", "Settings"};
  static const char* const tips[ColumnCount] = {
      "The layer's number in the memory model (views such as flatten have none)",
      "The layer's name",
      "The layer's kind (double-click to change)",
      "The output shape from shape inference",
      "a: bytes of the output (and of its gradient)",
      "in: the backward reads the input; out: it reads the output",
      "e: bytes the forward saves for the backward in keep mode",
      "p: parameter bytes (the same again for their gradients)",
      "The chain file's fields of this kind, as key=value pairs (double-click to edit)"};
  if (section < 0 || section >= ColumnCount) return {};
  if (role == Qt::DisplayRole) return tr(titles[section]);
  if (role == Qt::ToolTipRole) return tr(tips[section]);
  return {};
}

QVariant ChainTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const Chain& chain = document_->chain();
  const auto row = static_cast<std::size_t>(index.row());
  const RowCache& cache = rows_[row];
  const bool isInput = row == 0;
  const LayerSpec* spec = isInput ? nullptr : &chain.spec.layers[row - 1];
  const ChainLayer* layer = cache.chainLayer ? &chain.layers[cache.chainLayer - 1] : nullptr;
  const int column = index.column();
  if (role == kChainLayerRole) return static_cast<qulonglong>(cache.chainLayer);
  if (role == kSpecIndexRole) return isInput ? -1 : static_cast<int>(row - 1);
  if (role == Qt::BackgroundRole) {
    if (layer && document_->isCheckpoint(cache.chainLayer)) {
      return QBrush(ui::paletteColor(ui::PaletteRole::Checkpoint, 60));
    }
    return {};
  }
  if (role == Qt::TextAlignmentRole) {
    const bool numeric = column == Layer || column == OutputBytes || column == Extras || column == Params;
    return QVariant::fromValue(Qt::Alignment((numeric ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter));
  }
  if (role == Qt::FontRole && column == Settings) {
    QFont font;
    font.setStyleHint(QFont::Monospace);
    font.setFamily(QStringLiteral("monospace"));
    return font;
  }
  if (role == Qt::ToolTipRole) return toolTip(row, column);
  if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
  const bool edit = role == Qt::EditRole;
  switch (column) {
    case Layer: return isInput ? QStringLiteral("x0") : layer ? QString::number(cache.chainLayer) : QStringLiteral("-");
    case Name: return isInput ? tr("input") : QString::fromStdString(spec->name);
    case Kind: return isInput ? ui::toQString(inputDTypeName(chain)) : ui::toQString(kindName(spec->kind));
    case Settings: return cache.settings;
    case OutputShape: return cache.outputShape;
    case OutputBytes: {
      const std::uint64_t bytes = isInput ? chain.inputBytes : layer ? layer->numbers.outBytes : 0;
      if (!isInput && !layer) return QStringLiteral("-");
      return edit ? QString::number(bytes) : ui::formatBytes(bytes);
    }
    case Flags:
      if (!layer) return QStringLiteral("");
      return QString::fromStdString(flagsText(layer->numbers.needsInput, layer->numbers.needsOutput));
    case Extras:
      if (!layer) return QStringLiteral("");
      return edit ? QString::number(layer->numbers.extraBytes) : ui::formatBytes(layer->numbers.extraBytes);
    case Params:
      if (!layer) return QStringLiteral("");
      return edit ? QString::number(layer->numbers.paramBytes) : ui::formatBytes(layer->numbers.paramBytes);
    default: return {};
  }
}

QVariant ChainTableModel::toolTip(std::size_t row, int column) const {
  const std::size_t layer = rows_[row].chainLayer;
  if (row == 0) return tr("The input batch x0 (static memory). Settings: shape and dtype, or bytes.");
  if (layer == 0) return tr("A view: folded into its neighbours, it holds no memory of its own");
  const QStringList parts = savedPartLines(document_->chain(), layer);
  if (column == Extras && !parts.isEmpty())
    return tr("e of layer %1, what its forward saves for its backward:\n%2").arg(layer).arg(parts.join('\n'));
  if (document_->isCheckpoint(layer)) return tr("Layer %1 is a checkpoint").arg(layer);
  return {};
}

Qt::ItemFlags ChainTableModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  Qt::ItemFlags flags = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
  const auto row = static_cast<std::size_t>(index.row());
  if (row >= rows_.size()) return flags;
  const int column = index.column();
  if (row == 0) return column == Settings ? flags | Qt::ItemIsEditable : flags;
  if (column == Name || column == Kind || column == Settings) return flags | Qt::ItemIsEditable;
  const bool abstract = document_->chain().spec.layers[row - 1].kind == LayerKind::Abstract;
  if (abstract && (column == OutputBytes || column == Flags || column == Extras || column == Params))
    return flags | Qt::ItemIsEditable;
  return flags;
}

bool ChainTableModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (!index.isValid() || role != Qt::EditRole || !document_->hasChain()) return false;
  if (!(flags(index) & Qt::ItemIsEditable)) return false;
  const Chain& chain = document_->chain();
  const auto row = static_cast<std::size_t>(index.row());
  const std::string text = value.toString().toStdString();
  if (data(index, Qt::EditRole).toString() == value.toString()) return true;  // nothing changed
  if (row == 0) return submit(editInputSettings(chain.spec, text));
  const std::size_t specIndex = row - 1;
  switch (index.column()) {
    case Name: return submit(editLayerName(chain.spec, specIndex, text));
    case Kind: {
      Result<LayerKind> kind = parseKind(text);
      if (!kind) {
        emit editRefused(QString::fromStdString(kind.status().message()));
        return false;
      }
      return submit(editLayerKind(chain, specIndex, *kind));
    }
    case Settings: return submit(editLayerSettings(chain.spec, specIndex, text));
    case OutputBytes: return submit(editLayerNumber(chain.spec, specIndex, NumberField::OutBytes, text));
    case Flags: return submit(editLayerNumber(chain.spec, specIndex, NumberField::Flags, text));
    case Extras: return submit(editLayerNumber(chain.spec, specIndex, NumberField::ExtraBytes, text));
    case Params: return submit(editLayerNumber(chain.spec, specIndex, NumberField::ParamBytes, text));
    default: return false;
  }
}

bool ChainTableModel::submit(Result<ChainEdit> edit) {
  if (!edit) {
    emit editRefused(QString::fromStdString(edit.status().message()));
    return false;
  }
  const QString description = QString::fromStdString(edit->description);
  const Status status = document_->editChain(edit->spec, description, edit->remap);
  if (!status) {
    emit editRefused(QString::fromStdString(status.message()));
    return false;
  }
  emit editAccepted(description);
  return true;
}

}  // namespace remat::gui
