#pragma once
// The names a program reads at run time, in the order it first reads them: what every consumer of
// a graph binds by (the reference backend's bindings, the HLO export's entry parameters).
//
// A graph's inputs and params are bound by name. Inside the body of a repeated block (nn::stack),
// iteration i of a repeat node with prefix p reads param "q" as "p.i.q" (e.g. "layers.0.attn.q.w");
// inputs and states inside a body are shared by all iterations and keep their own name.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusedsl/core/dtype.hpp"
#include "fusedsl/core/shape.hpp"
#include "fusedsl/graph/builder.hpp"
#include "fusedsl/graph/node.hpp"

namespace fusedsl::graph {

// One tensor the program needs: its full run-time name, dtype and shape.
struct binding_spec {
  std::string name;
  dtype type = dtype::f32;
  dims shape{};
  op_kind kind = op_kind::input;  // input, param or state

  friend bool operator==(const binding_spec&, const binding_spec&) = default;
};

// "f32[128,64]"
inline std::string describe(dtype t, const dims& s) {
  return std::string(name_of(t)) + to_string(s);
}

// The name iteration `layer` of a repeat with `prefix` gives to the body's param `name`:
// "p.i.name".
inline std::string layer_name(std::string_view prefix, int layer, std::string_view name) {
  std::string r(prefix);
  if (!r.empty()) r += '.';
  r += std::to_string(layer);
  r += '.';
  r += name;
  return r;
}

namespace detail {

inline void add_binding(std::vector<binding_spec>& out, binding_spec s) {
  for (const binding_spec& o : out) {
    if (o.name != s.name) continue;
    if (o.type != s.type || !(o.shape == s.shape))
      throw graph_error("graph: \"" + s.name + "\" is read both as " + describe(o.type, o.shape) +
                        " and as " + describe(s.type, s.shape));
    return;
  }
  out.push_back(std::move(s));
}

// The leaves of `region`, params named with `param_prefix` ("" or "layers.3."); the bodies of
// repeat nodes recursively.
inline void collect_bindings(const graph_view& g, int region, const std::string& param_prefix,
                             int depth, std::vector<binding_spec>& out) {
  if (depth > max_regions) throw graph_error("graph: repeated blocks nest in a cycle");
  for (int i = 0; i < g.size; ++i) {
    const node& n = g[i];
    if (n.region != region) continue;
    if (n.op == op_kind::input || n.op == op_kind::state)  // a state: its current value
      add_binding(out, {std::string(n.name.view()), n.type, n.shape, n.op});
    else if (n.op == op_kind::param)
      add_binding(out, {param_prefix + std::string(n.name.view()), n.type, n.shape, n.op});
    else if (n.op == op_kind::repeat) {
      if (n.body <= 0 || n.body >= g.n_regions || n.body == region)
        throw graph_error("graph: a repeat node names a body region that does not exist");
      for (int l = 0; l < n.count; ++l)
        collect_bindings(g, n.body, layer_name(param_prefix + std::string(n.name.view()), l, ""),
                         depth + 1, out);
    }
  }
}

}  // namespace detail

// Every binding the program needs, in the order the graph first reads them (layer by layer for a
// stack). Throws graph_error when one name is read with two dtypes or shapes.
inline std::vector<binding_spec> required_bindings(const graph_view& g) {
  std::vector<binding_spec> out;
  detail::collect_bindings(g, 0, "", 0, out);
  return out;
}

}  // namespace fusedsl::graph
