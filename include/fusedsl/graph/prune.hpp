#pragma once
// graph::prune: drops the nodes that no output and no region result reads (dead-code elimination
// over a builder's table); ids are renumbered in order.
#include <vector>

#include "fusedsl/graph/builder.hpp"

namespace fusedsl::graph {

// Keep only nodes reachable from the outputs and region results; ids are renumbered in order.
constexpr void prune(builder& b) {
  std::vector<char> live(b.nodes.size(), 0);  // not vector<bool>: constexpr in every library
  for (int o : b.outputs) live[std::size_t(o)] = 1;
  for (int st : b.output_state)
    if (st >= 0) live[std::size_t(st)] = 1;
  for (const region_info& r : b.regions) {
    if (r.result >= 0) live[std::size_t(r.result)] = 1;
    if (r.placeholder >= 0) live[std::size_t(r.placeholder)] = 1;
  }
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
  for (int& o : b.outputs) o = remap[std::size_t(o)];
  for (int& st : b.output_state)
    if (st >= 0) st = remap[std::size_t(st)];
  for (region_info& r : b.regions) {
    if (r.result >= 0) r.result = remap[std::size_t(r.result)];
    if (r.placeholder >= 0) r.placeholder = remap[std::size_t(r.placeholder)];
  }
}

}  // namespace fusedsl::graph
