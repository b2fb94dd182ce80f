// `remat simulate CHAIN (--checkpoints LIST | --plan FILE) [--batch N] [--measured FILE] [--timeline FILE] [--json]
// [--ops]`
// --measured: a measured timeline (a PyTorch memory snapshot or recording, or `remat run
// --timeline`'s file) printed peak against peak beside the prediction.
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "cli.hpp"
#include "cli_args.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/memory/op_times.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/precision.hpp"
#include "remat/planners/planners.hpp"
#include "remat/report/exporters.hpp"
#include "remat/report/results_json.hpp"
#include "remat/report/timeline_formats.hpp"

namespace remat::cli {
namespace {

struct SimulateOptions {
  std::string chainPath;
  std::int64_t batch = 0;
  std::string input;  // --input: an ONNX model's data input by name (empty: its only one)
  StepArguments step;
  std::string checkpoints;
  bool checkpointsGiven = false;
  std::string plan;  // --plan FILE
  std::string timeline;
  std::string measured;
  bool json = false;
  bool allOps = false;
};

void printTable(const Chain& chain, const Simulation& sim, bool allOps, std::ostream& out) {
  const auto& entries = sim.timeline.entries;
  const Op& peakOp = entries[sim.peakOpIndex].op;
  char line[256];
  out << "chain        " << chain.name << " (" << chain.size() << " layers, " << describeChainDTypes(chain) << ")\n";
  out << "checkpoints  "
      << (sim.plan.checkpoints.empty() ? std::string("(none: store all)") : formatCheckpointList(sim.plan)) << "\n";
  out << "peak (E)     " << formatBytes(sim.dynamicPeakBytes) << " dynamic at op " << sim.peakOpIndex << " "
      << opLabel(peakOp);
  if (peakOp.hasLayer()) out << " '" << chain.layers[peakOp.layer - 1].name << "'";
  out << "\n";
  out << "static       " << formatBytes(sim.staticBytes) << " " << describeStaticParts(chain) << "\n";
  if (chain.step != defaultStepOptions(chain.dtype)) out << "step         " << describeStepOptions(chain.step) << "\n";
  out << "total peak   " << formatBytes(sim.peakBytes()) << "\n";
  out << "objective A  " << formatBytes(sim.aBytes) << "\n";
  out << "objective R  " << formatBytes(sim.rBytes) << "\n";
  out << "recompute    " << describeRecomputeCost(chain, sim.recomputeCost) << ": forward cost of the R and RE ops, "
      << costUnitDescription(chain) << "\n\n";
  const std::size_t rows = allOps ? entries.size() : std::min(entries.size(), kDefaultOpRows);
  std::snprintf(line, sizeof line, "%8s  %-10s  %-24s  %-9s  %14s  %14s\n", "op_index", "op", "layer_name", "phase",
                "footprint", "live_after");
  out << line;
  for (std::size_t i = 0; i < rows; ++i) {
    const TimelineEntry& e = entries[i];
    const std::string name = e.op.kind == OpKind::Seed   ? std::string("(loss)")
                             : e.op.kind == OpKind::Step ? std::string("(optimizer)")
                                                         : chain.layers[e.op.layer - 1].name;
    std::snprintf(line, sizeof line, "%8zu  %-10s  %-24.24s  %-9s  %14s  %14s%s\n", i, opLabel(e.op).c_str(),
                  name.c_str(), std::string(phaseName(e.op.phase())).c_str(), formatBytes(e.footprintBytes).c_str(),
                  formatBytes(e.liveAfterBytes).c_str(), i == sim.peakOpIndex ? "  <- peak" : "");
    out << line;
  }
  if (rows < entries.size())
    out << "... " << entries.size() - rows << " more ops (use --ops to print all, or --json)\n";
}

// The measured timeline of a file: the first that is not a prediction (`remat run --timeline`
// writes the prediction beside the measurement), as the explorer's overlay takes it.
Result<Timeline> readMeasured(const std::string& path) {
  auto timelines = readTimelines(path);
  if (!timelines) return timelines.status();
  for (Timeline& t : *timelines)
    if (t.source != "predicted") return std::move(t);
  return Status::invalid(path + ": holds no measured timeline (only predictions)");
}

std::string ratioText(std::uint64_t measured, std::uint64_t predicted) {
  if (predicted == 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(measured) / static_cast<double>(predicted));
  return text;
}

// Peak against peak: the measured dynamic peak against E, the static parts apart.
void printMeasured(const Simulation& sim, const Timeline& measured, const std::string& path, std::ostream& out) {
  const std::uint64_t peak = measured.dynamicPeakBytes();
  const std::size_t at = measured.peakIndex();
  out << "\nmeasured     " << path << " (" << measured.source << ", " << measured.entries.size() << " ops)\n";
  out << "peak         measured " << formatBytes(peak) << " dynamic";
  if (!measured.entries.empty()) out << " at op " << at << " " << opLabel(measured.entries[at].op, measured.layerNames);
  out << "\n             predicted E " << formatBytes(sim.dynamicPeakBytes) << "; measured / predicted "
      << ratioText(peak, sim.dynamicPeakBytes) << "\n";
  out << "static       measured " << formatBytes(measured.staticBytes) << ", predicted " << formatBytes(sim.staticBytes)
      << "\n";
  out << "total peak   measured " << formatBytes(measured.staticBytes + peak) << ", predicted "
      << formatBytes(sim.peakBytes()) << "\n";
}

nlohmann::json measuredJson(const Simulation& sim, const Timeline& measured, const std::string& path) {
  return {{"file", path},
          {"source", measured.source},
          {"planner", measured.planner},
          {"ops", measured.entries.size()},
          {"dynamic_peak_bytes", measured.dynamicPeakBytes()},
          {"static_bytes", measured.staticBytes},
          {"predicted_dynamic_peak_bytes", sim.dynamicPeakBytes},
          {"measured_over_predicted", sim.dynamicPeakBytes == 0 ? 0.0
                                                                : static_cast<double>(measured.dynamicPeakBytes()) /
                                                                      static_cast<double>(sim.dynamicPeakBytes)}};
}

// The command itself, once the arguments are read.
Status runSimulate(const SimulateOptions& options, Io& io) {
  if (options.checkpointsGiven == !options.plan.empty())
    return Status::invalid("give exactly one of --checkpoints LIST and --plan FILE");
  // Refused before the chain is read: a bad format, an unwritable folder or the input itself.
  WriteOptions timelineWrite{{options.chainPath}};
  if (!options.measured.empty()) timelineWrite.inputs.push_back(options.measured);
  if (!options.timeline.empty()) {
    REMAT_RETURN_IF_ERROR(timelineFormatForPath(options.timeline).status().withContext("--timeline"));
    REMAT_RETURN_IF_ERROR(checkOutputFile(options.timeline, timelineWrite).withContext("--timeline"));
  }
  auto chain = loadChainArgument(options.chainPath, options.batch, options.step, options.input);
  if (!chain) return chain.status();
  std::string planner = "checkpoints";  // as `remat run --checkpoints` names an explicit plan
  auto plan =
      options.plan.empty() ? parseCheckpointList(options.checkpoints) : readPlanArgument(options.plan, *chain, planner);
  if (!plan) return options.plan.empty() ? plan.status().withContext("--checkpoints") : plan.status();
  auto sim = simulate(*chain, *plan);
  if (!sim) return sim.status().withContext(options.plan.empty() ? "--checkpoints" : "--plan");
  std::optional<Timeline> measured;
  if (!options.measured.empty()) {
    auto read = readMeasured(options.measured);
    if (!read) return read.status().withContext("--measured");
    measured = std::move(read).value();
  }
  if (!options.timeline.empty()) {
    sim->timeline.planner = planner;
    std::vector<Timeline> timelines{sim->timeline};
    if (measured) timelines.push_back(*measured);
    REMAT_RETURN_IF_ERROR(writeTimelines(options.timeline, timelines, timelineWrite).withContext("--timeline"));
  }
  if (options.json) {
    nlohmann::json out = simulationToJson(*sim);
    if (measured) out["measured"] = measuredJson(*sim, *measured, options.measured);
    io.out << out.dump() << "\n";
  } else {
    printTable(*chain, *sim, options.allOps, io.out);
    if (measured) printMeasured(*sim, *measured, options.measured, io.out);
    if (!options.timeline.empty())
      io.out << "wrote " << options.timeline
             << " (the predicted timeline; op times modelled: " << describeOpTimeModel(*chain) << ")\n";
  }
  return Status::ok();
}

}  // namespace

void addSimulateCommand(CLI::App& app, Action& action) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "Predict the memory timeline of a checkpoint set");
  addChainArgument(cmd, options->chainPath, options->batch, options->input);
  addStepOptions(cmd, options->step);
  CLI::Option* checkpoints =
      cmd->add_option("--checkpoints", options->checkpoints, "Comma-separated checkpoint layers; \"\" stores all");
  cmd->add_option("--plan", options->plan,
                  "The plan of a plan file (as `remat plan --json` and the explorer's Export plan write), placed by "
                  "its layers' names when they match the chain, else by their numbers");
  cmd->add_option("--measured", options->measured,
                  "A measured timeline to compare with, peak against peak: a PyTorch memory snapshot or "
                  "recording (.pickle, .snapshot.json, .json) or `remat run --timeline`'s file");
  cmd->add_option("--timeline", options->timeline,
                  "Write the predicted timeline (modelled op times), and the measured one with --measured: " +
                      timelineFormatsHelp());
  cmd->add_flag("--json", options->json, "Print JSON as in docs/formats.md");
  cmd->add_flag("--ops", options->allOps, "Print every op (default: the first 200)");
  cmd->callback([options, checkpoints, &action] {
    options->checkpointsGiven = checkpoints->count() > 0;
    action = [options](Io& io) { return runSimulate(*options, io); };
  });
}

}  // namespace remat::cli
