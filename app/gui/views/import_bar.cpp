#include "views/import_bar.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <algorithm>
#include <limits>

namespace remat::gui {
namespace {

const QString kFused = QStringLiteral("fused");
const QString kMath = QStringLiteral("math");

}  // namespace

ImportBar::ImportBar(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(8, 0, 0, 0);  // apart from the ONNX batch field before it
  layout->setSpacing(4);
  fieldsLayout_ = new QHBoxLayout();
  fieldsLayout_->setSpacing(4);
  layout->addLayout(fieldsLayout_);
  attentionLabel_ = new QLabel(tr("attention:"), this);
  layout->addWidget(attentionLabel_);
  attention_ = new QComboBox(this);
  attention_->setObjectName(QStringLiteral("onnxAttention"));
  attention_->addItems({kFused, kMath});
  layout->addWidget(attention_);
  setAttentionEnabled(false);
  connect(attention_, &QComboBox::currentTextChanged, this, &ImportBar::changed);
}

void ImportBar::setDimensions(const QStringList& names, const QHash<QString, std::int64_t>& sizes) {
  if (names != dimensionNames()) {
    for (auto& [name, box] : fields_) delete box;
    for (QLabel* label : labels_) delete label;
    fields_.clear();
    labels_.clear();
    for (const QString& name : names) {
      auto* label = new QLabel(name + QLatin1Char(':'), this);
      auto* box = new QSpinBox(this);
      box->setObjectName(QStringLiteral("dim_") + name);
      // The whole range `--dim` takes: a size the model cannot have (past its position table, an
      // S x S that overflows) is the importer's to refuse, with its message.
      box->setRange(0, std::numeric_limits<int>::max());
      box->setSpecialValueText(QStringLiteral("?"));
      box->setGroupSeparatorShown(true);  // 2,048 tokens, and a huge size reads as one
      box->setMinimumWidth(box->fontMetrics().horizontalAdvance(QStringLiteral("000,000")) + 32);
      box->setMaximumWidth(box->minimumWidth());  // not as wide as 2^31 - 1: the bar fits a 1,024 px row
      box->setToolTip(tr("The model's symbolic dimension '%1' (--dim %1=N): changing it imports the model again. "
                         "For token ids [batch, sequence], the sequence length in tokens")
                          .arg(name));
      fieldsLayout_->addWidget(label);
      fieldsLayout_->addWidget(box);
      labels_ << label;
      fields_ << qMakePair(name, box);
      connect(box, &QSpinBox::valueChanged, this, &ImportBar::changed);
    }
  }
  for (auto& [name, box] : fields_) {
    const QSignalBlocker blocker(box);
    const std::int64_t size = sizes.value(name, 0);
    box->setValue(static_cast<int>(std::clamp<std::int64_t>(size, 0, box->maximum())));
  }
}

QStringList ImportBar::dimensionNames() const {
  QStringList names;
  for (const auto& [name, box] : fields_) names << name;
  return names;
}

std::vector<std::pair<std::string, std::int64_t>> ImportBar::dimensions() const {
  std::vector<std::pair<std::string, std::int64_t>> dims;
  for (const auto& [name, box] : fields_) dims.emplace_back(name.toStdString(), box->value());
  return dims;
}

QSpinBox* ImportBar::field(const QString& name) const {
  for (const auto& [each, box] : fields_)
    if (each == name) return box;
  return nullptr;
}

void ImportBar::setAttentionEnabled(bool enabled, const QString& whyNot) {
  attention_->setEnabled(enabled);
  attentionLabel_->setEnabled(enabled);
  attention_->setToolTip(enabled ? tr("The attention rule of the model's transformer layers (--attention): fused "
                                      "(PyTorch 2's scaled_dot_product_attention keeps no S x S tensor) or math (the "
                                      "softmax probabilities kept, as the exported graph computes it)")
                                 : whyNot);
  attentionLabel_->setToolTip(attention_->toolTip());
}

bool ImportBar::fusedAttention() const { return attention_->currentText() == kFused; }

void ImportBar::setFusedAttention(bool fused) {
  const QSignalBlocker blocker(attention_);
  attention_->setCurrentText(fused ? kFused : kMath);
}

}  // namespace remat::gui
