// `remat profile CHAIN [--device gpu|cpu] [--output FILE]`: measures each layer's workspaces and
// costs on a device and writes them into the chain file (fwd_workspace_bytes, bwd_workspace_bytes,
// fwd_cost, bwd_cost; costs in milliseconds). On the GPU the workspaces are those of the cuDNN
// algorithms it chooses; on the CPU the scratch its oneDNN primitives take at the thread count
// (--threads), plus residual blocks' arenas.
#include <cstdio>
#include <ostream>

#include "cli.hpp"
#include "cli_args.hpp"
#include "remat/base/device_names.hpp"
#include "remat/devices/devices.hpp"
#include "remat/exec/profiler.hpp"
#include "remat/input/chain_file.hpp"

namespace remat::cli {
namespace {

struct ProfileArgs {
  std::string chain;
  std::int64_t batch = 0;
  std::string input;  // --input: an ONNX model's data input by name (empty: its only one)
  std::string device{kGpuDeviceName};
  std::string output;
  int repeats = 5;
  std::uint64_t workspaceCapBytes = 1ull << 30;
  std::uint64_t seed = 0;
  bool nondeterministic = false;
  bool tf32 = false;
  int threads = 0;
};

void printTable(std::ostream& out, const ProfileResult& result) {
  out << "device: " << result.device << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%5s  %-28s %12s %12s %10s %10s\n", "layer", "name", "wf", "wb", "fwd ms", "bwd ms");
  out << line;
  double totalFwdMs = 0.0, totalBwdMs = 0.0;
  for (const LayerProfile& p : result.layers) {
    std::snprintf(line, sizeof line, "%5zu  %-28s %12s %12s %10.3f %10.3f%s\n", p.layer, p.name.substr(0, 28).c_str(),
                  formatBytes(p.fwdWorkspaceBytes).c_str(), formatBytes(p.bwdWorkspaceBytes).c_str(), p.fwdMs, p.bwdMs,
                  p.measured ? "" : "  (abstract: numbers as stated)");
    out << line;
    totalFwdMs += p.fwdMs;
    totalBwdMs += p.bwdMs;
  }
  std::snprintf(line, sizeof line, "total: forward %.3f ms, backward %.3f ms (medians per layer)\n", totalFwdMs,
                totalBwdMs);
  out << line;
}

Status runProfile(const ProfileArgs& args, Io& io) {
  if (args.repeats < 1) return Status::invalid("--repeats must be at least 1, got " + std::to_string(args.repeats));
  // Profiling takes long: whatever would stop the write is found first.
  const WriteOptions write{{args.chain}};
  if (!args.output.empty()) REMAT_RETURN_IF_ERROR(checkOutputFile(args.output, write).withContext("--output"));
  auto chain = loadChainArgument(args.chain, args.batch, {}, args.input);
  if (!chain) return chain.status();
  DeviceOptions options;
  options.deterministic = !args.nondeterministic;
  options.allowTf32 = args.tf32;
  options.profileWorkspaces = true;
  options.workspaceCapBytes = args.workspaceCapBytes;
  options.cpuThreads = args.threads;
  auto device = openDevice(args.device, options);
  if (!device) return device.status().withContext("--device " + args.device);
  ProfileOptions profileOptions;
  profileOptions.repeats = args.repeats;
  profileOptions.seed = args.seed;
  auto result = profileChain(*chain, **device, profileOptions);
  if (!result) return result.status().withContext(args.chain);
  if (args.output.empty()) {
    io.out << chainSpecToText(result->spec);
    printTable(io.err, *result);
    return Status::ok();
  }
  REMAT_RETURN_IF_ERROR(saveChainFile(result->spec, args.output, write).withContext("--output"));
  printTable(io.out, *result);
  io.out << "wrote " << args.output << "\n";
  return Status::ok();
}

}  // namespace

void addProfileCommand(CLI::App& app, Action& action) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile", "Measure each layer's workspaces and forward/backward times on a device; write them into the chain");
  addChainArgument(cmd, args->chain, args->batch, args->input);
  cmd->add_option("--device", args->device, "Device to measure on: gpu or cpu")->capture_default_str();
  cmd->add_option("--output,-o", args->output, "Write the profiled chain file here (default: stdout)");
  cmd->add_option("--repeats", args->repeats, "Timed runs per pass, after one warm-up")
      ->capture_default_str()
      ->check(wholeNumberIn(1, kMaxProfileRepeats));
  cmd->add_option("--workspace-cap", args->workspaceCapBytes,
                  "Largest cuDNN workspace an algorithm may use (bytes; GPU only)")
      ->capture_default_str()
      ->check(wholeNumberIn(0, UINT64_MAX));
  cmd->add_option("--seed", args->seed, "Seed of the input and parameter values")
      ->capture_default_str()
      ->check(wholeNumberIn(0, UINT64_MAX));
  cmd->add_option("--threads", args->threads,
                  "CPU threads the kernels run on (0: every core; a CPU run must use the same count)")
      ->capture_default_str()
      ->check(wholeNumberIn(0, kMaxCpuThreads));
  cmd->add_flag("--nondeterministic", args->nondeterministic,
                "Allow cuDNN algorithms whose results depend on scheduling (atomics; GPU only)");
  cmd->add_flag("--tf32", args->tf32, "Allow TF32 tensor cores (PyTorch's cudnn.allow_tf32; GPU only)");
  cmd->callback([args, &action] { action = [args](Io& io) { return runProfile(*args, io); }; });
}

}  // namespace remat::cli
