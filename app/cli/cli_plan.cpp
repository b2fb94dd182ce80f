// Placeholder until the planners land.
#include "cli.hpp"

namespace remat::cli {
void addPlanCommands(CLI::App&, Action&) {}
}  // namespace remat::cli
