// remat_gpu_check: the GPU check's driver (scripts/gpu-check.sh). For each zoo model: profile it on
// the GPU, plan it with none, the best uniform:K, dp, linear and optimal, run every plan for a few
// steps through the interpreter, and report predicted against measured memory and the step time.
// It needs no CLI11, so it builds on machines that only have the CUDA stack.
//
//   remat_gpu_check [--models vgg16,resnet50] [--batch 64] [--resolution 224] [--steps 5]
//                   [--repeats 5] [--json FILE] [--chain-dir DIR] [--nondeterministic] [--tf32]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "remat/exec/interpreter.hpp"
#include "remat/exec/profiler.hpp"
#include "remat/gpu/cuda_device.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/input/chain_file.hpp"
#include "remat/memory/simulator.hpp"
#include "remat/model/zoo.hpp"
#include "remat/planners/planners.hpp"
#include "remat/usecases/chain_source.hpp"
#include "remat/usecases/measuring.hpp"
#include "remat/usecases/planning.hpp"

namespace {

using namespace remat;

struct Args {
  std::vector<std::string> models = {"vgg16", "resnet50"};
  std::int64_t batch = 64;
  std::int64_t resolution = 224;
  int steps = 5;
  int repeats = 5;
  std::string jsonPath;
  std::string chainDir;
  bool deterministic = true;
  bool allowTf32 = false;
};

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

Result<Args> parseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> Result<std::string> {
      if (i + 1 >= argc) return Status::invalid(a + " needs a value");
      return std::string(argv[++i]);
    };
    auto number = [&](std::int64_t& out) -> Status {
      auto v = value();
      if (!v) return v.status();
      char* end = nullptr;
      out = std::strtoll(v->c_str(), &end, 10);
      if (end == v->c_str() || *end != '\0' || out <= 0) return Status::invalid(a + " needs a positive integer");
      return Status::ok();
    };
    std::int64_t n = 0;
    if (a == "--models") {
      auto v = value();
      if (!v) return v.status();
      args.models = splitList(*v);
    } else if (a == "--batch") {
      REMAT_RETURN_IF_ERROR(number(args.batch));
    } else if (a == "--resolution") {
      REMAT_RETURN_IF_ERROR(number(args.resolution));
    } else if (a == "--steps") {
      REMAT_RETURN_IF_ERROR(number(n));
      args.steps = static_cast<int>(n);
    } else if (a == "--repeats") {
      REMAT_RETURN_IF_ERROR(number(n));
      args.repeats = static_cast<int>(n);
    } else if (a == "--json") {
      auto v = value();
      if (!v) return v.status();
      args.jsonPath = *v;
    } else if (a == "--chain-dir") {
      auto v = value();
      if (!v) return v.status();
      args.chainDir = *v;
    } else if (a == "--nondeterministic") {
      args.deterministic = false;
    } else if (a == "--tf32") {
      args.allowTf32 = true;
    } else {
      return Status::invalid("unknown argument '" + a + "' (see the comment at the top of gpu_check_main.cpp)");
    }
  }
  return args;
}

struct PlanRow {
  std::string planner;
  std::string checkpoints;
  std::uint64_t predictedPeakBytes = 0;  // static + E
  std::uint64_t countedPeakBytes = 0;    // static + the interpreter's largest footprint
  bool exactPerOp = false;               // every op's footprint and live-after equal the simulator's
  std::uint64_t poolUsedHighBytes = 0;   // everything the pool handed out
  std::uint64_t poolReservedHighBytes = 0;
  std::uint64_t labelBytes = 0;  // part of the static bytes, as the model counts them
  // cudaMemGetInfo's used bytes after the run minus before the device's first allocation: the
  // pool's reservation plus anything allocated behind our back (cuDNN, cuBLAS).
  std::uint64_t deviceUsedBytes = 0;
  double errorPercent = 0.0;  // (pool used high - predicted) / predicted
  double stepMs = 0.0;        // median over the steps after the first
  std::string error;          // non-empty when the plan could not run
};

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// The uniform:K with the lowest predicted dynamic peak (the smallest K among ties).
Result<PlanReport> bestUniform(const Chain& chain) {
  std::optional<PlanReport> best;
  for (std::size_t k = 1; k <= chain.size(); ++k) {
    auto r = runPlanner(chain, "uniform:" + std::to_string(k));
    if (!r) return r.status();
    if (!best || r->dynamicPeakBytes < best->dynamicPeakBytes) best = std::move(*r);
  }
  return std::move(*best);
}

