#pragma once
// Text and Graphviz DOT forms of a node table.
#include <sstream>
#include <string>

#include "fusedsl/graph/node.hpp"

namespace fusedsl::graph {

inline std::string describe(const node& n) {
  std::ostringstream os;
  os << name_of(n.op);
  switch (n.op) {
    case op_kind::input:
    case op_kind::param:
    case op_kind::state:
      os << " \"" << n.name.view() << "\"";
      break;
    case op_kind::constant: os << " " << n.value << (n.weak ? " (weak)" : ""); break;
    case op_kind::iota: case op_kind::softmax: case op_kind::log_softmax: case op_kind::concat:
      os << " axis=" << n.axis; break;
    case op_kind::reduce_sum:
    case op_kind::reduce_mean:
    case op_kind::reduce_max:
    case op_kind::reduce_min:
      os << " axis=" << n.axis << (n.keepdims ? " keepdims" : ""); break;
    case op_kind::matmul:
      if (n.trans_a) os << " trans_a";
      if (n.trans_b) os << " trans_b";
      break;
    case op_kind::transpose:
      os << " perm=[";
      for (int i = 0; i < n.shape.rank; ++i) os << (i ? "," : "") << n.perm[std::size_t(i)];
      os << "]";
      break;
    case op_kind::slice: os << " axis=" << n.axis << " [" << n.begin << ":" << n.end << "]"; break;
    case op_kind::layernorm: case op_kind::rmsnorm: os << " eps=" << n.value; break;
    case op_kind::repeat:
      os << " \"" << n.name.view() << "\" x" << n.count << " body=region" << n.body;
      break;
    default: break;
  }
  return os.str();
}

// One line per node: "%3 = matmul f32[128,64] (%0, %1)", grouped by region, outputs marked.
inline std::string to_text(const graph_view& g) {
  std::ostringstream os;
  for (int r = 0; r < g.n_regions; ++r) {
    os << (r == 0 ? "graph" : "region " + std::to_string(r)) << " {\n";
    for (int i = 0; i < g.size; ++i) {
      const node& n = g[i];
      if (n.region != r) continue;
      os << "  %" << i << " = " << describe(n) << " " << name_of(n.type) << to_string(n.shape);
      if (n.n_in) {
        os << " (";
        for (int k = 0; k < n.n_in; ++k) os << (k ? ", %" : "%") << n.in[std::size_t(k)];
        os << ")";
      }
      for (int o = 0; o < g.n_outputs; ++o)
        if (r == 0 && g.outputs[o] == i) os << "  -> output " << o;
      if (r > 0 && g.regions[r].result == i) os << "  -> result";
      os << "\n";
    }
    os << "}\n";
  }
  return os.str();
}

// DOT string literal contents: quotes and backslashes escaped.
inline std::string dot_escape(std::string_view s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

inline std::string to_dot(const graph_view& g) {
  std::ostringstream os;
  os << "digraph fusedsl {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (int r = 0; r < g.n_regions; ++r) {
    if (r > 0) os << "  subgraph cluster_region" << r << " {\n  label=\"region " << r << "\";\n";
    for (int i = 0; i < g.size; ++i) {
      const node& n = g[i];
      if (n.region != r) continue;
      os << "  n" << i << " [label=\"%" << i << " " << dot_escape(describe(n)) << "\\n"
         << name_of(n.type) << to_string(n.shape) << "\""
         << (is_leaf(n.op) ? ", style=rounded" : "") << "];\n";
    }
    if (r > 0) os << "  }\n";
  }
  for (int i = 0; i < g.size; ++i)
    for (int k = 0; k < g[i].n_in; ++k)
      os << "  n" << g[i].in[std::size_t(k)] << " -> n" << i << ";\n";
  for (int i = 0; i < g.size; ++i)
    if (g[i].op == op_kind::repeat)
      os << "  n" << i << " -> n" << g.regions[g[i].body].placeholder << " [style=dashed, label=\"x"
         << g[i].count << "\"];\n";
  os << "}\n";
  return os.str();
}

}  // namespace fusedsl::graph
