#pragma once
// Inception-v3 in the zoo (zoo_inception.cpp), a file of its own beside zoo.cpp, which registers it.
#include "remat/model/chain.hpp"
#include "remat/model/zoo.hpp"

namespace remat::detail {

// torchvision.models.inception_v3(aux_logits=False)'s layers appended to spec.layers (its input set).
void inceptionV3(ChainSpec& spec, const ZooOptions& options);

}  // namespace remat::detail
