#pragma once
// The model zoo: torchvision's classification CNNs as layer chains (one chain layer per residual
// block), with batch size, input resolution and dtype as parameters.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remat/model/chain.hpp"
#include "remat/base/status.hpp"

namespace remat {

struct ZooOptions {
  std::int64_t batch = 64;
  std::int64_t resolution = 224;
  DType dtype = DType::Float32;
  std::int64_t numClasses = 1000;
};

struct ZooEntry {
  std::string name;            // torchvision's name: "vgg16", "resnet50", ...
  std::string description;     // one line
  std::int64_t minResolution;  // the smallest input resolution its shapes allow
};

std::vector<ZooEntry> zooModels();

// The chain file spec of a zoo model; InvalidInput for unknown names (listing the known ones) or
// impossible options.
Result<ChainSpec> zooChain(std::string_view name, const ZooOptions& options);

}  // namespace remat
