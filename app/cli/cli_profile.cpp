// `remat profile CHAIN --device gpu [--output FILE]`: measures each layer's workspaces and costs
// on the GPU and writes them into the chain file (fwd_workspace_bytes, bwd_workspace_bytes,
// fwd_cost, bwd_cost; costs in milliseconds).
#include <cstdio>
#include <ostream>

#include "cli.hpp"
#include "remat/io/chain_file.hpp"

#ifdef REMAT_HAVE_GPU
#include "remat/gpu/cuda_device.hpp"
#include "remat/gpu/profiler.hpp"
#endif

namespace remat::cli {
namespace {

struct ProfileArgs {
  std::string chain;
  std::string device = "gpu";
  std::string output;
  int repeats = 5;
  std::uint64_t workspaceCapBytes = 1ull << 30;
  std::uint64_t seed = 0;
  bool nondeterministic = false;
  bool tf32 = false;
};

#ifdef REMAT_HAVE_GPU
void printTable(std::ostream& out, const gpu::ProfileResult& result, double totalFwdMs, double totalBwdMs) {
  out << "device: " << result.device << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%5s  %-28s %12s %12s %10s %10s\n", "layer", "name", "wf", "wb", "fwd ms", "bwd ms");
  out << line;
  for (const gpu::LayerProfile& p : result.layers) {
    std::snprintf(line, sizeof line, "%5zu  %-28s %12s %12s %10.3f %10.3f%s\n", p.layer, p.name.substr(0, 28).c_str(),
                  formatBytes(p.fwdWorkspaceBytes).c_str(), formatBytes(p.bwdWorkspaceBytes).c_str(), p.fwdMs, p.bwdMs,
                  p.measured ? "" : "  (abstract: numbers as stated)");
    out << line;
  }
  std::snprintf(line, sizeof line, "total: forward %.3f ms, backward %.3f ms (medians per layer)\n", totalFwdMs,
                totalBwdMs);
  out << line;
}
#endif

Status runProfile(const ProfileArgs& args, Io& io) {
  if (args.device != "gpu")
    return Status::invalid("profile measures the GPU's kernels: --device must be gpu, got '" + args.device + "'");
#ifndef REMAT_HAVE_GPU
  (void)io;
  return Status::invalid(
      "this build has no CUDA backend (configure with -DREMAT_WITH_CUDA=ON where CUDA 13 and cuDNN 9 are installed)");
#else
  if (args.repeats < 1) return Status::invalid("--repeats must be at least 1, got " + std::to_string(args.repeats));
  auto chain = loadChainArgument(args.chain);
  if (!chain) return chain.status();
  gpu::CudaDeviceOptions options;
  options.deterministic = !args.nondeterministic;
  options.allowTf32 = args.tf32;
  options.workspacePolicy = gpu::WorkspacePolicy::Profile;
  options.workspaceCapBytes = args.workspaceCapBytes;
  auto device = gpu::createCudaDevice(options);
  if (!device) return device.status();
  gpu::ProfileOptions profileOptions;
  profileOptions.repeats = args.repeats;
  profileOptions.seed = args.seed;
  auto result = gpu::profileChain(*chain, **device, profileOptions);
  if (!result) return result.status().withContext(args.chain);
  double fwd = 0.0, bwd = 0.0;
  for (const gpu::LayerProfile& p : result->layers) {
    fwd += p.fwdMs;
    bwd += p.bwdMs;
  }
  if (args.output.empty()) {
    io.out << chainSpecToText(result->spec);
    printTable(io.err, *result, fwd, bwd);
    return Status::ok();
  }
  REMAT_RETURN_IF_ERROR(saveChainFile(result->spec, args.output));
  printTable(io.out, *result, fwd, bwd);
  io.out << "wrote " << args.output << "\n";
  return Status::ok();
#endif
}

}  // namespace

void addProfileCommand(CLI::App& app, Action& action) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Measure each layer's cuDNN workspaces and forward/backward times on the GPU; write them into the chain");
  cmd->add_option("chain", args->chain, "Chain file (or zoo:NAME)")->required();
  cmd->add_option("--device", args->device, "Device to measure on (gpu)")->capture_default_str();
  cmd->add_option("--output,-o", args->output, "Write the profiled chain file here (default: stdout)");
  cmd->add_option("--repeats", args->repeats, "Timed runs per pass, after one warm-up")->capture_default_str();
  cmd->add_option("--workspace-cap", args->workspaceCapBytes, "Largest cuDNN workspace an algorithm may use (bytes)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the input and parameter values")->capture_default_str();
  cmd->add_flag("--nondeterministic", args->nondeterministic,
                "Allow cuDNN algorithms whose results depend on scheduling (atomics)");
  cmd->add_flag("--tf32", args->tf32, "Allow TF32 tensor cores (PyTorch's cudnn.allow_tf32)");
  cmd->callback([args, &action] { action = [args](Io& io) { return runProfile(*args, io); }; });
}

}  // namespace remat::cli
