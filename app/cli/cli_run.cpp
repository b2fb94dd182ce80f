// Placeholder until the executor lands: `remat run` and `remat profile` are registered by the executor work.
#include "cli.hpp"

namespace remat::cli {
void addRunCommands(CLI::App&, Action&) {}
}  // namespace remat::cli
