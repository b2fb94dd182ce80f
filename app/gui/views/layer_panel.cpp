#include "views/layer_panel.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include "common/palette.hpp"
#include "common/qt_text.hpp"
#include "common/units.hpp"
#include "document/chain_edits.hpp"
#include "document/document.hpp"
#include "remat/model/token_input.hpp"
#include "views/chain_table_model.hpp"

namespace remat::gui {
namespace {

// Kind cells edit through a list of the kinds a chain file knows.
class KindDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  QWidget* createEditor(QWidget* parent, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    if (index.column() != ChainTableModel::Kind) return QStyledItemDelegate::createEditor(parent, option, index);
    auto* combo = new QComboBox(parent);
    for (LayerKind kind : layerKinds()) combo->addItem(ui::toQString(kindName(kind)));
    return combo;
  }
  void setEditorData(QWidget* editor, const QModelIndex& index) const override {
    if (auto* combo = qobject_cast<QComboBox*>(editor)) {
      combo->setCurrentText(index.data(Qt::EditRole).toString());
      return;
    }
    QStyledItemDelegate::setEditorData(editor, index);
  }
  void setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const override {
    if (auto* combo = qobject_cast<QComboBox*>(editor)) {
      model->setData(index, combo->currentText(), Qt::EditRole);
      return;
    }
    QStyledItemDelegate::setModelData(editor, model, index);
  }
};

QToolButton* makeButton(QWidget* parent, const QString& text, const QString& tip, const QString& icon) {
  auto* button = new QToolButton(parent);
  button->setText(text);
  button->setToolTip(tip);
  button->setIcon(QIcon(icon));
  button->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  button->setAutoRaise(true);
  return button;
}

}  // namespace

LayerPanel::LayerPanel(Document* document, QWidget* parent)
    : QWidget(parent), document_(document), model_(new ChainTableModel(document, this)) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(4);
  summary_ = new QLabel(this);
  summary_->setObjectName(QStringLiteral("chainSummary"));
  summary_->setWordWrap(true);
  layout->addWidget(summary_);
  layout->addLayout(buildButtons());
  message_ = new QLabel(this);
  message_->setObjectName(QStringLiteral("layerMessage"));
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->hide();
  layout->addWidget(message_);
  layout->addWidget(buildTable(), 1);
  connectControls();
  refreshSummary();
}

QHBoxLayout* LayerPanel::buildButtons() {
  auto* buttons = new QHBoxLayout();
  add_ = makeButton(this, tr("Add"), tr("Insert a layer after the selected one (Ctrl+Shift+N)"), ":/icons/add.svg");
  remove_ = makeButton(this, tr("Remove"), tr("Remove the selected layer"), ":/icons/remove.svg");
  up_ = makeButton(this, tr("Up"), tr("Move the selected layer up"), ":/icons/up.svg");
  down_ = makeButton(this, tr("Down"), tr("Move the selected layer down"), ":/icons/down.svg");
  for (QToolButton* b : {add_, remove_, up_, down_}) buttons->addWidget(b);
  buttons->addStretch(1);
  return buttons;
}

QTableView* LayerPanel::buildTable() {
  view_ = new QTableView(this);
  view_->setModel(model_);
  view_->setItemDelegate(new KindDelegate(view_));
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed |
                         QAbstractItemView::AnyKeyPressed);
  view_->setAlternatingRowColors(true);
  view_->verticalHeader()->hide();
  view_->verticalHeader()->setDefaultSectionSize(view_->fontMetrics().height() + 8);
  view_->horizontalHeader()->setStretchLastSection(false);
  view_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  view_->setWordWrap(false);
  view_->setAccessibleName(tr("Layer table"));
  const int widths[ChainTableModel::ColumnCount] = {34, 96, 78, 140, 78, 52, 64, 74, 260};
  for (int c = 0; c < ChainTableModel::ColumnCount; ++c) view_->setColumnWidth(c, widths[c]);
  return view_;
}

void LayerPanel::connectControls() {
  connect(add_, &QToolButton::clicked, this, &LayerPanel::addLayer);
  connect(remove_, &QToolButton::clicked, this, &LayerPanel::removeLayer);
  connect(up_, &QToolButton::clicked, this, [this]() { moveLayer(-1); });
  connect(down_, &QToolButton::clicked, this, [this]() { moveLayer(1); });
  connect(model_, &ChainTableModel::editRefused, this, [this](const QString& text) { showMessage(text, true); });
  connect(model_, &ChainTableModel::editAccepted, this, [this](const QString& text) {
    showMessage({}, false);
    emit statusMessage(text);
  });
  connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& current) {
    updateButtons();
    if (selecting_ || !current.isValid()) return;
    const std::size_t layer = model_->layerForRow(current.row());
    if (layer > 0) emit layerSelected(layer);
  });
  connect(document_, &Document::chainChanged, this, &LayerPanel::refreshSummary);
  // A refused edit's message is about the chain it was made on.
  connect(document_, &Document::chainReplaced, this, [this]() { showMessage({}, false); });
}

