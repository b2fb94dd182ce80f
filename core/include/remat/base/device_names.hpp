#pragma once
// The devices' names: what openDevice() takes (devices/devices.hpp), what Device::name() returns,
// what allocator messages start with and what measured timelines carry as their source. The one
// spelling of each, for every stage and front end.
#include <string_view>

namespace remat {

inline constexpr std::string_view kCpuDeviceName = "cpu";
inline constexpr std::string_view kGpuDeviceName = "gpu";

}  // namespace remat
