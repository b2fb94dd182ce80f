#pragma once
// A run's progress on a terminal: one line on stderr, rewritten in place ("step 1/1  op 37/98
// B(12)  41%  5.2 s, about 7 s left"), for runs that last over a second. Quiet when disabled (the
// stream is not a terminal, or --json asked for machine output).
#include <chrono>
#include <ostream>

#include "remat/exec/interpreter.hpp"

namespace remat::cli {

class TerminalProgress {
 public:
  // Writes nothing unless `enabled`; then only once a run has lasted `delaySeconds`, and at most
  // every `intervalSeconds`.
  TerminalProgress(std::ostream& out, bool enabled, double delaySeconds = 1.0, double intervalSeconds = 0.1);
  ~TerminalProgress();  // finish()
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  // Called before each op (RunOptions::progress).
  void update(const RunProgress& progress);
  // Clears the line, if one was written, so the report starts on a clean line.
  void finish();

 private:
  std::ostream& out_;
  bool enabled_;
  double delaySeconds_, intervalSeconds_;
  double lastWriteSeconds_ = -1.0;
  bool written_ = false;
};

// The progress line's text, without the carriage return (tests and the explorer's wording alike).
std::string progressText(const RunProgress& progress);

}  // namespace remat::cli
