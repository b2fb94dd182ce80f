#pragma once
// An inline message above the tabs (errors stay until closed, information fades after a while),
// so errors never need a blocking dialog.
#include <QFrame>

class QLabel;
class QTimer;

namespace remat::gui {

class MessageBar : public QFrame {
  Q_OBJECT

 public:
  explicit MessageBar(QWidget* parent = nullptr);
  void showError(const QString& text);
  void showInfo(const QString& text);
  QString text() const;
  bool isError() const { return error_; }

 private:
  void present(const QString& text, bool error);
  QLabel* label_;
  QTimer* hideTimer_;
  bool error_ = false;
};

}  // namespace remat::gui
