#include "cli_progress.hpp"

#include <cstdio>
#include <string>

#include "remat/base/duration.hpp"
#include "remat/memory/timeline.hpp"

namespace remat::cli {

std::string progressText(const RunProgress& p) {
  char line[160];
  const std::string left = formatTimeLeft(p.secondsLeft());
  const std::string estimate = left.empty() ? "" : ", " + left;
  std::snprintf(line, sizeof line, "step %d/%d  op %zu/%zu %-8s %3.0f%%  %.1f s%s", p.step + 1, p.steps, p.opIndex + 1,
                p.opCount, opLabel(p.op).c_str(), 100.0 * p.fraction(), p.elapsedSeconds, estimate.c_str());
  return line;
}

TerminalProgress::TerminalProgress(std::ostream& out, bool enabled, double delaySeconds, double intervalSeconds)
    : out_(out), enabled_(enabled), delaySeconds_(delaySeconds), intervalSeconds_(intervalSeconds) {}

TerminalProgress::~TerminalProgress() { finish(); }

void TerminalProgress::update(const RunProgress& progress) {
  if (!enabled_ || progress.elapsedSeconds < delaySeconds_) return;
  if (written_ && progress.elapsedSeconds - lastWriteSeconds_ < intervalSeconds_) return;
  // "\r" returns to the line's start, ESC [K clears what a longer earlier line left.
  out_ << '\r' << progressText(progress) << "\x1b[K" << std::flush;
  lastWriteSeconds_ = progress.elapsedSeconds;
  written_ = true;
}

void TerminalProgress::finish() {
  if (!written_) return;
  out_ << "\r\x1b[K" << std::flush;
  written_ = false;
}

}  // namespace remat::cli
