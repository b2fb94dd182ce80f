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

}  // namespace

Status layoutBlockGraph(BlockGraph& graph) {
  auto& tensors = graph.tensors;
  auto& ops = graph.ops;
  if (tensors.size() < 2 || ops.empty()) return Status::internal("block '" + graph.name + "' has no inner ops");
  const std::size_t output = graph.outputTensor();

  // Every offset is at most the sum of all slots, so checking that sum once rules out overflow.
  unsigned __int128 totalSlots = 0;
  for (const auto& t : tensors) totalSlots += alignUp(t.bytes, kBlockTensorAlignBytes);
  for (const auto& op : ops) totalSlots += alignUp(op.statsBytes, kBlockStatsAlignBytes);
  if (totalSlots > std::numeric_limits<std::uint64_t>::max() / 2)
    return Status::invalid("block '" + graph.name + "': its inner tensors overflow 64-bit bytes");

  // Lifetimes, the saved set and the flags.
  for (std::size_t i = 0; i < ops.size(); ++i) {
    for (std::size_t in : ops[i].inputs) tensors[in].lastForwardReader = i;
    if (ops[i].readsInput) {
      const std::size_t in = ops[i].inputs.front();
      if (in == 0) graph.needsInput = true;
      if (graph.isInner(in)) tensors[in].saved = true;
    }
    if (ops[i].readsOutput && graph.isInner(ops[i].output)) tensors[ops[i].output].saved = true;
  }
  if (tensors[output].producer != ops.size() - 1) return Status::internal("block output is not the last op's");
  graph.needsOutput = ops.back().readsOutput;
  graph.outBytes = tensors[output].bytes;
  graph.paramCount = 0;
  graph.fwdCost = 0.0;
  for (const auto& op : ops) {
    graph.paramCount += op.paramCount;
    graph.fwdCost += op.fwdCost;
  }

  // Forward arena: inner tensor t is alive over ops [producer, lastForwardReader] in discard mode.
  std::vector<Slot> slots;
  std::vector<std::size_t> slotTensor;
  for (std::size_t t = 1; t < output; ++t) {
    if (tensors[t].lastForwardReader == kBlockNoOp) return Status::internal("inner tensor nobody reads");
    slots.push_back(
        {tensors[t].producer, tensors[t].lastForwardReader, alignUp(tensors[t].bytes, kBlockTensorAlignBytes), 0});
    slotTensor.push_back(t);
  }
  graph.fwdWorkspaceBytes = packSlots(slots);
  graph.fwdLiveLowerBoundBytes = liveLowerBound(slots, ops.size());
  for (std::size_t s = 0; s < slots.size(); ++s) tensors[slotTensor[s]].arenaOffset = slots[s].offset;

  // Gradient arena: d(t) is written by the backward of t's last reader and read by the backward of
  // its producer: alive over the same op indices, so the same intervals (laid out on their own).
  std::vector<Slot> gradSlots = slots;
  graph.bwdWorkspaceBytes = packSlots(gradSlots);
  graph.bwdLiveLowerBoundBytes = liveLowerBound(gradSlots, ops.size());
  for (std::size_t s = 0; s < gradSlots.size(); ++s) tensors[slotTensor[s]].gradOffset = gradSlots[s].offset;

  // E: saved tensors in tensor order, then the batch-norm statistics in op order.
  std::uint64_t cursor = 0;
  for (std::size_t t = 1; t < output; ++t) {
    if (!tensors[t].saved) continue;
    cursor = alignUp(cursor, kBlockTensorAlignBytes);
    tensors[t].extrasOffset = cursor;
    cursor += tensors[t].bytes;
  }
  for (auto& op : ops) {
    if (op.statsBytes == 0) continue;
    cursor = alignUp(cursor, kBlockStatsAlignBytes);
    op.statsOffset = cursor;
    cursor += op.statsBytes;
  }
  graph.extraBytes = cursor;

  // Backward in reverse op order: the first op to reach d(t) writes it, later ones add into it.
  std::vector<bool> reached(tensors.size(), false);
  for (std::size_t i = ops.size(); i-- > 0;) {
    ops[i].gradAccumulate.assign(ops[i].inputs.size(), false);
    for (std::size_t j = 0; j < ops[i].inputs.size(); ++j) {
      const std::size_t in = ops[i].inputs[j];
      ops[i].gradAccumulate[j] = reached[in];
      reached[in] = true;
    }
  }
  return Status::ok();
}

}  // namespace remat::detail
