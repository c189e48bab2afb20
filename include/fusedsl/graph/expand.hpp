#pragma once
// graph::expand rewrites the row composites (softmax, log_softmax, layernorm, rmsnorm) of a node
// table as primitives, so that a consumer that only knows primitives (the reference backend, the
// HLO exporter) computes exactly what the composite means. Everything else is copied as it is;
// block bodies stay regions of the table, with their composites expanded too.
//
// The decompositions (fusedsl's definitions of the composites; all reductions keep their axis):
//   softmax(x, axis):      m  = reduce_max(x, axis)
//                          m' = where(m == -inf, 0, m)       a row that is entirely -inf ...
//                          e  = exp(x - m')
//                          s  = reduce_sum(e, axis)
//                          s' = where(s == 0, 1, s)          ... gives all zeros, not NaN
//                          y  = e / s'
//   log_softmax(x, axis):  y  = (x - m') - log(s')           an all -inf row gives -inf
//   layernorm(x, g, b):    mu = reduce_mean(x, last); xc = x - mu; var = reduce_mean(xc * xc, last)
//                          y  = xc * rsqrt(var + eps) * g + b
//   rmsnorm(x, g):         y  = x * rsqrt(reduce_mean(x * x, last) + eps) * g
// NaN anywhere in a row makes the whole softmax/log_softmax row NaN (reduce_max propagates NaN); a
// row holding +inf gives NaN (inf - inf). eps and the other scalars are weak constants: they take
// the dtype of the tensor they meet.
//
//   expand(graph_view) -> builder    at run time or inside a constant expression
//   expand<G>()        -> graph<N>   the constexpr node table of a constexpr graph G
#include <limits>
#include <vector>

#include "fusedsl/graph/builder.hpp"
#include "fusedsl/graph/prune.hpp"
#include "fusedsl/graph/node.hpp"

