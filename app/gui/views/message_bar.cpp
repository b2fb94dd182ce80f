#include "views/message_bar.hpp"

#include <QHBoxLayout>
#include <QLabel>
#include <QTimer>
#include <QToolButton>
#include <array>

#include "common/palette.hpp"

namespace remat::gui {

MessageBar::MessageBar(QWidget* parent) : QFrame(parent) {
  setObjectName(QStringLiteral("messageBar"));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(8, 4, 4, 4);
  label_ = new QLabel(this);
  label_->setWordWrap(true);
  label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* close = new QToolButton(this);
  close->setText(QStringLiteral("\u2715"));
  close->setAutoRaise(true);
  close->setToolTip(tr("Close"));
  layout->addWidget(label_, 1);
  layout->addWidget(close);
  hideTimer_ = new QTimer(this);
  hideTimer_->setSingleShot(true);
  connect(hideTimer_, &QTimer::timeout, this, &QWidget::hide);
  connect(close, &QToolButton::clicked, this, &QWidget::hide);
  hide();
}

void MessageBar::showError(const QString& text) { present(text, true); }

void MessageBar::showInfo(const QString& text) { present(text, false); }

QString MessageBar::text() const { return isHidden() ? QString() : label_->text(); }

void MessageBar::present(const QString& text, bool error) {
  error_ = error;
  label_->setText(text);
  using ui::PaletteRole;
  const auto [background, border, foreground] =
      error ? std::array{PaletteRole::ErrorBackground, PaletteRole::ErrorBorder, PaletteRole::ErrorText}
            : std::array{PaletteRole::InfoBackground, PaletteRole::InfoBorder, PaletteRole::InfoText};
  setStyleSheet(QStringLiteral("#messageBar { background: %1; border: 1px solid %2; border-radius: 3px; }"
                               " QLabel { color: %3; }")
                    .arg(ui::paletteName(background), ui::paletteName(border), ui::paletteName(foreground)));
  show();
  if (error) {
    hideTimer_->stop();
  } else {
    hideTimer_->start(8000);
  }
}

}  // namespace remat::gui
