// One inner op of a block on the CPU, forward or backward (run_block_ops.cpp): the dispatch on its
// kind, for run_blocks.cpp's loops over the block's graph, which prepare the ops and lay out the
// workspaces. Included by those two files only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device_impl.hpp"
#include "remat/exec/block_buffers.hpp"

namespace remat::cpu {

// Op `index` of prepared.block forward into its output tensor (a view's owner holds a view's
// values: the caller skips it); `scratch`: the largest inner op's scratch after the arena.
Status forwardInnerOp(const DnnlContext& context, const PreparedLayer& prepared, std::size_t index, ForwardMode mode,
                      std::uint64_t dropoutKey, const BlockForwardTensors& tensors, const ForwardBuffers& b,
                      std::byte* scratch);

// Its backward: d(inputs) written or added as the op's gradAccumulate flags say, its parameters'
// gradients added; the saved tensors it reads checked first.
Status backwardInnerOp(const DnnlContext& context, const PreparedLayer& prepared, std::size_t index,
                       const BlockBackwardTensors& tensors, const BackwardBuffers& b, std::byte* scratch);

}  // namespace remat::cpu
