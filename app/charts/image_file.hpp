#pragma once
// Images written the way every file of the project is written (remat/input/atomic_file.hpp): encoded
// in memory, then through writeFileAtomically, so a failed export leaves no half file and never
// follows a planted link.
#include <QImage>
#include <QString>

#include "remat/base/status.hpp"
#include "remat/input/atomic_file.hpp"

namespace remat::charts {

Status writePngFile(const QImage& image, const QString& path, const WriteOptions& options = {});

// Bytes already encoded (an SVG document).
Status writeBytesFile(const QByteArray& bytes, const QString& path, const WriteOptions& options = {});

}  // namespace remat::charts
