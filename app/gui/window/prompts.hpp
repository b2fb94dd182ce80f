#pragma once
// The questions the explorer asks the user: where to save, which file to open, whether to save
// edits, a number it cannot go on without. Each one is a replaceable function, so tests (offscreen,
// where nobody answers a modal dialog) answer them instead; the defaults show Qt's dialogs.
#include <QString>
#include <functional>
#include <optional>

class QWidget;

namespace remat::gui {

// A save dialog's answer: the file name, and the type (name filter) the user picked, which decides
// the format even when the name says otherwise. An empty path: cancelled.
struct SaveTarget {
  QString path;
  QString filter;
};

enum class SaveChangesAnswer { Save, Discard, Cancel };

struct Prompts {
  // title, suggested name, filters ("A (*.a);;B (*.b)"), the filter selected first.
  std::function<SaveTarget(QWidget* parent, const QString& title, const QString& suggested, const QString& filters,
                           const QString& selectedFilter)>
      saveFile;
  // title, filters; an empty string: cancelled.
  std::function<QString(QWidget* parent, const QString& title, const QString& filters)> openFile;
  // "The chain 'resnet18' has unsaved edits." Save, Discard or Cancel.
  std::function<SaveChangesAnswer(QWidget* parent, const QString& what)> saveChanges;
  // title, question, the smallest value; nothing: cancelled.
  std::function<std::optional<int>(QWidget* parent, const QString& title, const QString& label, int minimum)> askInt;

  static Prompts dialogs();  // Qt's dialogs
};

}  // namespace remat::gui
