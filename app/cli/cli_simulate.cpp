// `remat simulate CHAIN --checkpoints LIST [--json] [--ops]`
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli.hpp"
#include "remat/io/results_json.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/planners/planners.hpp"

namespace remat::cli {
namespace {

struct SimulateOptions {
  std::string chainPath;
  std::string checkpoints;
  bool json = false;
  bool allOps = false;
};

void printTable(const Chain& chain, const Simulation& sim, bool allOps, std::ostream& out) {
  const auto& entries = sim.timeline.entries;
  const Op& peakOp = entries[sim.peakOpIndex].op;
  char line[256];
  out << "chain        " << chain.name << " (" << chain.size() << " layers, " << dtypeName(chain.dtype) << ")\n";
  out << "checkpoints  "
      << (sim.plan.checkpoints.empty() ? std::string("(none: store all)") : formatCheckpointList(sim.plan)) << "\n";
  out << "peak (E)     " << formatBytes(sim.dynamicPeakBytes) << " dynamic at op " << sim.peakOpIndex << " "
      << opLabel(peakOp);
  if (peakOp.kind != OpKind::Seed) out << " '" << chain.layers[peakOp.layer - 1].name << "'";
  out << "\n";
  out << "static       " << formatBytes(sim.staticBytes) << " (input + parameters + parameter gradients)\n";
  out << "total peak   " << formatBytes(sim.peakBytes()) << "\n";
  out << "objective A  " << formatBytes(sim.aBytes) << "\n";
  out << "objective R  " << formatBytes(sim.rBytes) << "\n";
  std::snprintf(line, sizeof line, "%.6g", sim.recomputeCost);
  out << "recompute    " << line << " (forward cost of R and RE ops)\n\n";
  const std::size_t rows = allOps ? entries.size() : std::min(entries.size(), kDefaultOpRows);
  std::snprintf(line, sizeof line, "%8s  %-10s  %-24s  %-9s  %14s  %14s\n", "op_index", "op", "layer_name", "phase",
                "footprint", "live_after");
  out << line;
  for (std::size_t i = 0; i < rows; ++i) {
    const TimelineEntry& e = entries[i];
    const std::string name = e.op.kind == OpKind::Seed ? std::string("(loss)") : chain.layers[e.op.layer - 1].name;
    std::snprintf(line, sizeof line, "%8zu  %-10s  %-24.24s  %-9s  %14s  %14s%s\n", i, opLabel(e.op).c_str(),
                  name.c_str(), std::string(phaseName(e.op.phase())).c_str(), formatBytes(e.footprintBytes).c_str(),
                  formatBytes(e.liveAfterBytes).c_str(), i == sim.peakOpIndex ? "  <- peak" : "");
    out << line;
  }
  if (rows < entries.size())
    out << "... " << entries.size() - rows << " more ops (use --ops to print all, or --json)\n";
}

}  // namespace

void addSimulateCommand(CLI::App& app, Action& action) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "Predict the memory timeline of a checkpoint set");
  cmd->add_option("chain", options->chainPath, "Chain file (remat-chain/1) or zoo:NAME")->required();
  cmd->add_option("--checkpoints", options->checkpoints, "Comma-separated checkpoint layers; \"\" stores all")
      ->required();
  cmd->add_flag("--json", options->json, "Print JSON as in docs/formats.md");
  cmd->add_flag("--ops", options->allOps, "Print every op (default: the first 200)");
  cmd->callback([options, &action] {
    action = [options](Io& io) -> Status {
      auto chain = loadChainArgument(options->chainPath);
      if (!chain) return chain.status();
      auto plan = parseCheckpointList(options->checkpoints);
      if (!plan) return plan.status().withContext("--checkpoints");
      auto sim = simulate(*chain, *plan);
      if (!sim) return sim.status().withContext("--checkpoints");
      if (options->json) {
        io.out << simulationToJson(*sim).dump() << "\n";
      } else {
        printTable(*chain, *sim, options->allOps, io.out);
      }
      return Status::ok();
    };
  });
}

}  // namespace remat::cli
