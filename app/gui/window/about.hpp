#pragma once
// What Help > About says: the version, what the program does, the paper it follows, and links to
// the documentation where it is on this machine.
#include <QString>

namespace remat::gui {

// The program's version (the CMake project's).
QString explorerVersion();

// The folder holding the docs (gui.md, memory-model.md, ...): the installed copy
// (<prefix>/share/doc/remat-explorer next to <prefix>/bin), else the source tree this program was
// built from; empty when neither is there.
QString docsFolder();

// The About box's rich text.
QString aboutHtml();

}  // namespace remat::gui
