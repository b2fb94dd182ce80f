#include "image_file.hpp"

#include <QBuffer>

namespace remat::charts {

Status writeBytesFile(const QByteArray& bytes, const QString& path, const WriteOptions& options) {
  return writeFileAtomically(path.toStdString(),
                             std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())), options);
}

Status writePngFile(const QImage& image, const QString& path, const WriteOptions& options) {
  QByteArray bytes;
  QBuffer buffer(&bytes);
  if (image.isNull() || !buffer.open(QIODevice::WriteOnly) || !image.save(&buffer, "PNG"))
    return Status::internal("the image for '" + path.toStdString() + "' could not be encoded as PNG");
  return writeBytesFile(bytes, path, options);
}

}  // namespace remat::charts
