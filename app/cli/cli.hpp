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
#include "remat/exec/device.hpp"
#include "remat/memory/timeline.hpp"
#include "remat/model/chain.hpp"
#include "remat/planners/planners.hpp"
#include "remat/usecases/planning.hpp"

namespace remat::cli {

// Exit codes of docs/formats.md.
constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitStopped = 3;  // stopped before it finished: --timeout

struct Io {
  std::ostream& out;
  std::ostream& err;
  bool errIsTerminal = false;  // progress lines go to err only then
};

// A subcommand's action: returns a Status; the dispatcher turns it into a message and an exit code.
using Action = std::function<Status(Io&)>;

// Registration functions, one per file.
void addSimulateCommand(CLI::App& app, Action& action);  // cli_simulate.cpp
void addZooCommands(CLI::App& app, Action& action);      // cli_zoo.cpp
void addPlanCommands(CLI::App& app, Action& action);     // cli_plan.cpp: plan, compare
void addRunCommands(CLI::App& app, Action& action);      // cli_run.cpp: run
void addProfileCommand(CLI::App& app, Action& action);   // cli_profile.cpp: profile
void addTradeoffCommand(CLI::App& app, Action& action);  // cli_tradeoff.cpp: tradeoff

// Parses argv and runs the chosen subcommand. Never throws. errIsTerminal: err is a terminal, so
// long runs may show their progress there.
int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, bool errIsTerminal = false);

void addImportCommand(CLI::App& app, Action& action);  // cli_import.cpp: import

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
// The chain argument of simulate, plan, compare, run and profile: a chain file, an ONNX model or
// zoo:NAME, --batch (the batch of an ONNX model or a zoo model; 0: the model's own, the zoo's 64) and
// --input (an ONNX model's data input by name; empty: its only one).
void addChainArgument(CLI::App* command, std::string& path, std::int64_t& batch, std::string& input);
// --optimizer, --foreach, --grads (docs/memory-model.md section 11) as given; checked by
// loadChainArgument, whose errors name the option (exit 2). The defaults are core's (StepOptions).
// The command line's step options as typed; their defaults are kPyTorchDefaultStep's.
struct StepArguments {
  std::string optimizer{optimizerName(kPyTorchDefaultStep.optimizer)};
  std::string foreach = kPyTorchDefaultStep.foreach ? "on" : "off";
  std::string grads{gradModeName(kPyTorchDefaultStep.grads)};
  // Transformers (docs/memory-model.md section 12): --attention math|fused ("": the chain's own; the
  // zoo's is fused) and --sequence of a zoo token model (0: its context).
  std::string attention;
  std::int64_t sequence = 0;
  // --dim NAME=V, repeatable: a symbolic dimension of an ONNX model's inputs (parseOnnxDimension).
  std::vector<std::string> dims;
  std::string precision;  // empty: the chain file's dtype (memory-model.md section 11.7)
};
void addStepOptions(CLI::App* command, StepArguments& step);
Result<StepOptions> parseStepArguments(const StepArguments& step);
Result<Chain> loadChainArgument(const std::string& path, std::int64_t batch = 0, const StepArguments& step = {},
                                const std::string& input = {});
// Op tables (simulate, run) print this many rows unless --ops asks for all.
constexpr std::size_t kDefaultOpRows = 200;
int exitCodeFor(const Status& status);
// --planners LIST: the names, each checked; empty text: compare's defaults for layerCount layers
// (cli_plan.cpp).
Result<std::vector<std::string>> parsePlannerList(const std::string& text, std::size_t layerCount);

// Recompute costs with their unit (cli_fit.cpp): "248.989 GFLOP", "20.1%" (of one forward pass),
// "248.989 GFLOP (20.1% of one forward pass)", and the line that says what the unit is.
std::string formatRecomputeCost(const Chain& chain, double cost);
std::string formatRecomputeShare(const Chain& chain, double cost);
std::string describeRecomputeCost(const Chain& chain, double cost);
std::string describeCostUnit(const Chain& chain);

// `--fit CAPACITY` (cli_fit.cpp): a byte size, or "device" for what the device deviceName has
// available now, as the budget use case reads it (usecases/planning.hpp: the budget for E is the
// capacity minus the chain's static memory; a capacity below the static memory is InvalidInput).
struct FitBudget {
  CapacityBudget budget;
  std::string capacityText;  // "80.00 GiB", "the 10.00 GiB cpu has available"
};
// `device` is the opened device for "device" (null: fitBudget opens deviceName itself).
Result<FitBudget> fitBudget(const Chain& chain, const std::string& fit, const std::string& deviceName,
                            Device* device = nullptr);
// The budget planner's plan for it; its refusal says what the capacity and the static memory were.
Result<PlanReport> planToFit(const Chain& chain, const FitBudget& budget);

}  // namespace remat::cli
