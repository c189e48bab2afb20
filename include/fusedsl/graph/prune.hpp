#pragma once
// graph::prune: drops the nodes that no output and no region result reads (dead-code elimination
// over a builder's table); ids are renumbered in order.
#include <vector>

#include "fusedsl/graph/builder.hpp"

namespace fusedsl::graph {

// Keep only nodes reachable from the outputs and region results; ids are renumbered in order.
constexpr void prune(builder& b) {
  std::vector<char> live(b.nodes.size(), 0);  // not vector<bool>: constexpr in every library
  for_each_root(b, [&](int id) { live[std::size_t(id)] = 1; });
  for (int i = b.size() - 1; i >= 0; --i) {
    if (!live[std::size_t(i)]) continue;
    const node& n = b.nodes[std::size_t(i)];
    for (int k = 0; k < n.n_in; ++k) live[std::size_t(n.in[std::size_t(k)])] = 1;
  }
  std::vector<int> remap(b.nodes.size(), -1);
  std::vector<node> kept;
  for (std::size_t i = 0; i < b.nodes.size(); ++i) {
    if (!live[i]) continue;
    node n = b.nodes[i];
    for (int k = 0; k < n.n_in; ++k)
      n.in[std::size_t(k)] = remap[std::size_t(n.in[std::size_t(k)])];
    remap[i] = int(kept.size());
    kept.push_back(n);
  }
  b.nodes = kept;
  remap_roots(b, [&](int id) { return remap[std::size_t(id)]; });
}

}  // namespace fusedsl::graph
