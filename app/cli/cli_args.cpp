#include "cli_args.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "remat/base/text.hpp"
#include "remat/input/plan_file.hpp"
#include "remat/planners/registry.hpp"

namespace remat::cli {
namespace {

constexpr auto kQuietPlanning = std::chrono::seconds(2);  // no progress lines for shorter planning

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// --timeout's text: a positive decimal number of seconds, at most kMaxTimeoutSeconds.
std::string checkSeconds(const std::string& text) {
  double seconds = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(seconds))
    return quoteText(text, 40) + " is not a number of seconds";
  if (seconds <= 0.0 || seconds > kMaxTimeoutSeconds)
    return quoteText(text, 40) + " must be more than 0 and at most " + std::to_string(std::lround(kMaxTimeoutSeconds));
  return "";
}

}  // namespace

CLI::Validator wholeNumberIn(std::uint64_t minimum, std::uint64_t maximum) {
  const std::string range = std::to_string(minimum) + ".." + std::to_string(maximum);
  return CLI::Validator(
      [minimum, maximum](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        const bool digitsOnly = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        if (!digitsOnly || end != text.data() + text.size())
          return quoteText(text, 40) + " is not a whole number (digits only)";
        if (error == std::errc::result_out_of_range || value > maximum)
          return quoteText(text, 40) + " is more than " + std::to_string(maximum);
        if (value < minimum) return quoteText(text, 40) + " is less than " + std::to_string(minimum);
        return "";
      },
      "INT in " + range);
}

void addPlanningOptions(CLI::App& command, PlanningArgs& args) {
  command
      .add_option("--timeout", args.timeoutSeconds,
                  "Stop planning after this many seconds (exit 3, saying how far the planner got)")
      ->check(CLI::Validator(checkSeconds, "SECONDS"));
  command.add_flag("--progress", args.progress,
                   "Print planning progress on stderr from the start (default: after 2 s)");
}

PlanningMonitor::PlanningMonitor(const PlanningArgs& args, std::ostream& err)
    : args_(args), err_(err), started_(std::chrono::steady_clock::now()), lastLine_(started_) {
  if (args_.timeoutSeconds <= 0.0) return;
  const auto deadline = started_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(args_.timeoutSeconds));
  timer_ = std::thread([this, deadline] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!wake_.wait_until(lock, deadline, [this] { return stopping_; })) cancel_.store(true);
  });
}

PlanningMonitor::~PlanningMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (timer_.joinable()) timer_.join();
}

void PlanningMonitor::report(const std::string& planner, double fraction) {
  lastFraction_ = fraction;
  if (fraction < nextStep_ && std::chrono::steady_clock::now() - lastLine_ < kQuietPlanning) return;
  if (!args_.progress && std::chrono::steady_clock::now() - started_ < kQuietPlanning) return;
  char line[160];
  std::snprintf(line, sizeof line, "remat: planner %s: %d%% after %.1f s\n", planner.c_str(),
                static_cast<int>(fraction * 100.0), secondsSince(started_));
  err_ << line << std::flush;
  lastLine_ = std::chrono::steady_clock::now();
  nextStep_ = std::floor(fraction * 10.0 + 1.0) / 10.0;
}

PlannerOptions PlanningMonitor::optionsFor(const std::string& planner) {
  PlannerOptions options;
  options.cancelFlag = &cancel_;
  options.progress = [this, planner](double fraction) { report(planner, fraction); };
  nextStep_ = 0.0;
  lastFraction_ = 0.0;
  return options;
}

// A stop by the deadline says how far the work got; any other error passes through.
Status PlanningMonitor::stopped(const Status& status, const Chain& chain, const std::string& what) const {
  if (status.code() != ErrorCode::Cancelled || !cancel_.load()) return status;
  char timing[64];
  std::snprintf(timing, sizeof timing, "--timeout %g: ", args_.timeoutSeconds);
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", secondsSince(started_));
  return Status::cancelled(timing + what + " stopped after " + seconds + " s, at " +
                           std::to_string(static_cast<int>(lastFraction_ * 100.0)) + "% of its work, on chain " +
                           quoteText(chain.name, 40) + " (" + std::to_string(chain.size()) + " layers)");
}

Result<PlanReport> PlanningMonitor::plan(const Chain& chain, const std::string& planner) {
  auto result = runPlanner(chain, planner, optionsFor(planner));
  if (result) return result;
  return stopped(result.status(), chain, "planner " + quoteText(planner, 40));
}

Result<TradeoffFront> PlanningMonitor::front(const Chain& chain) {
  auto result = paretoFront(chain, optionsFor("front"));
  if (result) return result;
  return stopped(result.status(), chain, "the Pareto front");
}

Result<Plan> readPlanArgument(const std::string& path, const Chain& chain, std::string& planner) {
  auto file = readPlanFile(path);
  if (!file) return file.status().withContext("--plan");
  auto placed = placePlan(*file, chain);
  if (!placed) return placed.status().withContext("--plan");
  planner = file->planner.empty() ? "plan file" : file->planner;
  return Plan{std::move(placed->checkpoints)};
}

}  // namespace remat::cli
