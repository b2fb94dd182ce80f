// `remat run CHAIN (--planner NAME | --checkpoints LIST | --plan FILE | --fit CAPACITY) --device cpu|gpu [--steps N]
//  [--timeline FILE] [--seed S] [--threads N] [--json] [--ops]`: executes training steps exactly as
// the plan says and reports the memory the device really allocated, op by op, beside the
// simulator's prediction. A chain whose workspaces fall short of the device's kernels gets them on
// the fly (fitWorkspacesToDevice) before it is planned and predicted, and the report says so.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli.hpp"
#include "cli_args.hpp"
#include "cli_progress.hpp"
#include "remat/devices/devices.hpp"
#include "remat/exec/interpreter.hpp"
#include "remat/exec/profiler.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/planners/planners.hpp"
#include "remat/planners/registry.hpp"
#include "remat/report/exporters.hpp"
#include "remat/report/timeline_formats.hpp"
#include "remat/usecases/measuring.hpp"

namespace remat::cli {
namespace {

struct RunArgs {
  std::string chain;
  std::int64_t batch = 0;
  std::string input;  // --input: an ONNX model's data input by name (empty: its only one)
  StepArguments step;
  std::string planner;
  std::string checkpoints;
  bool checkpointsGiven = false;
  std::string plan;  // --plan FILE
  std::string fit;
  std::string device;
  int steps = 1;
  std::string timeline;
  std::uint64_t seed = 0;
  bool json = false;
  bool allOps = false;
  int threads = 0;
  PlanningArgs planning;
};

// The summary (predicted against measured), the step times and the op table.
void printReport(const Chain& chain, const std::string& planner, const std::string& device,
                 const MeasuredPlan& measuredPlan, bool allOps, std::ostream& out) {
  const Simulation& sim = measuredPlan.predicted;
  const Plan& plan = sim.plan;
  const RunResult& run = measuredPlan.run;
  const Timeline& predicted = sim.timeline;
  const Timeline& measured = run.timelines.front();
  char line[256];
  out << "chain        " << chain.name << " (" << chain.size() << " layers)\n";
  out << "plan         " << planner << ": "
      << (plan.checkpoints.empty() ? std::string("(no checkpoints: store all)") : formatCheckpointList(plan)) << "\n";
  out << "device       " << device << ", " << run.timelines.size() << " step" << (run.timelines.size() == 1 ? "" : "s")
      << "\n\n";
  const std::uint64_t measuredPeak = measuredPlan.check.measuredDynamicPeakBytes;
  std::snprintf(line, sizeof line, "%-22s %16s %16s\n", "", "predicted", "measured");
  out << line;
  std::snprintf(line, sizeof line, "%-22s %16s %16s\n", "dynamic peak", formatBytes(sim.dynamicPeakBytes).c_str(),
                formatBytes(measuredPeak).c_str());
  out << line;
  std::snprintf(line, sizeof line, "%-22s %16s %16s\n", "static", formatBytes(sim.staticBytes).c_str(),
                formatBytes(run.staticBytes).c_str());
  out << line;
  std::snprintf(line, sizeof line, "%-22s %16s %16s\n", "total peak", formatBytes(sim.peakBytes()).c_str(),
                formatBytes(run.staticBytes + measuredPeak).c_str());
  out << line;
  if (run.labelBytes > 0) out << "(static memory includes " << formatBytes(run.labelBytes) << " of int64 labels)\n";
  out << "\n";
  for (std::size_t s = 0; s < run.stepSeconds.size(); ++s) {
    std::snprintf(line, sizeof line, "step %zu       %.3f ms\n", s, 1e3 * run.stepSeconds[s]);
    out << line;
  }
  const std::size_t mismatches = measuredPlan.check.mismatchedSteps();
  const std::size_t first = measuredPlan.check.firstMismatch.front();
  if (mismatches == 0) {
    out << "memory       every op's measured footprint and live-after equal the prediction, byte for byte\n\n";
  } else {
    out << "memory       MISMATCH in " << mismatches << " step(s); first at op " << first << "\n\n";
  }
  const auto& entries = measured.entries;
  const std::size_t rows = allOps ? entries.size() : std::min(entries.size(), kDefaultOpRows);
  std::snprintf(line, sizeof line, "%8s  %-10s  %-22s  %-9s  %12s  %12s  %12s  %12s  %10s\n", "op_index", "op",
                "layer_name", "phase", "pred foot", "meas foot", "pred after", "meas after", "time_us");
  out << line;
  for (std::size_t i = 0; i < rows && i < predicted.entries.size(); ++i) {
    const TimelineEntry& m = entries[i];
    const TimelineEntry& p = predicted.entries[i];
    const std::string name = m.op.kind == OpKind::Seed   ? std::string("(loss)")
                             : m.op.kind == OpKind::Step ? std::string("(optimizer)")
                                                         : chain.layers[m.op.layer - 1].name;
    const bool differs = p.footprintBytes != m.footprintBytes || p.liveAfterBytes != m.liveAfterBytes;
    std::snprintf(line, sizeof line, "%8zu  %-10s  %-22.22s  %-9s  %12s  %12s  %12s  %12s  %10.1f%s\n", i,
                  opLabel(m.op).c_str(), name.c_str(), std::string(phaseName(m.op.phase())).c_str(),
                  formatBytes(p.footprintBytes).c_str(), formatBytes(m.footprintBytes).c_str(),
                  formatBytes(p.liveAfterBytes).c_str(), formatBytes(m.liveAfterBytes).c_str(), m.timeUs,
                  differs ? "  <- differs" : (i == sim.peakOpIndex ? "  <- peak" : ""));
    out << line;
  }
  if (rows < entries.size()) out << "... " << entries.size() - rows << " more ops (use --ops to print all)\n";
}

nlohmann::json reportJson(const std::string& planner, const std::string& device, const MeasuredPlan& measuredPlan,
                          const std::string& timelinePath) {
  const Simulation& sim = measuredPlan.predicted;
  const Plan& plan = sim.plan;
  const RunResult& run = measuredPlan.run;
  const std::uint64_t measuredPeak = measuredPlan.check.measuredDynamicPeakBytes;
  const std::size_t mismatch = measuredPlan.check.firstMismatchOfAnyStep();
  nlohmann::json j = {{"planner", planner},
                      {"checkpoints", plan.checkpoints},
                      {"device", device},
                      {"steps", run.timelines.size()},
                      {"predicted_dynamic_peak_bytes", sim.dynamicPeakBytes},
                      {"measured_dynamic_peak_bytes", measuredPeak},
                      {"static_bytes", sim.staticBytes},
                      {"measured_static_bytes", run.staticBytes},
                      {"label_bytes", run.labelBytes},
                      {"step_seconds", run.stepSeconds},
                      {"matches_prediction", mismatch == std::string::npos}};
  if (mismatch != std::string::npos) j["first_mismatch_op_index"] = mismatch;
  if (!timelinePath.empty()) j["timeline"] = timelinePath;
  return j;
}

// The plan to run: a planner's or the budget planner's for --fit (planned on the chain with the
// device's workspaces), a plan file's, or the list given.
Result<Plan> choosePlan(const RunArgs& args, const Chain& chain, Device& device, std::string& planner, Io& io) {
  if (!args.planner.empty()) {
    PlanningMonitor monitor(args.planning, io.err);
    auto planned = monitor.plan(chain, args.planner);
    if (!planned) return planned.status();
    planner = args.planner;
    return planned->plan;
  }
  if (!args.fit.empty()) {
    auto budget = fitBudget(chain, args.fit, args.device, &device);
    if (!budget) return budget.status();
    auto planned = planToFit(chain, *budget);
    if (!planned) return planned.status();
    planner = budget->budget.planner;
    return planned->plan;
  }
  if (!args.plan.empty()) return readPlanArgument(args.plan, chain, planner);
  auto parsed = parseCheckpointList(args.checkpoints);
  if (!parsed) return parsed.status().withContext("--checkpoints");
  REMAT_RETURN_IF_ERROR(validatePlan(*parsed, chain.size()).withContext("--checkpoints"));
  planner = "checkpoints";
  return parsed;
}

// Says which layers got the device's workspaces on the fly: the prediction includes them.
void printFittedWorkspaces(const WorkspaceFit& fit, const std::string& device, std::ostream& out) {
  if (fit.raisedLayers.empty()) return;
  out << "workspaces   the " << device << " kernels' scratch taken as the forward and backward workspaces of "
      << fit.raisedLayers.size() << " layer" << (fit.raisedLayers.size() == 1 ? "" : "s")
      << " for this run (`remat profile --device " << device << " -o FILE` saves them with measured times)\n";
}

Status runRun(const RunArgs& args, Io& io) {
  if (int{!args.planner.empty()} + int{args.checkpointsGiven} + int{!args.plan.empty()} + int{!args.fit.empty()} != 1)
    return Status::invalid("give exactly one of --planner NAME, --checkpoints LIST, --plan FILE and --fit CAPACITY");
  if (args.steps < 1) return Status::invalid("--steps must be at least 1, got " + std::to_string(args.steps));
  if (!args.planner.empty()) REMAT_RETURN_IF_ERROR(checkPlannerName(args.planner).withContext("--planner"));
  // The timeline is written after the run: whatever would stop it is found before the run starts.
  const WriteOptions timelineWrite{{args.chain}};
  if (!args.timeline.empty()) {
    REMAT_RETURN_IF_ERROR(timelineFormatForPath(args.timeline).status().withContext("--timeline"));
    REMAT_RETURN_IF_ERROR(checkOutputFile(args.timeline, timelineWrite).withContext("--timeline"));
  }
  auto loaded = loadChainArgument(args.chain, args.batch, args.step, args.input);
  if (!loaded) return loaded.status();
  DeviceOptions deviceOptions;
  deviceOptions.cpuThreads = args.threads;
  auto device = openDevice(args.device, deviceOptions);
  if (!device) return device.status().withContext("--device " + args.device);
  // The prediction (and a planner's plan) must count the scratch the device's kernels take.
  auto fit = fitWorkspacesToDevice(*loaded, **device);
  if (!fit) return fit.status();
  const Chain& chain = fit->chain;
  std::string planner;
  auto chosen = choosePlan(args, chain, **device, planner, io);
  if (!chosen) return chosen.status();
  const Plan plan = std::move(chosen).value();
  TerminalProgress progress(io.err, io.errIsTerminal && !args.json);
  MeasureOptions options;
  options.steps = args.steps;
  options.planner = planner;
  options.seed = args.seed;
  options.progress = [&progress](const RunProgress& p) { progress.update(p); };
  auto measured = measurePlan(**device, chain, plan, options);
  progress.finish();
  if (!measured) return measured.status();

  if (!args.timeline.empty()) {
    std::vector<Timeline> timelines = {measured->predicted.timeline};
    timelines.insert(timelines.end(), measured->run.timelines.begin(), measured->run.timelines.end());
    REMAT_RETURN_IF_ERROR(writeTimelines(args.timeline, timelines, timelineWrite).withContext("--timeline"));
  }
  if (args.json) {
    nlohmann::json report = reportJson(planner, (*device)->name(), *measured, args.timeline);
    report["fitted_workspace_layers"] = fit->raisedLayers;
    io.out << report.dump(2) << "\n";
  } else {
    printReport(chain, planner, (*device)->describe(), *measured, args.allOps, io.out);
    printFittedWorkspaces(*fit, (*device)->name(), io.out);
    if (!args.timeline.empty()) io.out << "wrote " << args.timeline << " (predicted + measured timelines)\n";
  }
  return Status::ok();
}

}  // namespace

void addRunCommands(CLI::App& app, Action& action) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Execute training steps of a plan on a device and measure the memory it really allocates, op by op");
  addChainArgument(cmd, args->chain, args->batch, args->input);
  addStepOptions(cmd, args->step);
  cmd->add_option("--planner", args->planner, "Planner whose plan to run: one of " + validPlannerNames());
  CLI::Option* checkpoints =
      cmd->add_option("--checkpoints", args->checkpoints, "Explicit checkpoint list, e.g. 3,7,12 (\"\" = store all)");
  cmd->add_option("--plan", args->plan,
                  "Run the plan of a plan file (as `remat plan --json` and the explorer's Export plan write)");
  cmd->add_option("--fit", args->fit,
                  "Run the least recompute that fits in CAPACITY (a byte size such as 80GiB, static memory included), "
                  "or 'device' for what the device has available");
  cmd->add_option("--device", args->device, "Device to run on: cpu or gpu")->required();
  cmd->add_option("--steps", args->steps,
                  "Training steps to run (--optimizer's step updates the weights after each; with none they stay)")
      ->capture_default_str()
      ->check(wholeNumberIn(1, kMaxRunSteps));
  cmd->add_option("--timeline", args->timeline, "Write the predicted and measured timelines: " + timelineFormatsHelp());
  cmd->add_option("--seed", args->seed, "Seed of the input batch, parameters, labels and dropout masks")
      ->capture_default_str()
      ->check(wholeNumberIn(0, UINT64_MAX));
  cmd->add_option("--threads", args->threads, "CPU threads the kernels run on (0: every core)")
      ->capture_default_str()
      ->check(wholeNumberIn(0, kMaxCpuThreads));
  addPlanningOptions(*cmd, args->planning);
  cmd->add_flag("--json", args->json, "Print a JSON summary instead of the table");
  cmd->add_flag("--ops", args->allOps, "Print every op (default: the first 200)");
  cmd->callback([args, checkpoints, &action] {
    args->checkpointsGiven = checkpoints->count() > 0;
    action = [args](Io& io) { return runRun(*args, io); };
  });
}

}  // namespace remat::cli
