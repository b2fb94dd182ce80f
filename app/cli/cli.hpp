#pragma once
// The `remat` command line. Each group of subcommands lives in its own file and registers itself
// on the CLI::App; runCli() is what main() and the CLI tests call.
#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/base/units.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"

namespace remat::cli {

// Exit codes of docs/formats.md.
constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitStopped = 3;  // stopped before it finished: --timeout

struct Io {
  std::ostream& out;
  std::ostream& err;
};

// A subcommand's action: returns a Status; the dispatcher turns it into a message and an exit code.
using Action = std::function<Status(Io&)>;

// Registration functions, one per file.
void addSimulateCommand(CLI::App& app, Action& action);  // cli_simulate.cpp
void addZooCommands(CLI::App& app, Action& action);      // cli_zoo.cpp
void addPlanCommands(CLI::App& app, Action& action);     // cli_plan.cpp: plan, compare
void addRunCommands(CLI::App& app, Action& action);      // cli_run.cpp: run
void addProfileCommand(CLI::App& app, Action& action);   // cli_profile.cpp: profile

// Parses argv and runs the chosen subcommand. Never throws.
int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// runCli's two halves, for callers that look at the command before running it (the argument
// fuzzer). Parsing prints help, the version or a syntax error itself and then sets exitCode;
// otherwise `action` runs the subcommand named by `command` ("plan", "zoo export"). Parsing may
// throw what CLI11 throws beyond its parse errors; runCli catches that.
struct ParsedCommandLine {
  std::optional<int> exitCode;
  Action action;
  std::string command;
};
ParsedCommandLine parseCommandLine(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// Runs the action and prints its error; returns the exit code.
int runAction(const Action& action, Io& io);

// Shared helpers.
Result<Chain> loadChainArgument(const std::string& path);  // a chain file path, or "zoo:NAME"
// Op tables (simulate, run) print this many rows unless --ops asks for all.
constexpr std::size_t kDefaultOpRows = 200;
int exitCodeFor(const Status& status);

}  // namespace remat::cli
