// Lifetimes and byte layout of a block's inner tensors: the forward arena (wf), the extras E (e) and
// the gradient arena (wb). The layout is an offline interval packing, greedy by size: slots in
// decreasing size, each at the best-fitting gap among the slots it is alive with (docs/layers.md).
#include <algorithm>
#include <limits>
#include <numeric>

#include "layers_common.hpp"

namespace remat::detail {
namespace {

std::uint64_t alignUp(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

struct Slot {
  std::size_t first = 0;  // op indices during which it is alive, inclusive
  std::size_t last = 0;
  std::uint64_t bytes = 0;  // already rounded to the alignment
  std::uint64_t offset = 0;
};

bool overlapInTime(const Slot& a, const Slot& b) { return a.first <= b.last && b.first <= a.last; }

// Places every slot; returns the arena size.
std::uint64_t packSlots(std::vector<Slot>& slots) {
  std::vector<std::size_t> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (slots[a].bytes != slots[b].bytes) return slots[a].bytes > slots[b].bytes;
    return slots[a].first < slots[b].first;
  });
  std::vector<std::size_t> placed;
  std::uint64_t arenaBytes = 0;
  for (std::size_t index : order) {
    Slot& slot = slots[index];
    std::vector<const Slot*> neighbours;
    for (std::size_t other : placed)
      if (overlapInTime(slot, slots[other])) neighbours.push_back(&slots[other]);
    std::sort(neighbours.begin(), neighbours.end(), [](const Slot* a, const Slot* b) { return a->offset < b->offset; });
    std::uint64_t cursor = 0;
    std::uint64_t bestOffset = 0;
    std::uint64_t bestGap = 0;
    bool found = false;
    for (const Slot* n : neighbours) {
      if (n->offset > cursor) {
        const std::uint64_t gap = n->offset - cursor;
        if (gap >= slot.bytes && (!found || gap < bestGap)) {
          found = true;
          bestGap = gap;
          bestOffset = cursor;
        }
      }
      cursor = std::max(cursor, n->offset + n->bytes);
    }
    slot.offset = found ? bestOffset : cursor;
    arenaBytes = std::max(arenaBytes, slot.offset + slot.bytes);
    placed.push_back(index);
  }
  return arenaBytes;
}

std::uint64_t liveLowerBound(const std::vector<Slot>& slots, std::size_t opCount) {
  std::uint64_t best = 0;
  for (std::size_t op = 0; op < opCount; ++op) {
    std::uint64_t live = 0;
    for (const Slot& s : slots)
      if (s.first <= op && op <= s.last) live += s.bytes;
    best = std::max(best, live);
  }
  return best;
}

// Every offset is at most the sum of all slots, so checking that sum once rules out overflow.
Status checkSlotTotal(const BlockGraph& graph) {
  unsigned __int128 totalSlots = 0;
  for (const auto& t : graph.tensors) totalSlots += alignUp(t.bytes, kBlockTensorAlignBytes);
  for (const auto& op : graph.ops) totalSlots += alignUp(op.statsBytes, kBlockStatsAlignBytes);
  if (totalSlots > std::numeric_limits<std::uint64_t>::max() / 2)
    return Status::invalid("block '" + graph.name + "': its inner tensors overflow 64-bit bytes");
  return Status::ok();
}

// Each tensor's last forward reader, which inner tensors E saves, and the block's own flags, a, p
// and forward cost.
Status setLifetimesAndNumbers(BlockGraph& graph) {
  auto& tensors = graph.tensors;
  auto& ops = graph.ops;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    for (std::size_t in : ops[i].inputs) tensors[in].lastForwardReader = i;
    for (std::size_t j = 0; j < ops[i].inputs.size(); ++j) {
      const bool read = j == 0 ? ops[i].readsInput : j == 1 && ops[i].readsSecondInput;
      if (!read) continue;
      const std::size_t in = ops[i].inputs[j];
      if (in == 0) graph.needsInput = true;
      if (graph.isInner(in)) tensors[in].saved = true;
    }
    if (ops[i].readsOutput && graph.isInner(ops[i].output)) tensors[ops[i].output].saved = true;
  }
  const std::size_t output = graph.outputTensor();
  if (tensors[output].producer != ops.size() - 1) return Status::internal("block output is not the last op's");
  graph.needsOutput = ops.back().readsOutput;
  graph.outBytes = tensors[output].bytes;
  graph.paramCount = 0;
  graph.fwdCost = 0.0;
  for (const auto& op : ops) {
    graph.paramCount += op.paramCount;
    graph.fwdCost += op.fwdCost;
  }
  return Status::ok();
}

