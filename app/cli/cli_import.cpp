// `remat import MODEL.onnx [--batch N] [--input NAME] [--output CHAIN.json]`: an ONNX model as a remat-chain/1
// file (docs/import.md), with a summary of what became which layer.
#include <ostream>

#include "cli.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/input/onnx/onnx_import.hpp"

namespace remat::cli {
namespace {

struct ImportOptions {
  std::string model;
  std::int64_t batch = 0;
  std::vector<std::string> dims;  // --dim NAME=V
  std::string input;              // --input: an ONNX model's data input by name (empty: its only one)
  std::string output;
};

Status importModel(const ImportOptions& options, Io& io) {
  // A big model takes a while to read: whatever would stop the write is found first.
  const WriteOptions write{{options.model}};
  if (!options.output.empty()) REMAT_RETURN_IF_ERROR(checkOutputFile(options.output, write).withContext("--output"));
  OnnxImportOptions onnx{.batch = options.batch, .input = options.input};
  for (const std::string& text : options.dims) {
    auto dim = parseOnnxDimension(text);
    if (!dim) return dim.status();
    onnx.dims.push_back(*dim);
  }
  auto imported = importOnnxFile(options.model, onnx);
  if (!imported) return imported.status();
  const std::string summary = formatOnnxSummary(imported->summary, options.model);
  if (options.output.empty()) {
    io.out << chainSpecToText(imported->spec);
    io.err << summary;  // stdout is the chain file
    return Status::ok();
  }
  REMAT_RETURN_IF_ERROR(saveChainFile(imported->spec, options.output, write).withContext("--output"));
  io.out << summary << "wrote " << options.output << "\n";
  return Status::ok();
}

}  // namespace

void addImportCommand(CLI::App& app, Action& action) {
  auto options = std::make_shared<ImportOptions>();
  CLI::App* cmd = app.add_subcommand("import", "Write an ONNX model as a remat-chain/1 file (docs/import.md)");
  cmd->add_option("model", options->model, "ONNX model, e.g. from torch.onnx.export")->required();
  cmd->add_option("--batch", options->batch, "Batch size: sets a symbolic batch dimension, overrides a fixed one")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--input", options->input,
                  "The data input, by name (default: the only graph input that reaches the output; every other "
                  "graph input of an export without weights is a parameter)");
  cmd->add_option("--dim", options->dims,
                  "NAME=SIZE, repeatable: a symbolic input dimension, e.g. --dim sequence=2048 for token ids "
                  "[batch, sequence]");
  cmd->add_option("--output,-o", options->output,
                  "Output chain file (default: stdout; the summary then goes to stderr)");
  cmd->callback([options, &action] { action = [options](Io& io) { return importModel(*options, io); }; });
}

}  // namespace remat::cli
