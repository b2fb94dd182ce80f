#include "cli.hpp"

#include <cstdio>
#include <exception>
#include <ostream>

#include "remat/io/chain_file.hpp"
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

Result<Chain> loadChainArgument(const std::string& path) {
  if (path.rfind("zoo:", 0) == 0) {
    auto spec = zooChain(path.substr(4), ZooOptions{});
    if (!spec) return spec.status();
    return buildChain(*spec);
  }
  return loadChainFile(path);
}

int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
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
    Io io{out, err};
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