PlanRow runOne(const Chain& chain, gpu::CudaDevice& device, Interpreter& interpreter, const PlanReport& planned,
               int steps, std::uint64_t baselineUsedBytes) {
  PlanRow row;
  row.planner = planned.planner;
  row.checkpoints = formatCheckpointList(planned.plan);
  auto predicted = scorePlan(chain, planned.plan, planned.planner);
  if (!predicted) {
    row.error = predicted.status().message();
    return row;
  }
  row.predictedPeakBytes = predicted->peakBytes();
  gpu::CudaAllocator& allocator = device.cudaAllocator();
  Status status = allocator.trim();
  if (status) status = device.checkFits(predicted->peakBytes());
  if (!status) {
    row.error = status.message();
    return row;
  }
  MeasureOptions options;
  options.steps = steps;
  options.planner = planned.planner;
  options.beforeRun = [&allocator] { return allocator.beginLongWindow(); };
  auto measured = runPredictedPlan(interpreter, std::move(predicted).value(), options);
  if (!measured) {
    row.error = measured.status().message();
    return row;
  }
  auto pool = allocator.longWindowStats();
  if (!pool) {
    row.error = pool.status().message();
    return row;
  }
  const RunResult& run = measured->run;
  row.labelBytes = run.labelBytes;
  row.exactPerOp = measured->check.matches();
  row.countedPeakBytes = run.staticBytes + measured->check.measuredDynamicPeakBytes;
  if (auto info = gpu::queryDeviceMemory()) {
    const std::uint64_t used = info->totalBytes - info->freeBytes;
    row.deviceUsedBytes = used > baselineUsedBytes ? used - baselineUsedBytes : 0;
  }
  row.poolUsedHighBytes = pool->usedHighBytes;
  row.poolReservedHighBytes = pool->reservedHighBytes;
  const double measuredBytes = static_cast<double>(pool->usedHighBytes);  // the labels are in the prediction
  row.errorPercent = 100.0 * (measuredBytes - static_cast<double>(row.predictedPeakBytes)) /
                     static_cast<double>(row.predictedPeakBytes);
  std::vector<double> ms;
  for (std::size_t i = run.stepSeconds.size() > 1 ? 1 : 0; i < run.stepSeconds.size(); ++i)
    ms.push_back(1000.0 * run.stepSeconds[i]);
  row.stepMs = medianOf(ms);
  return row;
}

struct ProfiledChain {
  Chain chain;
  std::string device;  // Device::describe() of the GPU that profiled it
};

// The zoo model profiled on a device opened for profiling (cuDNN's algorithms up to the cap),
// saved under --chain-dir when given.
Result<ProfiledChain> profileModel(const std::string& model, const Args& args,
                                   const gpu::CudaDeviceOptions& deviceOptions) {
  ZooOptions zoo;
  zoo.batch = args.batch;
  zoo.resolution = args.resolution;
  auto unprofiled = openZooChain(model, zoo);
  if (!unprofiled) return unprofiled.status();
  gpu::CudaDeviceOptions profileOptions = deviceOptions;
  profileOptions.workspacePolicy = gpu::WorkspacePolicy::Profile;
  auto device = gpu::createCudaDevice(profileOptions);
  if (!device) return device.status();
  ProfileOptions po;
  po.repeats = args.repeats;
  auto profile = profileChain(*unprofiled, **device, po);
  if (!profile) return profile.status().withContext(model + ": profile");
  if (!args.chainDir.empty()) {
    const std::string path = args.chainDir + "/" + model + "-b" + std::to_string(args.batch) + "-profiled.json";
    REMAT_RETURN_IF_ERROR(saveChainFile(profile->spec, path));
  }
  auto chain = buildChain(profile->spec);
  if (!chain) return chain.status();
  return ProfiledChain{std::move(*chain), profile->device};
}

Result<std::vector<PlanReport>> planAll(const Chain& chain, const std::string& model) {
  std::vector<PlanReport> plans;
  for (const char* name : {"none", "uniform", "dp", "linear", "optimal"}) {
    auto r = std::string(name) == "uniform" ? bestUniform(chain) : runPlanner(chain, name);
    if (!r) return r.status().withContext(model + ": planner " + name);
    plans.push_back(std::move(*r));
  }
  return plans;
}

nlohmann::json modelJson(const std::string& model, const Args& args, const ProfiledChain& profiled) {
  const Chain& chain = profiled.chain;
  nlohmann::json out;
  out["model"] = model;
  out["batch"] = args.batch;
  out["resolution"] = args.resolution;
  out["device"] = profiled.device;
  out["deterministic"] = args.deterministic;
  out["tf32"] = args.allowTf32;
  out["static_bytes"] = chain.staticBytes();
  out["input_bytes"] = chain.inputBytes;
  out["param_bytes"] = chain.paramBytes();
  out["layers"] = chain.size();
  return out;
}

void printModelHeader(const std::string& model, const Args& args, const std::string& device) {
  std::printf("\n%s, batch %lld, %lldx%lld, float32 on %s\n", model.c_str(), static_cast<long long>(args.batch),
              static_cast<long long>(args.resolution), static_cast<long long>(args.resolution), device.c_str());
  std::printf("%-12s %-24s %10s %10s %6s %10s %10s %10s %8s %9s\n", "planner", "checkpoints", "predicted", "counted",
              "exact", "pool used", "pool resv", "dev used", "error", "step");
  std::printf("%-12s %-24s %10s %10s %6s %10s %10s %10s %8s %9s\n", "", "", "MiB", "MiB", "", "MiB", "MiB", "MiB", "%",
              "ms");
}

