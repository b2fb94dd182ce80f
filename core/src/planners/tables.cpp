#include "tables.hpp"

#include <algorithm>

#include "remat/memory/simulator.hpp"

namespace remat::planning {

LayerTables makeLayerTables(const Chain& chain) {
  const std::size_t n = chain.size();
  LayerTables t;
  t.n = n;
  const std::size_t size = n + 2;
  for (auto* v : {&t.a, &t.e, &t.wf, &t.wb, &t.w, &t.transient, &t.T, &t.gradAfter, &t.forwardPair, &t.recomputeTerm,
                  &t.backwardTerm, &t.keepSuffixMax, &t.backwardSuffixMax})
    v->assign(size, 0);
  t.in.assign(size, 0);
  t.out.assign(size, 0);
  for (std::size_t l = 1; l <= n; ++l) {
    const LayerNumbers& m = chain.at(l);
    t.a[l] = m.outBytes;
    t.e[l] = m.extraBytes;
    t.wf[l] = m.fwdWorkspaceBytes;
    t.wb[l] = m.bwdWorkspaceBytes;
    t.in[l] = m.needsInput;
    t.out[l] = m.needsOutput;
    t.w[l] = keptBytes(chain, l);
    t.transient[l] = t.a[l] + t.e[l] - t.w[l];
    t.T[l] = t.T[l - 1] + t.w[l];
  }
  // Gradients the backward ops right of l wrote and that are still alive: the weight gradients
  // (on-backward: G(l) made by its writer's backward, B(l) or a tied head's B(n) for the shared
  // table; memory-model.md 11.2) and a tied head's table gradient as autograd holds it until B(1)
  // reads it (12.2).
  std::vector<std::uint64_t> madeAt(size, 0);
  if (chain.step.grads == GradMode::OnBackward) {
    const std::vector<std::size_t> writer = weightGradientWriters(chain);
    for (std::size_t l = 1; l <= n; ++l) madeAt[writer[l]] += chain.at(l).paramBytes;
  }
  std::uint64_t sharedGrad = 0;
  for (std::size_t l = n; l-- > 0;) {
    sharedGrad += chain.at(l + 1).sharedGradBytes;
    t.gradAfter[l] = t.gradAfter[l + 1] + madeAt[l + 1] + chain.at(l + 1).sharedGradBytes;
  }
  t.floor = optimizerStepFootprint(chain);
  for (std::size_t l = 1; l <= n; ++l) {
    // B(1) of a tied head's chain: its workspace holds at least the embedding's own table gradient.
    const std::uint64_t wb = l == 1 ? std::max(t.wb[l], sharedGrad) : t.wb[l];
    t.backwardTerm[l] = t.T[l - 1] + t.e[l] + (t.out[l] ? 2 : 1) * t.a[l] + t.a[l - 1] + wb + t.gradAfter[l - 1] +
                        freshGradientBytes(chain, l);
    if (l >= 2) {
      t.forwardPair[l] = t.a[l - 1] + t.a[l] + t.wf[l];
      t.recomputeTerm[l] = t.T[l - 1] + t.transient[l - 1] + t.a[l] + t.e[l] + t.wf[l];
    }
  }
  // Keep-mode F(l), l >= start+2: x(l-1) and E(l-1) are alive whatever the flags say (F(l)
  // reads x(l-1)); the layers before that hold what they keep, T(l-2) - T(start).
  for (std::size_t l = n; l >= 2; --l) {
    const std::uint64_t term = t.T[l - 2] + t.a[l - 1] + t.e[l - 1] + t.a[l] + t.e[l] + t.wf[l];
    t.keepSuffixMax[l] = std::max(term, t.keepSuffixMax[l + 1]);
  }
  for (std::size_t l = n; l >= 1; --l) t.backwardSuffixMax[l] = std::max(t.backwardTerm[l], t.backwardSuffixMax[l + 1]);
  return t;
}

LayerTables makePrefixTables(const Chain& chain) {
  const std::size_t n = chain.size();
  LayerTables t;
  t.n = n;
  t.a.assign(n + 2, 0);
  t.T.assign(n + 2, 0);
  for (std::size_t l = 1; l <= n; ++l) {
    t.a[l] = chain.at(l).outBytes;
    t.T[l] = t.T[l - 1] + keptBytes(chain, l);
  }
  return t;
}

}  // namespace remat::planning
