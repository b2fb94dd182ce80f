// The importer's entry points in a build without ONNX (REMAT_WITH_ONNX=OFF): every import says so
// and what to install, so the tools take .onnx paths through the same calls in every build.
#include "remat/input/onnx/onnx_import.hpp"

namespace remat {
namespace {

Status unavailable(const std::string& source) {
  return Status::invalid(source +
                         ": this build of Remat Explorer cannot read ONNX models; install libonnx-dev, "
                         "libprotobuf-dev and protobuf-compiler, and configure again (REMAT_WITH_ONNX=ON)");
}

}  // namespace

bool onnxImportAvailable() { return false; }

Result<OnnxImport> importOnnxModel(const std::string&, const std::string& source, const OnnxImportOptions&) {
  return unavailable(source);
}

Result<OnnxImport> importOnnxFile(const std::string& path, const OnnxImportOptions&) { return unavailable(path); }

Result<std::vector<std::string>> onnxSymbolicDimensions(const std::string& path) { return unavailable(path); }

Result<std::vector<std::string>> onnxSymbolicDimensionsOf(const std::string&, const std::string& source) {
  return unavailable(source);
}

}  // namespace remat