void LayerPanel::refreshSummary() {
  if (!document_->hasChain()) {
    summary_->setText(tr("No chain: open one, load a zoo model, or press Add"));
    updateButtons();
    return;
  }
  const Chain& chain = document_->chain();
  const QString input = chain.inputShape.empty() ? ui::formatBytes(chain.inputBytes)
                                                 : QString::fromStdString(shapeToString(chain.inputShape));
  summary_->setText(tr("<b>%1</b> &middot; %2 layers &middot; input %3 %4 &middot; parameters %5")
                        .arg(QString::fromStdString(chain.name).toHtmlEscaped())
                        .arg(chain.size())
                        .arg(input, ui::toQString(inputDTypeName(chain)), ui::formatBytes(chain.paramBytes())));
  updateButtons();
}

QString LayerPanel::message() const { return message_->isHidden() ? QString() : message_->text(); }

void LayerPanel::showMessage(const QString& text, bool error) {
  if (text.isEmpty()) {
    message_->clear();
    message_->hide();
    return;
  }
  message_->setText(text);
  using ui::PaletteRole;
  message_->setStyleSheet(
      error ? QStringLiteral(
                  "QLabel { background: %1; color: %2; border: 1px solid %3; border-radius: 3px; padding: 4px; }")
                  .arg(ui::paletteName(PaletteRole::ErrorBackground), ui::paletteName(PaletteRole::ErrorText),
                       ui::paletteName(PaletteRole::ErrorBorder))
            : QString());
  message_->show();
  if (error) emit statusMessage(tr("Edit refused: %1").arg(text));
}

int LayerPanel::currentSpecIndex() const {
  const QModelIndex current = view_->currentIndex();
  if (!current.isValid()) return -1;
  return current.data(ChainTableModel::kSpecIndexRole).toInt();
}

void LayerPanel::updateButtons() {
  const int spec = currentSpecIndex();
  const int count = document_->hasChain() ? static_cast<int>(document_->chain().spec.layers.size()) : 0;
  add_->setEnabled(true);  // without a chain it starts one
  add_->setToolTip(document_->hasChain() ? tr("Insert a layer after the selected one (Ctrl+Shift+N)")
                                         : tr("Start a new chain to edit (File > New chain)"));
  remove_->setEnabled(spec >= 0 && count > 1);
  up_->setEnabled(spec > 0);
  down_->setEnabled(spec >= 0 && spec + 1 < count);
}

void LayerPanel::selectLayer(std::size_t layer) {
  const int row = model_->rowForLayer(layer);
  if (row < 0) return;
  selecting_ = true;
  view_->setCurrentIndex(model_->index(row, ChainTableModel::Name));
  view_->scrollTo(model_->index(row, 0));
  selecting_ = false;
}

void LayerPanel::addLayer() {
  if (!document_->hasChain()) {
    emit newChainRequested();
    return;
  }
  const int spec = currentSpecIndex();
  const std::size_t at = spec < 0 ? document_->chain().spec.layers.size() : static_cast<std::size_t>(spec) + 1;
  const ChainEdit edit = editInsertLayer(document_->chain(), at);
  const Status status = document_->editChain(edit.spec, QString::fromStdString(edit.description), edit.remap);
  if (!status) return showMessage(QString::fromStdString(status.message()), true);
  showMessage({}, false);
  view_->setCurrentIndex(model_->index(static_cast<int>(at) + 1, ChainTableModel::Name));
}

void LayerPanel::removeLayer() {
  const int spec = currentSpecIndex();
  if (spec < 0) return showMessage(tr("Select a layer to remove"), true);
  Result<ChainEdit> edit = editRemoveLayer(document_->chain().spec, static_cast<std::size_t>(spec));
  Status status =
      edit ? document_->editChain(edit->spec, QString::fromStdString(edit->description), edit->remap) : edit.status();
  if (!status) return showMessage(QString::fromStdString(status.message()), true);
  showMessage({}, false);
  const int rows = model_->rowCount();
  view_->setCurrentIndex(model_->index(std::min(spec + 1, rows - 1), ChainTableModel::Name));
}

void LayerPanel::moveLayer(int delta) {
  const int spec = currentSpecIndex();
  if (spec < 0) return showMessage(tr("Select a layer to move"), true);
  Result<ChainEdit> edit = editMoveLayer(document_->chain().spec, static_cast<std::size_t>(spec), delta);
  Status status =
      edit ? document_->editChain(edit->spec, QString::fromStdString(edit->description), edit->remap) : edit.status();
  if (!status) return showMessage(QString::fromStdString(status.message()), true);
  showMessage({}, false);
  view_->setCurrentIndex(model_->index(spec + delta + 1, ChainTableModel::Name));
}

}  // namespace remat::gui
