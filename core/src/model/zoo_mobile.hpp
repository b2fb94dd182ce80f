#pragma once
// The mobile-era CNNs of the zoo built from blocks of inner ops (zoo_mobile.cpp); zoo.cpp registers them.
#include "remat/model/zoo.hpp"
#include "zoo_builder.hpp"

namespace remat::detail {

// Each appends torchvision's model of that name to b's chain (its input already set).
void efficientNetB0(SpecBuilder& b, const ZooOptions& o);
void mobilenetV3Large(SpecBuilder& b, const ZooOptions& o);
void regnetY400mf(SpecBuilder& b, const ZooOptions& o);
void shufflenetV2(SpecBuilder& b, const ZooOptions& o);

}  // namespace remat::detail
