#pragma once
// Per-layer tables the exact planners share, and the incremental segment scanner behind the
// decomposition of E (docs/planners.md, "The decomposition of E"). Internal to core.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "remat/model/chain.hpp"
#include "remat/planners/planners.hpp"

namespace remat::planning {

// Arrays are indexed by layer 0..n+1; index 0 stands for x0, which is static and so weighs 0 bytes
// in every dynamic term (that also makes "B(1) writes no d(0)" fall out of the formulas).
struct LayerTables {
  std::size_t n = 0;
  std::vector<std::uint64_t> a, e, wf, wb;
  std::vector<std::uint8_t> in, out;
  std::vector<std::uint64_t> w;          // kept bytes w(l) (simulator's keptBytes)
  std::vector<std::uint64_t> transient;  // a(l) when no backward reads x(l), else 0
  std::vector<std::uint64_t> T;          // T(l) = w(1) + ... + w(l)
  // Gafter(l) = the sum of p(j) over the G(j) made by a backward after layer l (B(l+1) .. B(n):
  // p(l+1) + ... + p(n), plus a tied table's p(1) for l >= 1) under GradMode::OnBackward, else 0:
  // the weight gradients alive during the recompute ops of a segment ending at l, and (as
  // Gafter(l-1)) during B(l) (memory-model.md section 11.4).
  std::vector<std::uint64_t> gradAfter;
  // The STEP op's footprint, which no plan changes: E = max(the decomposition, floor).
  std::uint64_t floor = 0;
  // Footprint terms that depend on one layer only; a segment's footprints subtract T(start).
  std::vector<std::uint64_t> forwardPair;    // l >= 2: a(l-1) + a(l) + wf(l)   (discard-mode F(l))
  std::vector<std::uint64_t> recomputeTerm;  // l >= 2: T(l-1) + transient(l-1) + a(l) + e(l) + wf(l)
  // l >= 1: T(l-1) + e(l) + (1 + out) a(l) + a(l-1) + wb(l) + Gafter(l-1) + the fresh gradient
  // (p(l) under GradMode::Static, freshGradientBytes)
  std::vector<std::uint64_t> backwardTerm;
  std::vector<std::uint64_t> keepSuffixMax;      // l >= 2: max over l' in [l, n] of keep-mode F(l') terms
  std::vector<std::uint64_t> backwardSuffixMax;  // l >= 1: max over l' in [l, n] of backwardTerm(l')
};

LayerTables makeLayerTables(const Chain& chain);
// Only n, a and T: all that objectives A and R need.
LayerTables makePrefixTables(const Chain& chain);

// The least possible largest segment cost s(c_j, c_(j+1)) over all plans (planner_linear.cpp).
std::uint64_t minimalMaxSegmentCost(const LayerTables& tables);

// Whether B(c) reads the checkpoint x(c) itself: out(c) and no RE(c). With e(c) > 0 the segment
// ending at c has RE(c), which writes the x(c) that B(c) reads (memory-model.md 2.3).
inline bool backwardReadsCheckpoint(const LayerTables& t, std::size_t c) { return t.out[c] && t.e[c] == 0; }

// What x(start) holds during the segment's backward ops, once R(start+1) / RE are done.
inline std::uint64_t heldDuringBackward(const LayerTables& t, std::size_t start) {
  return start > 0 && (t.in[start + 1] || backwardReadsCheckpoint(t, start)) ? t.a[start] : 0;
}

// seg(start, n), the last segment (keep-mode forward, SEED, backward; never recomputed), given
// heldDuringBackward and the largest footprint of its B ops.
inline std::uint64_t lastSegmentPeak(const LayerTables& t, std::size_t i, std::uint64_t heldBackward,
                                     std::uint64_t backward) {
  std::uint64_t peak = std::max(backward, t.a[i] + t.a[i + 1] + t.e[i + 1] + t.wf[i + 1]);
  if (t.n >= i + 2) peak = std::max(peak, heldBackward + t.keepSuffixMax[i + 2] - t.T[i]);
  const std::uint64_t seed = heldBackward + t.T[t.n - 1] - t.T[i] + 2 * t.a[t.n] + t.e[t.n];
  return std::max(peak, seed);
}

// seg(start, n) in O(1), from the suffix maxima of the B terms.
inline std::uint64_t lastSegmentPeak(const LayerTables& t, std::size_t start) {
  const std::uint64_t held = heldDuringBackward(t, start);
  return lastSegmentPeak(t, start, held, held + t.backwardSuffixMax[start + 1] - t.T[start]);
}

// seg(start, k) for k = start+1, start+2, ...: each extend() adds one layer in O(1).
class SegmentScanner {
 public:
  SegmentScanner(const LayerTables& t, std::size_t start)
      : t_(t), i_(start), k_(start), heldBackward_(heldDuringBackward(t, start)) {}