// Forward arena: inner tensor t is alive over ops [producer, lastForwardReader] in discard mode.
// Gradient arena: d(t) is written by the backward of t's last reader and read by the backward of
// its producer: alive over the same op indices, so the same intervals (laid out on their own).
Status layoutArenas(BlockGraph& graph) {
  auto& tensors = graph.tensors;
  std::vector<Slot> slots;
  std::vector<std::size_t> slotTensor;
  for (std::size_t t = 1; t < graph.outputTensor(); ++t) {
    if (tensors[t].lastForwardReader == kBlockNoOp) return Status::internal("inner tensor nobody reads");
    slots.push_back(
        {tensors[t].producer, tensors[t].lastForwardReader, alignUp(tensors[t].bytes, kBlockTensorAlignBytes), 0});
    slotTensor.push_back(t);
  }
  graph.fwdWorkspaceBytes = packSlots(slots);
  graph.fwdLiveLowerBoundBytes = liveLowerBound(slots, graph.ops.size());
  std::vector<Slot> gradSlots = slots;
  graph.bwdWorkspaceBytes = packSlots(gradSlots);
  graph.bwdLiveLowerBoundBytes = liveLowerBound(gradSlots, graph.ops.size());
  for (std::size_t s = 0; s < slots.size(); ++s) {
    tensors[slotTensor[s]].arenaOffset = slots[s].offset;
    tensors[slotTensor[s]].gradOffset = gradSlots[s].offset;
  }
  return Status::ok();
}

// E: saved tensors in tensor order, then the batch-norm statistics in op order.
void layoutExtras(BlockGraph& graph) {
  std::uint64_t cursor = 0;
  for (std::size_t t = 1; t < graph.outputTensor(); ++t) {
    if (!graph.tensors[t].saved) continue;
    cursor = alignUp(cursor, kBlockTensorAlignBytes);
    graph.tensors[t].extrasOffset = cursor;
    cursor += graph.tensors[t].bytes;
  }
  for (auto& op : graph.ops) {
    if (op.statsBytes == 0) continue;
    cursor = alignUp(cursor, kBlockStatsAlignBytes);
    op.statsOffset = cursor;
    cursor += op.statsBytes;
  }
  graph.extraBytes = cursor;
}

// Backward in reverse op order: the first op to reach d(t) writes it, later ones add into it.
void markGradientAccumulation(BlockGraph& graph) {
  std::vector<bool> reached(graph.tensors.size(), false);
  for (std::size_t i = graph.ops.size(); i-- > 0;) {
    BlockOp& op = graph.ops[i];
    op.gradAccumulate.assign(op.inputs.size(), false);
    for (std::size_t j = 0; j < op.inputs.size(); ++j) {
      op.gradAccumulate[j] = reached[op.inputs[j]];
      reached[op.inputs[j]] = true;
    }
  }
}

}  // namespace

Status layoutBlockGraph(BlockGraph& graph) {
  if (graph.tensors.size() < 2 || graph.ops.empty())
    return Status::internal("block '" + graph.name + "' has no inner ops");
  REMAT_RETURN_IF_ERROR(checkSlotTotal(graph));
  REMAT_RETURN_IF_ERROR(setLifetimesAndNumbers(graph));
  REMAT_RETURN_IF_ERROR(layoutArenas(graph));
  layoutExtras(graph);
  markGradientAccumulation(graph);
  return Status::ok();
}

}  // namespace remat::detail
