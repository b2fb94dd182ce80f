#include "remat/usecases/chain_source.hpp"

#include "remat/input/chain_file.hpp"
#include "remat/input/onnx/onnx_import.hpp"

namespace remat {

ChainSourceKind chainSourceKind(const std::string& source) {
  if (source.starts_with(kZooSourcePrefix)) return ChainSourceKind::Zoo;
  return isOnnxFile(source) ? ChainSourceKind::OnnxModel : ChainSourceKind::ChainFile;
}

Result<Chain> openZooChain(const std::string& name, const ZooOptions& options) {
  Result<ChainSpec> spec = zooChain(name, options);
  if (!spec) return spec.status();
  return buildChain(*spec);
}

Result<Chain> openChainSource(const std::string& source, const ChainSourceOptions& options) {
  switch (chainSourceKind(source)) {
    case ChainSourceKind::Zoo: {
      ZooOptions zoo;
      if (options.batch > 0) zoo.batch = options.batch;
      return openZooChain(source.substr(kZooSourcePrefix.size()), zoo);
    }
    case ChainSourceKind::OnnxModel: {
      Result<OnnxImport> imported =
          importOnnxFile(source, OnnxImportOptions{.batch = options.batch, .input = options.input});
      if (!imported) return imported.status();
      return buildChain(imported->spec);
    }
    case ChainSourceKind::ChainFile: break;
  }
  if (options.batch > 0)
    return Status::invalid(source +
                           ": a batch applies to ONNX models and zoo models; a chain file states its batch in "
                           "input.shape");
  return loadChainFile(source);
}

}  // namespace remat
