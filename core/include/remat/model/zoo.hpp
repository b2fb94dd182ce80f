#pragma once
// The model zoo: torchvision's classification CNNs as layer chains (one chain layer per residual
// block), with batch size, input resolution and dtype as parameters.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remat/base/status.hpp"
#include "remat/model/chain.hpp"

namespace remat {

struct ZooOptions {
  std::int64_t batch = 64;
  std::int64_t resolution = 224;
  DType dtype = DType::Float32;
  std::int64_t numClasses = 1000;
  // Token models (gpt2, bert_base): the sequence length; 0 is the model's context (1,024, 512).
  std::int64_t sequence = 0;
  // Transformers: PyTorch 2's scaled_dot_product_attention (true) or the math of the exported graph
  // (docs/memory-model.md section 12).
  bool fusedAttention = true;
};

struct ZooEntry {
  std::string name;            // torchvision's name: "vgg16", "resnet50", ...
  std::string description;     // one line
  std::int64_t minResolution;  // the smallest input resolution its shapes allow
  bool tokenModel = false;     // its input is token ids [N, S]: a sequence length, not a resolution
};

std::vector<ZooEntry> zooModels();

// The chain file spec of a zoo model; InvalidInput for unknown names (listing the known ones) or
// impossible options.
Result<ChainSpec> zooChain(std::string_view name, const ZooOptions& options);

}  // namespace remat
