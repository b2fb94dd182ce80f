#include "cli.hpp"

#include <cstdio>
#include <exception>
#include <ostream>

#include "cli_args.hpp"
#include "remat/base/text.hpp"
#include "remat/input/onnx/onnx_import.hpp"
#include "remat/model/precision.hpp"
#include "remat/usecases/chain_source.hpp"

namespace remat::cli {
namespace {

// What --version prints: the project's version (CMakeLists.txt), as the explorer's About shows it.
constexpr const char* kVersionText = "remat " REMAT_VERSION;

}  // namespace

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

void addChainArgument(CLI::App* command, std::string& path, std::int64_t& batch, std::string& input) {
  command->add_option("chain", path, "Chain file (remat-chain/1), ONNX model (.onnx) or zoo:NAME")->required();
  command
      ->add_option("--batch", batch,
                   "Batch size of an ONNX model (sets a symbolic batch, overrides a fixed one) "
                   "or of a zoo model (default 64)")
      ->check(CLI::PositiveNumber);
  command->add_option("--input", input,
                      "An ONNX model's data input, by name (default: its only graph input that reaches the "
                      "output; every other graph input of an export without weights is a parameter)");
}

void addStepOptions(CLI::App* command, StepArguments& step) {
  command
      ->add_option("--optimizer", step.optimizer,
                   "The optimizer step that ends the training step: none, sgd, momentum (0.9), adam, adamw "
                   "(PyTorch's defaults; its state is static memory, its temporaries the STEP op's)")
      ->capture_default_str();
  command
      ->add_option("--foreach", step.foreach,
                   "on: the optimizer's multi-tensor (foreach) implementation, PyTorch's default on CUDA; off: its "
                   "per-parameter loop")
      ->capture_default_str();
  command
      ->add_option("--grads", step.grads,
                   "When weight gradients exist: on-backward (PyTorch 2's zero_grad(): allocated by each layer's "
                   "backward, freed after the optimizer step), static (zero_grad(set_to_none=False): allocated for "
                   "the step, each backward's fresh gradient added in) or in-place (allocated for the step, added "
                   "into directly: the paper's model)")
      ->capture_default_str();
  command->add_option("--attention", step.attention,
                      "Transformers' attention: fused (PyTorch 2's scaled_dot_product_attention: no S x S tensor "
                      "kept; the zoo's default) or math (the exported graph's softmax probabilities kept)");
  command->add_option("--sequence", step.sequence, "Sequence length of a zoo token model (gpt2: 1024, bert_base: 512)")
      ->check(wholeNumberIn(1, 2147483647));
  command->add_option("--dim", step.dims,
                      "NAME=SIZE, repeatable: a symbolic dimension of an ONNX model's inputs, e.g. --dim sequence=2048 "
                      "for a token model's ids [batch, sequence] (the batch is --batch's)");
  command->add_option("--precision", step.precision,
                      "fp32, bf16 or fp16 (the whole model in that dtype), bf16-mixed or fp16-mixed (torch.autocast "
                      "around float32 master weights); default: the chain's dtype (fp32 for zoo and ONNX models)");
}

Result<StepOptions> parseStepArguments(const StepArguments& step) {
  StepOptions options;
  auto optimizer = parseOptimizer(step.optimizer);
  if (!optimizer) return optimizer.status().withContext("--optimizer");
  auto foreach = parseForeach(step.foreach);
  if (!foreach) return foreach.status().withContext("--foreach");
  auto grads = parseGradMode(step.grads);
  if (!grads) return grads.status().withContext("--grads");
  options.optimizer = *optimizer;
  options.foreach = *foreach;
  options.grads = *grads;
  if (!step.precision.empty()) {
    auto precision = parsePrecision(step.precision);
    if (!precision) return precision.status().withContext("--precision");
    options.precision = *precision;
  }
  return options;
}

Result<Chain> loadChainArgument(const std::string& path, std::int64_t batch, const StepArguments& step,
                                const std::string& input) {
  // The options first: a bad value is reported without loading a big chain.
  auto options = parseStepArguments(step);
  if (!options) return options.status();
  if (batch > 0 && chainSourceKind(path) == ChainSourceKind::ChainFile)
    return Status::invalid(path +
                           ": --batch applies to ONNX models and zoo:NAME; a chain file states its batch in "
                           "input.shape");
  if (!input.empty() && chainSourceKind(path) != ChainSourceKind::OnnxModel)
    return Status::invalid(path + ": --input applies to ONNX models; a chain file or zoo model has one input");
  ChainSourceOptions source{.batch = batch, .input = input};
  for (const std::string& text : step.dims) {
    auto dim = parseOnnxDimension(text);
    if (!dim) return dim.status();
    source.dims.push_back(*dim);
  }
  if (!source.dims.empty() && chainSourceKind(path) != ChainSourceKind::OnnxModel)
    return Status::invalid(path +
                           ": --dim applies to ONNX models; a chain file states its input shape, a zoo model "
                           "takes --batch and --sequence");
  source.sequence = step.sequence;
  if (step.attention == "fused" || step.attention == "math") {
    source.fusedAttention = step.attention == "fused";
  } else if (!step.attention.empty()) {
    return Status::invalid("--attention: " + quoteText(step.attention, 40) + " is not an attention rule (math, fused)");
  }
  auto chain = openChainSource(path, source);
  if (!chain) return chain;
  if (step.precision.empty()) options->precision = chain->step.precision;  // the file's dtype
  auto stepped = withStepOptions(std::move(chain).value(), *options);
  if (!stepped) return stepped.status().withContext(path + ": --precision " + step.precision);
  return stepped;
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
  app.set_version_flag("--version", kVersionText);
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
    out << kVersionText << "\n";
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
