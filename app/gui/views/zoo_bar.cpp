#include "views/zoo_bar.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <algorithm>

namespace remat::gui {
namespace {

bool isTokenModel(const QString& name) {
  for (const ZooEntry& entry : zooModels())
    if (QString::fromStdString(entry.name) == name) return entry.tokenModel;
  return false;
}

// A token model's own sequence length (its context), as the zoo builds it by default.
int contextOf(const QString& name) {
  auto spec = zooChain(name.toStdString(), ZooOptions{.batch = 1});
  return spec && spec->input.shape.size() == 2 ? static_cast<int>(spec->input.shape[1]) : 1024;
}

// Whether the model has layers with an attention rule (transformer_block: GPT-2, BERT, ViT). Swin's
// window attention has no rule to pick (memory-model.md section 12.6).
bool hasAttentionRule(const QString& name) {
  auto spec = zooChain(name.toStdString(), ZooOptions{.batch = 1});
  return spec && std::any_of(spec->layers.begin(), spec->layers.end(),
                             [](const LayerSpec& layer) { return layer.kind == LayerKind::TransformerBlock; });
}

}  // namespace

ZooBar::ZooBar(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(4);
  model_ = new QComboBox(this);
  for (const ZooEntry& entry : zooModels()) {
    model_->addItem(QString::fromStdString(entry.name));
    model_->setItemData(
        model_->count() - 1,
        QString::fromStdString(entry.description) + tr(" (input at least %1 px)").arg(entry.minResolution),
        Qt::ToolTipRole);
  }
  model_->setToolTip(tr("A torchvision model as a layer chain"));
  setModelName(QStringLiteral("vgg16"));  // what a first start opens (docs/gui.md)
  batch_ = new QSpinBox(this);
  batch_->setRange(1, 65536);
  batch_->setValue(64);
  batch_->setPrefix(tr("batch "));
  batch_->setToolTip(tr("Batch size"));
  resolution_ = new QSpinBox(this);
  resolution_->setRange(1, 8192);
  resolution_->setValue(224);
  resolution_->setSuffix(tr(" px"));
  resolution_->setToolTip(tr("Input resolution (height = width)"));
  attention_ = new QComboBox(this);
  attention_->setObjectName(QStringLiteral("zooAttention"));
  attention_->addItems({QStringLiteral("fused"), QStringLiteral("math")});
  auto* load = new QPushButton(QIcon(QStringLiteral(":/icons/zoo.svg")), tr("Load"), this);
  load->setToolTip(tr("Load the model as a new chain"));
  layout->addWidget(new QLabel(tr("Zoo:"), this));
  layout->addWidget(model_);
  layout->addWidget(batch_);
  layout->addWidget(resolution_);
  layout->addWidget(attention_);
  layout->addWidget(load);
  connect(model_, &QComboBox::currentTextChanged, this, [this]() { modelChanged(); });
  modelChanged();
  connect(load, &QPushButton::clicked, this, [this]() { emit loadRequested(modelName(), options()); });
}

QString ZooBar::modelName() const { return model_->currentText(); }

ZooOptions ZooBar::options() const {
  ZooOptions options;
  options.batch = batch_->value();
  if (sequenceField_) {
    options.sequence = resolution_->value();
  } else {
    options.resolution = resolution_->value();
  }
  options.fusedAttention = attention_->currentText() == QStringLiteral("fused");
  return options;  // float32: the step bar's precision decides the dtypes (FileController::loadZoo)
}

bool ZooBar::setModelName(const QString& name) {
  const int index = model_->findText(name);
  if (index < 0) return false;
  model_->setCurrentIndex(index);
  return true;
}

void ZooBar::setOptions(const ZooOptions& options) {
  batch_->setValue(static_cast<int>(options.batch));
  if (sequenceField_) {
    resolution_->setValue(options.sequence > 0 ? static_cast<int>(options.sequence) : contextOf(modelName()));
  } else {
    resolution_->setValue(static_cast<int>(options.resolution));
  }
  attention_->setCurrentText(options.fusedAttention ? QStringLiteral("fused") : QStringLiteral("math"));
}

// The size field follows the model: a sequence length for the token models (starting at their
// context), a resolution for the others; the attention rule matters only to the transformers.
void ZooBar::modelChanged() {
  const bool tokens = isTokenModel(modelName());
  const bool attention = hasAttentionRule(modelName());
  attention_->setEnabled(attention);
  attention_->setToolTip(
      attention ? tr("Transformers' attention (--attention): fused (PyTorch 2's scaled_dot_product_attention keeps no "
                     "S x S tensor) or math (the softmax probabilities kept, as an exported graph runs it)")
                : tr("%1 has no attention layer with a rule to pick (transformer_block: gpt2, bert_base, vit_b_16)")
                      .arg(modelName()));
  if (tokens == sequenceField_) return;
  sequenceField_ = tokens;
  resolution_->setSuffix(tokens ? tr(" tokens") : tr(" px"));
  resolution_->setToolTip(tokens ? tr("Sequence length") : tr("Input resolution (height = width)"));
  resolution_->setValue(tokens ? contextOf(modelName()) : 224);
}

}  // namespace remat::gui