namespace fusedsl::graph {

// Every builder call below is its own statement: the order of evaluation of function arguments is
// unspecified (GCC orders them differently in constant evaluation and at run time), and the node
// table must be the same in both.

// Stable softmax (or log_softmax) of x along axis, written with primitives; returns the result id.
constexpr int emit_softmax_primitives(builder& b, int x, int axis, bool log) {
  const int m = b.reduce(op_kind::reduce_max, x, axis, true);
  const int ninf = b.constant(-std::numeric_limits<double>::infinity());
  const int m_is_ninf = b.binary(op_kind::eq, m, ninf);
  const int zero = b.constant(0.0);
  const int m_safe = b.select(m_is_ninf, zero, m);
  const int shifted = b.binary(op_kind::sub, x, m_safe);
  const int e = b.unary(op_kind::exp, shifted);
  const int s = b.reduce(op_kind::reduce_sum, e, axis, true);
  const int s_is_zero = b.binary(op_kind::eq, s, zero);
  const int one = b.constant(1.0);
  const int s_safe = b.select(s_is_zero, one, s);
  if (log) {
    const int log_s = b.unary(op_kind::log, s_safe);
    return b.binary(op_kind::sub, shifted, log_s);
  }
  return b.binary(op_kind::div, e, s_safe);
}

// layernorm (with beta; beta < 0: none) or rmsnorm over the last axis, written with primitives.
constexpr int emit_norm_primitives(builder& b, op_kind k, int x, int gamma, int beta, double eps) {
  const int last = b.at(x).shape.rank - 1;
  if (k == op_kind::rmsnorm) {
    const int sq = b.binary(op_kind::mul, x, x);
    const int ms = b.reduce(op_kind::reduce_mean, sq, last, true);
    const int eps_c = b.constant(eps);
    const int ms_eps = b.binary(op_kind::add, ms, eps_c);
    const int r = b.unary(op_kind::rsqrt, ms_eps);
    const int xr = b.binary(op_kind::mul, x, r);
    return b.binary(op_kind::mul, xr, gamma);
  }
  const int mu = b.reduce(op_kind::reduce_mean, x, last, true);
  const int xc = b.binary(op_kind::sub, x, mu);
  const int sq = b.binary(op_kind::mul, xc, xc);
  const int var = b.reduce(op_kind::reduce_mean, sq, last, true);
  const int eps_c = b.constant(eps);
  const int var_eps = b.binary(op_kind::add, var, eps_c);
  const int r = b.unary(op_kind::rsqrt, var_eps);
  const int xr = b.binary(op_kind::mul, xc, r);
  const int y = b.binary(op_kind::mul, xr, gamma);
  return beta >= 0 ? b.binary(op_kind::add, y, beta) : y;
}

// The graph g with every row composite replaced by its primitives; merged, pruned, in topological
// order. Regions keep their numbers; outputs keep their order.
constexpr builder expand(const graph_view& g) {
  if (g.n_regions < 1 || g.n_regions > max_regions || g.n_outputs < 0 ||
      g.n_outputs > max_outputs || g.size < 0)
    fail("expand: a malformed graph (region, output or node count)");
  builder b;
  b.regions.assign(g.regions, g.regions + g.n_regions);
  std::vector<int> id(std::size_t(g.size), -1);
  for (int i = 0; i < g.size; ++i) {
    node n = g[i];
    if (n.n_in < 0 || n.n_in > max_operands) fail("expand: a node has a bad operand count");
    for (int k = 0; k < n.n_in; ++k) {
      const int o = n.in[std::size_t(k)];
      if (o < 0 || o >= i) fail("expand: an operand does not precede its node");
      n.in[std::size_t(k)] = id[std::size_t(o)];
    }
    if (n.region < 0 || n.region >= g.n_regions) fail("expand: a node lies in no region");
    if (n.op == op_kind::layernorm && n.n_in != 3)
      fail("expand: layernorm needs x, gamma and beta");
    if (n.op == op_kind::rmsnorm && n.n_in != 2) fail("expand: rmsnorm needs x and gamma");
    if ((n.op == op_kind::softmax || n.op == op_kind::log_softmax) && n.n_in != 1)
      fail("expand: softmax takes one operand");
    b.region = n.region;
    switch (n.op) {
      case op_kind::softmax:
      case op_kind::log_softmax:
        id[std::size_t(i)] =
            emit_softmax_primitives(b, n.in[0], n.axis, n.op == op_kind::log_softmax);
        break;
      case op_kind::layernorm:
      case op_kind::rmsnorm:
        id[std::size_t(i)] =
            emit_norm_primitives(b, n.op, n.in[0], n.in[1], n.n_in > 2 ? n.in[2] : -1, n.value);
        break;
      default:
        id[std::size_t(i)] = b.add(n);
        break;
    }
  }
  b.region = 0;
  auto remap = [&](int old) {
    if (old < 0 || old >= g.size) fail("expand: a region or output names no node");
    return id[std::size_t(old)];
  };
  for (std::size_t r = 1; r < b.regions.size(); ++r) {
    b.regions[r].placeholder = remap(b.regions[r].placeholder);
    b.regions[r].result = remap(b.regions[r].result);
  }
  // output_state has an entry per output in every view (graph_view(graph<N>), view(builder)); it
  // is read directly, since GCC 12 cannot constant-evaluate state_of_output's null test under
  // -fsanitize=undefined.
  for (int o = 0; o < g.n_outputs; ++o) {
    const int st = g.output_state[o];
    b.mark_output(remap(g.outputs[o]), st >= 0 ? remap(st) : -1);
  }
  prune(b);
  return b;
}

// A view of a builder's current table (valid while the builder lives and is not changed).
constexpr graph_view view_of(const builder& b) {
  graph_view v;
  v.nodes = b.nodes.data();
  v.size = b.size();
  v.outputs = b.outputs.data();
  v.n_outputs = int(b.outputs.size());
  v.output_state = b.output_state.data();
  v.regions = b.regions.data();
  v.n_regions = int(b.regions.size());
  return v;
}

template <const auto& G>
struct expanded {
  static constexpr std::size_t size = expand(graph_view(G)).nodes.size();
  static constexpr graph<size> value = expand(graph_view(G)).template freeze<size>();
};

// The expanded node table of a constexpr graph: `constexpr auto& e = graph::expand<g>();`.
template <const auto& G>
constexpr const auto& expand() {
  return expanded<G>::value;
}

}  // namespace fusedsl::graph
