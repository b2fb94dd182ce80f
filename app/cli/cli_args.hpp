#pragma once
// What the subcommands share beyond cli.hpp: strict checks for the numbers typed on the command
// line, and planning with progress lines and --timeout.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "remat/base/status.hpp"
#include "remat/memory/plan.hpp"
#include "remat/model/chain.hpp"
#include "remat/planners/planners.hpp"
#include "remat/planners/tradeoff.hpp"

namespace remat::cli {

// A whole number written with digits only (no sign, exponent, point or spaces) in
// minimum..maximum, checked on the text before CLI11 converts it, so nothing wraps or saturates:
// "--seed: -1 is not a whole number (digits only)", "--steps: 2147483647 is more than 1000".
CLI::Validator wholeNumberIn(std::uint64_t minimum, std::uint64_t maximum);

// Largest values of options whose work grows with them (docs/formats.md section 3.1).
inline constexpr std::uint64_t kMaxRunSteps = 1000;
inline constexpr std::uint64_t kMaxProfileRepeats = 1000;
inline constexpr std::uint64_t kMaxCpuThreads = 4096;     // --threads of run and profile
inline constexpr double kMaxTimeoutSeconds = 31536000.0;  // a year

// --plan FILE of simulate and run: a plan file (remat/input/plan_file.hpp) placed on the chain, by
// its layers' names when they match, else by numbers; errors say "--plan: FILE:LINE:COL: ...".
// `planner` gets the file's planner name ("plan file" when it names none).
Result<Plan> readPlanArgument(const std::string& path, const Chain& chain, std::string& planner);

// --timeout SECONDS and --progress, for the commands that plan (and tradeoff's front).
struct PlanningArgs {
  double timeoutSeconds = 0.0;  // 0: no limit
  bool progress = false;        // progress lines from the start, not only after 2 s
};
void addPlanningOptions(CLI::App& command, PlanningArgs& args);

// Plans for one command: one deadline for all its planners (compare runs several), a cancel flag
// that a timer thread sets at the deadline, and progress lines on `err` ("remat: planner dp: 40%
// after 2.0 s") once planning has taken 2 s (with --progress, from the start), at most one per
// 10% step or 2 s. A planner stopped by the deadline is Cancelled: "--timeout 10: planner 'dp'
// stopped after 10.0 s, at 37% of its work, on chain 'x' (100000 layers)" (exit 3).
class PlanningMonitor {
 public:
  PlanningMonitor(const PlanningArgs& args, std::ostream& err);
  ~PlanningMonitor();
  PlanningMonitor(const PlanningMonitor&) = delete;
  PlanningMonitor& operator=(const PlanningMonitor&) = delete;

  Result<PlanReport> plan(const Chain& chain, const std::string& planner);
  // The exact front of `remat tradeoff`, under the same deadline and progress lines.
  Result<TradeoffFront> front(const Chain& chain);

 private:
  PlannerOptions optionsFor(const std::string& planner);
  Status stopped(const Status& status, const Chain& chain, const std::string& what) const;
  void report(const std::string& planner, double fraction);

  PlanningArgs args_;
  std::ostream& err_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point lastLine_;
  double nextStep_ = 0.0;
  double lastFraction_ = 0.0;
  std::atomic<bool> cancel_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace remat::cli
