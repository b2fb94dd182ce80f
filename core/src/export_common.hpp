#pragma once
// Helpers shared by the timeline exporters. Internal to core.
#include <string>

#include "remat/status.hpp"
#include "remat/timeline.hpp"

namespace remat::detail {

// Shortest text that reads back to the same double (std::to_chars), never locale-dependent.
std::string formatDouble(double value);

Result<OpKind> parseOpName(const std::string& name);

// The op's layer name, or "" for SEED and layers without a name.
std::string layerName(const Timeline& timeline, const Op& op);

}  // namespace remat::detail
