#include "cli.hpp"

#include <cstdio>
#include <exception>
#include <ostream>

#include "remat/io/chain_file.hpp"
#include "remat/io/onnx/onnx_import.hpp"
#include "remat/model/zoo.hpp"

namespace remat::cli {

int exitCodeFor(const Status& status) {
  switch (status.code()) {
    case ErrorCode::Ok: return kExitOk;
    case ErrorCode::InvalidInput:
    case ErrorCode::IoError:
    case ErrorCode::OutOfMemory: return kExitBadInput;
    case ErrorCode::Cancelled:
    case ErrorCode::Internal: return kExitInternal;
  }
  return kExitInternal;
}

void addChainArgument(CLI::App* command, std::string& path, std::int64_t& batch) {
  command->add_option("chain", path, "Chain file (remat-chain/1), ONNX model (.onnx) or zoo:NAME")->required();
  command
      ->add_option("--batch", batch,
                   "Batch size of an ONNX model (sets a symbolic batch, overrides a fixed one) "
                   "or of a zoo model (default 64)")
      ->check(CLI::PositiveNumber);
}

Result<Chain> loadChainArgument(const std::string& path, std::int64_t batch) {
  if (path.rfind("zoo:", 0) == 0) {
    ZooOptions options;
    if (batch > 0) options.batch = batch;
    auto spec = zooChain(path.substr(4), options);
    if (!spec) return spec.status();
    return buildChain(*spec);
  }
  if (isOnnxFile(path)) {
    auto imported = importOnnxFile(path, OnnxImportOptions{batch});
    if (!imported) return imported.status();
    return buildChain(imported->spec);
  }
  if (batch > 0)
    return Status::invalid(path +
                           ": --batch applies to ONNX models and zoo:NAME; a chain file states its batch in "
                           "input.shape");
  return loadChainFile(path);
}

int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool errIsTerminal) {
  try {
    CLI::App app{"remat: plan, simulate and run activation checkpointing for layer chains", "remat"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "remat 0.1.0");
    Action action;
    addSimulateCommand(app, action);
    addPlanCommands(app, action);
    addZooCommands(app, action);
    addRunCommands(app, action);
    addProfileCommand(app, action);
    addTradeoffCommand(app, action);
    addImportCommand(app, action);
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
      app.parse(reversed);
    } catch (const CLI::CallForHelp&) {
      out << app.help();
      return kExitOk;
    } catch (const CLI::CallForAllHelp&) {
      out << app.help("", CLI::AppFormatMode::All);
      return kExitOk;
    } catch (const CLI::CallForVersion&) {
      out << "remat 0.1.0\n";
      return kExitOk;
    } catch (const CLI::ParseError& e) {
      err << "remat: " << e.what() << "\n";
      for (const CLI::App* sub : app.get_subcommands()) {
        err << "usage: see 'remat " << sub->get_name() << " --help'\n";
        return kExitBadInput;
      }
      err << "usage: see 'remat --help'\n";
      return kExitBadInput;
    }
    if (!action) {
      err << "remat: missing subcommand arguments; see 'remat --help'\n";
      return kExitBadInput;
    }
    Io io{out, err, errIsTerminal};
    const Status status = action(io);
    if (!status.isOk()) {
      err << "remat: error: " << status.message() << "\n";
      return exitCodeFor(status);
    }
    return kExitOk;
  } catch (const std::exception& e) {
    err << "remat: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace remat::cli
