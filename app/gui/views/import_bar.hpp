#pragma once
// An imported transformer's sizes and attention rule, as `remat`'s `--dim NAME=V` and `--attention`
// give them: one field per symbolic dimension of the ONNX model's inputs besides the batch (the ONNX
// batch field's), named as in the model (`sequence`), and the attention rule (fused or math) of its
// transformer_block layers. The bar only shows what it is told; the file controller re-imports the
// model in the background when a field changes (changed()).
#include <QHash>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

class QComboBox;
class QHBoxLayout;
class QLabel;
class QSpinBox;

namespace remat::gui {

class ImportBar : public QWidget {
  Q_OBJECT

 public:
  explicit ImportBar(QWidget* parent = nullptr);

  // The model's symbolic dimensions by name, each with its size (0 or missing: none yet, shown
  // "?"). Replaces the fields when the names differ; emits nothing.
  void setDimensions(const QStringList& names, const QHash<QString, std::int64_t>& sizes = {});
  QStringList dimensionNames() const;
  // The sizes as OnnxImportOptions::dims takes them, in the fields' order (0 where none is set:
  // the importer then names the dimension that needs one).
  std::vector<std::pair<std::string, std::int64_t>> dimensions() const;
  QSpinBox* field(const QString& name) const;  // nullptr when the model has no such dimension

  // The attention box: enabled for a model with attention layers; otherwise `whyNot` is its tooltip.
  void setAttentionEnabled(bool enabled, const QString& whyNot = {});
  bool fusedAttention() const;
  void setFusedAttention(bool fused);  // emits nothing
  QComboBox* attentionBox() const { return attention_; }

 signals:
  void changed();  // a size or the attention rule was changed (by the user, or a test's setValue)

 private:
  QHBoxLayout* fieldsLayout_;
  QList<QPair<QString, QSpinBox*>> fields_;
  QList<QLabel*> labels_;
  QLabel* attentionLabel_;
  QComboBox* attention_;
};

}  // namespace remat::gui