void printRow(const PlanRow& row) {
  std::string checkpoints = row.checkpoints.size() > 24 ? row.checkpoints.substr(0, 21) + "..." : row.checkpoints;
  if (!row.error.empty()) {
    std::printf("%-12s %-24s %10.1f  failed: %s\n", row.planner.c_str(), checkpoints.c_str(),
                mib(row.predictedPeakBytes), row.error.c_str());
    return;
  }
  std::printf("%-12s %-24s %10.1f %10.1f %6s %10.1f %10.1f %10.1f %+8.3f %9.2f\n", row.planner.c_str(),
              checkpoints.c_str(), mib(row.predictedPeakBytes), mib(row.countedPeakBytes),
              row.exactPerOp ? "yes" : "NO", mib(row.poolUsedHighBytes), mib(row.poolReservedHighBytes),
              mib(row.deviceUsedBytes), row.errorPercent, row.stepMs);
}

nlohmann::json rowJson(const PlanRow& row) {
  nlohmann::json j;
  j["planner"] = row.planner;
  j["checkpoints"] = row.checkpoints;
  j["predicted_peak_bytes"] = row.predictedPeakBytes;
  j["counted_peak_bytes"] = row.countedPeakBytes;
  j["exact_per_op"] = row.exactPerOp;
  j["pool_used_high_bytes"] = row.poolUsedHighBytes;
  j["pool_reserved_high_bytes"] = row.poolReservedHighBytes;
  j["label_bytes"] = row.labelBytes;
  j["device_used_bytes"] = row.deviceUsedBytes;
  j["error_percent"] = row.errorPercent;
  j["step_ms"] = row.stepMs;
  if (!row.error.empty()) j["error"] = row.error;
  return j;
}

// The three checks over every plan of a model.
struct Verdict {
  bool allRan = true, allExact = true, allWithin = true;
  void add(const PlanRow& row) {
    allRan = allRan && row.error.empty();
    allExact = allExact && row.error.empty() && row.exactPerOp;
    allWithin = allWithin && row.error.empty() && std::fabs(row.errorPercent) <= 2.0;
  }
  bool passed() const { return allRan && allExact && allWithin; }
  void print() const {
    std::printf("  [%s] every plan ran\n", allRan ? "PASS" : "FAIL");
    std::printf("  [%s] our allocator's count equals the model, op by op, every plan and step\n",
                allExact ? "PASS" : "FAIL");
    std::printf("  [%s] the pool's used high-water mark is within 2%% of the predicted peak, every plan\n",
                allWithin ? "PASS" : "FAIL");
  }
};

Result<nlohmann::json> checkModel(const std::string& model, const Args& args) {
  gpu::CudaDeviceOptions deviceOptions;
  deviceOptions.deterministic = args.deterministic;
  deviceOptions.allowTf32 = args.allowTf32;
  auto profiled = profileModel(model, args, deviceOptions);
  if (!profiled) return profiled.status();
  const Chain& chain = profiled->chain;
  auto plans = planAll(chain, model);
  if (!plans) return plans.status();

  auto device = gpu::createCudaDevice(deviceOptions);
  if (!device) return device.status();
  auto baseline = gpu::queryDeviceMemory();
  if (!baseline) return baseline.status();
  const std::uint64_t baselineUsed = baseline->totalBytes - baseline->freeBytes;
  auto interpreter = Interpreter::create(chain, **device);
  if (!interpreter) return interpreter.status().withContext(model);

  nlohmann::json out = modelJson(model, args, *profiled);
  printModelHeader(model, args, profiled->device);
  Verdict verdict;
  for (const PlanReport& planned : *plans) {
    const PlanRow row = runOne(chain, **device, **interpreter, planned, args.steps, baselineUsed);
    printRow(row);
    out["plans"].push_back(rowJson(row));
    verdict.add(row);
  }
  verdict.print();
  out["passed"] = verdict.passed();
  std::fflush(stdout);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = parseArgs(argc, argv);
  if (!args) {
    std::cerr << "remat_gpu_check: " << args.status().message() << "\n";
    return 2;
  }
  if (Status available = gpu::cudaDeviceAvailable(); !available) {
    std::cerr << "remat_gpu_check: " << available.message() << "\n";
    return 3;
  }
  nlohmann::json report;
  int failures = 0;
  for (const std::string& model : args->models) {
    auto result = checkModel(model, *args);
    if (!result) {
      std::cerr << "remat_gpu_check: " << model << ": " << result.status().message() << "\n";
      ++failures;
      continue;
    }
    if (!(*result)["passed"].get<bool>()) ++failures;
    report["models"].push_back(*result);
  }
  if (!args->jsonPath.empty()) {
    const Status written = writeFileAtomically(args->jsonPath, report.dump(2) + "\n");
    if (!written) {
      std::cerr << "remat_gpu_check: " << written.message() << "\n";
      return 1;
    }
  }
  return failures == 0 ? 0 : 1;
}
