// linear: the exact minimum of objective R in O(n) (u nondecreasing) or O(n log n).
//
// R(C) = max_j (a(c_1) + ... + a(c_j)) + s(c_j, c_(j+1)). Read from the right: with
// V_j = max(s(c_j, c_(j+1)), a(c_(j+1)) + V_(j+1)) and V_k = s(c_k, n), R(C) = V_0, and V_j is
// nondecreasing in V_(j+1); so g(i) = min over k > i of max(u(k) - T(i), G(k)) with
// G(k) = a(k) + g(k) (k < n), G(n) = 0 (s >= 0, so 0 acts as "nothing after"), and min R = g(0).
// Only t = T(i) depends on i, and t never increases while i walks down. docs/planners.md has the
// proof of both structures below.
#include <algorithm>
#include <limits>
#include <queue>

#include "remat/planners/planners.hpp"
#include "tables.hpp"

namespace remat {
namespace planning {

struct BottleneckSolution {
  std::vector<std::uint64_t> value;  // g(i), i = 0..n-1
  std::vector<std::size_t> next;     // the k that attains g(i)
};

// u(k) = T(k-1) + a(k), the cost of a segment ending at k before T(start) is subtracted.
inline std::uint64_t segmentEnd(const LayerTables& t, std::size_t k) { return t.T[k - 1] + t.a[k]; }

// Value of candidate k at t: max(u(k) - t, G(k)).
inline std::uint64_t candidateValue(std::uint64_t u, std::uint64_t t, std::uint64_t g) { return std::max(u - t, g); }

// The monotone-deque solver; u must be nondecreasing on 1..n. Deque (front to back): indices
// increasing, G strictly decreasing. A new, smaller index k has the smallest u, so it dominates
// every candidate with G >= G(k) (those sit at the front). At the back, once the next-to-last
// candidate is in its sloped regime (u - t >= G), the last one can never be better again: t only
// decreases. After that pruning every candidate but the last is in its flat regime, so the
// minimum is one of the last two. Every index is pushed at the front once, so a plain array with
// a head that only moves left serves as the deque.
Status solveWithDeque(const LayerTables& t, const std::vector<std::uint64_t>& add, WorkMeter* meter,
                      BottleneckSolution& s) {
  const std::size_t n = t.n;
  struct Candidate {
    std::uint64_t u, g;
    std::size_t k;
  };
  std::vector<Candidate> buffer(n + 1);
  std::size_t head = n + 1, tail = n + 1;  // the deque is buffer[head, tail)
  for (std::size_t i = n; i-- > 0;) {
    if ((i & 0xFFFF) == 0 && meter)
      REMAT_RETURN_IF_ERROR(meter->at(static_cast<double>(n - i) / static_cast<double>(n)));
    const std::size_t k = i + 1;
    const std::uint64_t g = k < n ? add[k] + s.value[k] : 0;
    while (head < tail && buffer[head].g >= g) ++head;
    buffer[--head] = {segmentEnd(t, k), g, k};
    const std::uint64_t now = t.T[i];
    while (tail - head >= 2 && buffer[tail - 2].u - now >= buffer[tail - 2].g) --tail;
    const Candidate& last = buffer[tail - 1];
    std::uint64_t best = candidateValue(last.u, now, last.g);
    std::size_t choice = last.k;
    if (tail - head >= 2) {
      const Candidate& previous = buffer[tail - 2];
      const std::uint64_t v = candidateValue(previous.u, now, previous.g);
      if (v < best) best = v, choice = previous.k;
    }
    s.value[i] = best;
    s.next[i] = choice;
  }
  return Status::ok();
}

// The general solver. A candidate k is flat (value G(k)) while G(k) + t >= u(k), sloped (value
// u(k) - t) after; as t decreases each candidate turns sloped once, when t drops below
// theta(k) = u(k) - G(k). T is sorted, so that moment is known when k arrives: a binary search
// files k in the bucket of that iteration. Flat candidates sit in a min-heap on G with lazy
// deletion; sloped ones only need their least u.
Status solveWithHeaps(const LayerTables& t, const std::vector<std::uint64_t>& add, WorkMeter* meter,
                      BottleneckSolution& s) {
  const std::size_t n = t.n;
  const std::vector<std::uint64_t>& T = t.T;
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  using Entry = std::pair<std::uint64_t, std::size_t>;
  std::vector<Entry> heapStorage;
  heapStorage.reserve(n);
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> flatByG(std::greater<>{}, std::move(heapStorage));
  std::vector<std::uint8_t> flat(n + 1, 0);
  std::vector<std::uint64_t> u(n + 1, 0);
  std::vector<std::size_t> bucketHead(n + 1, kNone), bucketNext(n + 1, kNone);
  std::uint64_t slopedU = 0;
  std::size_t slopedArg = 0;  // 0: no sloped candidate yet
  auto makeSloped = [&](std::size_t k) {
    flat[k] = 0;
    if (slopedArg == 0 || u[k] < slopedU || (u[k] == slopedU && k > slopedArg)) slopedU = u[k], slopedArg = k;
  };
  for (std::size_t i = n; i-- > 0;) {
    if ((i & 0xFFFF) == 0 && meter)
      REMAT_RETURN_IF_ERROR(meter->at(static_cast<double>(n - i) / static_cast<double>(n)));
    const std::size_t k = i + 1;
    const std::uint64_t now = T[i];
    const std::uint64_t g = k < n ? add[k] + s.value[k] : 0;
    u[k] = segmentEnd(t, k);
    if (g + now >= u[k]) {
      flat[k] = 1;
      flatByG.push({g, k});
      if (u[k] > g) {
        // It turns sloped at the largest i' < i with T(i') < u(k) - g, if any.
        const auto first = std::lower_bound(T.begin(), T.begin() + static_cast<std::ptrdiff_t>(i), u[k] - g);
        const std::size_t p = static_cast<std::size_t>(first - T.begin());
        if (p > 0) bucketNext[k] = bucketHead[p - 1], bucketHead[p - 1] = k;
      }
    } else {
      makeSloped(k);
    }
    for (std::size_t m = bucketHead[i]; m != kNone; m = bucketNext[m]) makeSloped(m);
    while (!flatByG.empty() && !flat[flatByG.top().second]) flatByG.pop();
    std::uint64_t best = std::numeric_limits<std::uint64_t>::max();
    std::size_t choice = n;
    if (!flatByG.empty()) best = flatByG.top().first, choice = flatByG.top().second;
    if (slopedArg != 0 && slopedU - now < best) best = slopedU - now, choice = slopedArg;
    s.value[i] = best;
    s.next[i] = choice;
  }
  return Status::ok();
}

}  // namespace planning

namespace {

bool nondecreasing(const planning::LayerTables& t) {
  for (std::size_t k = 2; k <= t.n; ++k)
    if (planning::segmentEnd(t, k) < planning::segmentEnd(t, k - 1)) return false;
  return true;
}

}  // namespace

bool segmentEndCostsNondecreasing(const Chain& chain) { return nondecreasing(planning::makePrefixTables(chain)); }

Result<PlannerOutput> planLinear(const Chain& chain, const PlannerOptions& options, LinearMethod method) {
  const std::size_t n = chain.size();
  if (n == 0) return Status::invalid("chain '" + chain.name + "' has no layers");
  const planning::LayerTables tables = planning::makePrefixTables(chain);
  const bool monotone = nondecreasing(tables);
  if (method == LinearMethod::MonotoneDeque && !monotone)
    return Status::invalid("planner linear: the monotone deque needs u(k) = T(k-1) + a(k) nondecreasing, and chain '" +
                           chain.name + "' breaks it");
  planning::BottleneckSolution s{std::vector<std::uint64_t>(n, 0), std::vector<std::size_t>(n, n)};
  const bool useDeque = method == LinearMethod::MonotoneDeque || (method == LinearMethod::Automatic && monotone);
  planning::WorkMeter meter(options, "linear");
  REMAT_RETURN_IF_ERROR(useDeque ? planning::solveWithDeque(tables, tables.a, &meter, s)
                                 : planning::solveWithHeaps(tables, tables.a, &meter, s));
  PlannerOutput result;
  result.objectiveBytes = s.value[0];
  for (std::size_t i = s.next[0]; i < n; i = s.next[i]) result.plan.checkpoints.push_back(i);
  return result;
}

namespace planning {

// The smallest possible largest segment cost over all plans (a lower bound dp uses): the same
// recursion with G(k) = g(k).
std::uint64_t minimalMaxSegmentCost(const LayerTables& tables) {
  const std::size_t n = tables.n;
  const std::vector<std::uint64_t> zero(n + 1, 0);
  BottleneckSolution s{std::vector<std::uint64_t>(n, 0), std::vector<std::size_t>(n, n)};
  const Status status =
      nondecreasing(tables) ? solveWithDeque(tables, zero, nullptr, s) : solveWithHeaps(tables, zero, nullptr, s);
  (void)status;  // without a meter it cannot fail
  return s.value[0];
}

}  // namespace planning
}  // namespace remat
