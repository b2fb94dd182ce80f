#pragma once
// Picks a zoo model with its batch size, input resolution (a token model's: its sequence length)
// and, for the transformers, the attention rule (docs/memory-model.md section 12). It has no dtype
// of its own: the step bar's precision is the one control for the dtypes (fp32, bf16, fp16 and the
// mixed modes), and a zoo model loads in it.
#include <QWidget>

#include "remat/model/zoo.hpp"

class QComboBox;
class QSpinBox;

namespace remat::gui {

class ZooBar : public QWidget {
  Q_OBJECT

 public:
  explicit ZooBar(QWidget* parent = nullptr);
  QString modelName() const;
  ZooOptions options() const;
  bool setModelName(const QString& name);
  void setOptions(const ZooOptions& options);
  QSpinBox* sizeField() const { return resolution_; }  // a resolution, or a token model's sequence length
  QComboBox* attentionBox() const { return attention_; }

 signals:
  void loadRequested(const QString& name, const ZooOptions& options);

 private:
  QComboBox* model_;
  QSpinBox* batch_;
  QSpinBox* resolution_;
  QComboBox* attention_;
  bool sequenceField_ = false;  // the size field holds a sequence length (a token model is picked)
  void modelChanged();
};

}  // namespace remat::gui
