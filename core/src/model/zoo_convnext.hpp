#pragma once
// ConvNeXt in the zoo (zoo_convnext.cpp), a file of its own beside zoo.cpp, which registers it.
#include "remat/model/chain.hpp"
#include "remat/model/zoo.hpp"

namespace remat::detail {

// torchvision.models.convnext_tiny's layers appended to spec.layers (its input already set).
void convnextTiny(ChainSpec& spec, const ZooOptions& options);

}  // namespace remat::detail