  std::size_t end() const { return k_; }

  // (start, k] becomes (start, k + 1].
  void extend() {
    const std::size_t k = ++k_;
    const LayerTables& t = t_;
    if (k >= i_ + 2) {
      // R(k-1) joins the recompute, F(k) the discard-mode forward.
      const std::size_t l = k - 1;
      const std::uint64_t r =
          l == i_ + 1 ? t.a[i_] + t.a[l] + t.e[l] + t.wf[l] : heldBackward_ + t.recomputeTerm[l] - t.T[i_];
      recomputeMax_ = std::max(recomputeMax_, r);
      forwardMax_ = std::max(forwardMax_, t.forwardPair[k]);
    }
    backwardMax_ = std::max(backwardMax_, t.backwardTerm[k]);
  }

  // seg(start, end): the largest footprint among the ops of the segment, not counting the
  // checkpoints left of start.
  std::uint64_t peak() const {
    const LayerTables& t = t_;
    const std::size_t i = i_, k = k_;
    const std::uint64_t backward = heldBackward_ + backwardMax_ - t.T[i];
    if (k == t.n) return lastSegmentPeak(t, i, heldBackward_, backward);
    // Discard-mode forward; x(start) stays alive through it when R(start+1) will read it.
    std::uint64_t peak = std::max(backward, t.a[i] + t.a[i + 1] + t.wf[i + 1]);
    // The gradient d(k) entering the segment, the checkpoint x(k) when B(k) reads it, and the weight
    // gradients of the layers right of the segment.
    const std::uint64_t base = t.a[k] * (backwardReadsCheckpoint(t, k) ? 2 : 1) + t.gradAfter[k];
    if (k >= i + 2) peak = std::max({peak, t.a[i] + forwardMax_, base + recomputeMax_});
    if (t.e[k] > 0) {
      // RE(k) reads x(k-1) (or x(start)) and writes x(k): the version B(k) reads when out(k), else a
      // transient copy.
      const std::uint64_t before = k == i + 1 ? t.a[i] : heldBackward_ + t.T[k - 1] - t.T[i] + t.transient[k - 1];
      peak = std::max(peak, base + before + t.e[k] + t.wf[k] + t.a[k]);
    }
    return peak;
  }

  // The largest footprint of the segment's B ops: a lower bound of peak() that never decreases
  // as the segment grows, so a planner can stop extending once it is over a bound.
  std::uint64_t backwardPeak() const { return heldBackward_ + backwardMax_ - t_.T[i_]; }

  // h(start, end): the bytes x(start) holds during every segment to the right.
  std::uint64_t held() const {
    if (i_ == 0) return 0;
    const bool readInBackward =
        t_.in[i_ + 1] || backwardReadsCheckpoint(t_, i_) || (k_ < t_.n && (k_ > i_ + 1 || t_.e[k_] > 0));
    return readInBackward ? t_.a[i_] : 0;
  }

 private:
  const LayerTables& t_;
  std::size_t i_;
  std::size_t k_;
  std::uint64_t heldBackward_;  // x(start) during the backward ops, once R(start+1) / RE are done
  std::uint64_t forwardMax_ = 0;
  std::uint64_t recomputeMax_ = 0;
  std::uint64_t backwardMax_ = 0;
};

// True when the flag says stop. Cheap enough to call once per outer iteration.
inline bool cancelled(const std::atomic<bool>* flag) {
  return flag != nullptr && flag->load(std::memory_order_relaxed);
}

// A planner's progress: at(fraction) tells options.progress how far the planner has got, and
// says whether it must stop, in words that name the planner and that fraction.
class WorkMeter {
 public:
  WorkMeter(const PlannerOptions& options, const char* planner) : options_(options), planner_(planner) {}
  Status at(double fraction) {
    fraction = std::clamp(fraction, 0.0, 1.0);
    if (options_.progress) options_.progress(fraction);
    if (!cancelled(options_.cancelFlag)) return Status::ok();
    return Status::cancelled("planner " + std::string(planner_) + " cancelled at " +
                             std::to_string(static_cast<int>(fraction * 100.0)) + "% of its work");
  }

 private:
  const PlannerOptions& options_;
  const char* planner_;
};

}  // namespace remat::planning
