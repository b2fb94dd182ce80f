#include "window/prompts.hpp"

#include <QFileDialog>
#include <QInputDialog>
#include <QMessageBox>
#include <algorithm>

namespace remat::gui {
namespace {

SaveTarget saveFileDialog(QWidget* parent, const QString& title, const QString& suggested, const QString& filters,
                          const QString& selectedFilter) {
  QString chosenFilter = selectedFilter;
  const QString path = QFileDialog::getSaveFileName(parent, title, suggested, filters, &chosenFilter);
  return {path, chosenFilter};
}

SaveChangesAnswer saveChangesDialog(QWidget* parent, const QString& what) {
  const auto button = QMessageBox::warning(
      parent, QObject::tr("Save changes?"), what + QLatin1Char('\n') + QObject::tr("Save them first?"),
      QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel, QMessageBox::Save);
  if (button == QMessageBox::Save) return SaveChangesAnswer::Save;
  if (button == QMessageBox::Discard) return SaveChangesAnswer::Discard;
  return SaveChangesAnswer::Cancel;
}

std::optional<int> askIntDialog(QWidget* parent, const QString& title, const QString& label, int minimum) {
  bool ok = false;
  const int value = QInputDialog::getInt(parent, title, label, std::max(minimum, 1), minimum, 1 << 20, 1, &ok);
  if (!ok) return std::nullopt;
  return value;
}

}  // namespace

Prompts Prompts::dialogs() {
  Prompts prompts;
  prompts.saveFile = saveFileDialog;
  prompts.openFile = [](QWidget* parent, const QString& title, const QString& filters) {
    return QFileDialog::getOpenFileName(parent, title, QString(), filters);
  };
  prompts.saveChanges = saveChangesDialog;
  prompts.askInt = askIntDialog;
  return prompts;
}

}  // namespace remat::gui
