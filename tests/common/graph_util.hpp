#pragma once
// What the graph tests ask of a constexpr node table.
#include "fusedsl/graph/node.hpp"

namespace fusedsl::test {

// The number of nodes of kind k.
template <class G>
constexpr int count(const G& g, graph::op_kind k) {
  int c = 0;
  for (int i = 0; i < g.size(); ++i) c += g[i].op == k ? 1 : 0;
  return c;
}

}  // namespace fusedsl::test
