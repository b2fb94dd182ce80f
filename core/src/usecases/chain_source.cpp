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

namespace {

Result<Chain> openSource(const std::string& source, const ChainSourceOptions& options) {
  switch (chainSourceKind(source)) {
    case ChainSourceKind::Zoo: {
      ZooOptions zoo;
      if (options.batch > 0) zoo.batch = options.batch;
      zoo.sequence = options.sequence;
      if (options.fusedAttention) zoo.fusedAttention = *options.fusedAttention;
      return openZooChain(source.substr(kZooSourcePrefix.size()), zoo);
    }
    case ChainSourceKind::OnnxModel: {
      Result<OnnxImport> imported = importOnnxFile(
          source, OnnxImportOptions{.batch = options.batch, .input = options.input, .dims = options.dims});
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

}  // namespace

Result<Chain> openChainSource(const std::string& source, const ChainSourceOptions& options) {
  if (options.sequence > 0 && chainSourceKind(source) != ChainSourceKind::Zoo)
    return Status::invalid(source +
                           ": a sequence length applies to the zoo's token models (gpt2, bert_base); a "
                           "chain file or an ONNX model states its sequence in input.shape");
  auto chain = openSource(source, options);
  if (!chain || !options.fusedAttention) return chain;
  // The rule is a field of each transformer_block: rewrite them, then infer again.
  bool changed = false;
  ChainSpec spec = chain->spec;
  for (LayerSpec& layer : spec.layers) {
    if (layer.kind != LayerKind::TransformerBlock || layer.fusedAttention == *options.fusedAttention) continue;
    layer.fusedAttention = *options.fusedAttention;
    changed = true;
  }
  if (!changed) return chain;
  const StepOptions step = chain->step;
  auto rebuilt = buildChain(spec);
  if (rebuilt) rebuilt->step = step;
  return rebuilt;
}

}  // namespace remat
