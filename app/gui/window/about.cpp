#include "window/about.hpp"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QObject>
#include <QUrl>
#include <utility>

namespace remat::gui {

QString explorerVersion() { return QStringLiteral(REMAT_VERSION); }

QString docsFolder() {
  const QString installed =
      QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("../share/doc/remat-explorer"));
  for (const QString& folder : {installed, QStringLiteral(REMAT_SOURCE_DOCS_DIR)}) {
    if (QFileInfo::exists(QDir(folder).filePath(QStringLiteral("gui.md")))) return QDir(folder).canonicalPath();
  }
  return {};
}

QString aboutHtml() {
  QString html = QObject::tr(
                     "<h3>Remat Explorer %1</h3>"
                     "<p>Plans which layer outputs a training step keeps (checkpoints) and which it recomputes, "
                     "shows the memory of every op with an exact simulator, and measures a plan on the CPU "
                     "reference or the GPU.</p>"
                     "<p>After Hong et al., <i>GPU Memory Usage Optimization for Backward Propagation in Deep "
                     "Network Training</i> (2025): the O(n&sup3;) DP for objective A, the O(n) algorithm for "
                     "objective R, and the exact optimum of the simulated peak E.</p>")
                     .arg(explorerVersion());
  const QString folder = docsFolder();
  if (folder.isEmpty()) {
    html += QObject::tr("<p>The documentation is in the docs folder of the source tree (docs/gui.md).</p>");
  } else {
    const std::pair<const char*, QString> pages[] = {{"gui.md", QObject::tr("the explorer")},
                                                     {"memory-model.md", QObject::tr("the memory model")},
                                                     {"planners.md", QObject::tr("the planners")},
                                                     {"formats.md", QObject::tr("file formats")}};
    QStringList links;
    for (const auto& [file, title] : pages) {
      const QString url = QUrl::fromLocalFile(QDir(folder).filePath(QString::fromLatin1(file))).toString();
      links << QStringLiteral("<a href=\"%1\">%2</a>").arg(url.toHtmlEscaped(), title);
    }
    html += QObject::tr("<p>Documentation: %1.</p>").arg(links.join(QStringLiteral(", ")));
  }
  html += QObject::tr("<p>Qt %1</p>").arg(QString::fromLatin1(qVersion()));
  return html;
}

}  // namespace remat::gui
