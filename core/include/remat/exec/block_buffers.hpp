#pragma once
// Where the inner tensors of a residual block live while a backend runs the block's inner ops
// (block.hpp's protocol), given the layer's checked buffers. The CPU and CUDA backends place them
// alike; only their kernels differ. A view (a channel slice, BlockTensor::viewOf) is its owner's
// pointer plus the offset of its first channel in the backend's layout: its first channel of the
// owner's first channels-last row (the CPU backend: rows of rowChannels(owner) floats), or its
// first channel plane of the owner's first sample (NCHW, the GPU backend: samples of C*H*W floats).
#include <cstddef>
#include <cstdint>
#include <string>

#include "remat/exec/device_calls.hpp"
#include "remat/model/block.hpp"

namespace remat {

enum class ViewLayout { ChannelsLast, Nchw };

// The offset in elements of view t's first element from its owner's, in `layout` (the tensors
// below step it in the graph's dtype).
std::int64_t viewOffset(const BlockGraph& graph, std::size_t t, ViewLayout layout);

// A block's forward: x(l-1), x(l), and each inner tensor in the workspace at its arena offset or,
// in keep mode when it is saved, in E at its extras offset.
class BlockForwardTensors {
 public:
  BlockForwardTensors(const BlockGraph& graph, ForwardMode mode, const ForwardBuffers& buffers,
                      ViewLayout layout = ViewLayout::ChannelsLast)
      : graph_(graph), keep_(mode == ForwardMode::Keep), b_(buffers), layout_(layout) {}
  // Internal error, prefixed by `where`, when the call lacks the workspace or E the graph needs.
  Status check(const std::string& where) const;
  float* tensor(std::size_t t) const;
  // Where a batch norm saves its mean and inverse std: E + statsOffset in keep mode, else null.
  float* stats(const BlockOp& op) const;

 private:
  const BlockGraph& graph_;
  bool keep_;
  ForwardBuffers b_;
  ViewLayout layout_;
};

// A block's backward: the value of each tensor (x(l-1), x(l), or its saved copy in E) and its
// gradient (d(l-1), null for layer 1; d(l); else the workspace at its gradient offset).
class BlockBackwardTensors {
 public:
  BlockBackwardTensors(const BlockGraph& graph, const BackwardBuffers& buffers,
                       ViewLayout layout = ViewLayout::ChannelsLast)
      : graph_(graph), b_(buffers), layout_(layout) {}
  // Internal error, prefixed by `where`, when the call lacks the workspace or E the graph needs.
  Status check(const std::string& where) const;
  // Internal error when a tensor the op's backward reads has no value.
  Status checkReads(const BlockOp& op, const std::string& where) const;
  const float* value(std::size_t t) const;
  float* grad(std::size_t t) const;
  const float* stats(const BlockOp& op) const;  // E + statsOffset

 private:
  const BlockGraph& graph_;
  BackwardBuffers b_;
  ViewLayout layout_;
};

}  // namespace remat
