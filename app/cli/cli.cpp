#include "cli.hpp"

#include <cstdio>
#include <exception>
#include <ostream>

#include "remat/input/chain_file.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/zoo.hpp"

namespace remat::cli {

int exitCodeFor(const Status& status) {
  switch (status.code()) {
    case ErrorCode::Ok: return kExitOk;
    case ErrorCode::InvalidInput:
    case ErrorCode::IoError:
    case ErrorCode::OutOfMemory: return kExitBadInput;
    case ErrorCode::Cancelled: return kExitStopped;
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

namespace {

// "zoo export": the subcommands the parser chose, outermost first.
std::string chosenCommand(const CLI::App& app) {
  std::string name;
  for (const CLI::App* level = &app;;) {
    const auto chosen = level->get_subcommands();
    if (chosen.empty()) return name;
    level = chosen.front();
    name += (name.empty() ? "" : " ") + level->get_name();
  }
}

}  // namespace

ParsedCommandLine parseCommandLine(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ParsedCommandLine parsed;
  CLI::App app{"remat: plan, simulate and run activation checkpointing for layer chains", "remat"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "remat 0.1.0");
  addSimulateCommand(app, parsed.action);
  addPlanCommands(app, parsed.action);
  addZooCommands(app, parsed.action);
  addRunCommands(app, parsed.action);
  addProfileCommand(app, parsed.action);
  addTradeoffCommand(app, parsed.action);
  addImportCommand(app, parsed.action);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    parsed.exitCode = kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    parsed.exitCode = kExitOk;
  } catch (const CLI::CallForVersion&) {
    out << "remat 0.1.0\n";
    parsed.exitCode = kExitOk;
  } catch (const CLI::ParseError& e) {
    const std::string command = chosenCommand(app);
    err << "remat: " << e.what() << "\nusage: see 'remat " << (command.empty() ? "" : command + " ") << "--help'\n";
    parsed.exitCode = kExitBadInput;
  }
  parsed.command = chosenCommand(app);
  if (!parsed.exitCode && !parsed.action) {
    err << "remat: missing subcommand arguments; see 'remat --help'\n";
    parsed.exitCode = kExitBadInput;
  }
  if (parsed.exitCode) parsed.action = nullptr;
  return parsed;
}

int runAction(const Action& action, Io& io) {
  const Status status = action(io);
  if (status.isOk()) return kExitOk;
  io.err << "remat: error: " << status.message() << "\n";
  return exitCodeFor(status);
}

int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool errIsTerminal) {
  try {
    ParsedCommandLine parsed = parseCommandLine(args, out, err);
    if (parsed.exitCode) return *parsed.exitCode;
    Io io{out, err, errIsTerminal};
    return runAction(parsed.action, io);
  } catch (const std::exception& e) {
    err << "remat: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace remat::cli
