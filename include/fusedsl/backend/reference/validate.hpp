#pragma once
// reference::validate: re-derives every node's shape and dtype from its operands with the rules of
// core/shape.hpp, so that a node table from anywhere (hand-made, corrupted) is rejected with a
// graph_error before a kernel reads memory through it. After it passes, every index the kernels
// compute is in bounds.
#include <array>
#include <string>

#include "fusedsl/graph/builder.hpp"
#include "fusedsl/graph/node.hpp"
#include "fusedsl/graph/print.hpp"

namespace fusedsl::reference {

namespace detail {

[[noreturn]] inline void bad_node(const graph::graph_view& g, int i, const std::string& why) {
  throw graph::graph_error("graph: node %" + std::to_string(i) + " (" + graph::describe(g[i]) +
                           "): " + why);
}

inline bool valid_dims(const dims& s) {
  if (s.rank < 0 || s.rank > max_rank) return false;
  std::int64_t n = 1;
  for (int a = 0; a < s.rank; ++a) {
    if (s[a] < 1 || s[a] > (std::int64_t(1) << 40) / n) return false;
    n *= s[a];
  }
  return true;
}

inline bool weak_constant(const graph::node& n) {
  return n.op == graph::op_kind::constant && n.weak;
}

// The dtype an elementwise node computes in: its operands' dtype, where a weak constant yields.
inline dtype compute_type(const graph::node& a, const graph::node& b) {
  if (a.type == b.type) return a.type;
  return weak_constant(a) ? b.type : a.type;
}

}  // namespace detail

// Throws graph::graph_error naming the first node whose shape, dtype, operands or attributes are
// inconsistent. Row composites are checked too when allowed, rejected otherwise (a table that has
// been through graph::expand has none).
inline void validate(const graph::graph_view& g, bool allow_composites = false) {
  using detail::bad_node;
  using graph::op_kind;
  if (g.size < 0 || (g.size > 0 && g.nodes == nullptr))
    throw graph::graph_error("graph: no node table");
  if (g.n_regions < 1 || g.n_regions > graph::max_regions)
    throw graph::graph_error("graph: bad region count");
  if (g.n_outputs < 0 || g.n_outputs > graph::max_outputs)
    throw graph::graph_error("graph: bad output count");
  for (int o = 0; o < g.n_outputs; ++o)
    if (g.outputs[o] < 0 || g.outputs[o] >= g.size || g[g.outputs[o]].region != 0)
      throw graph::graph_error("graph: output " + std::to_string(o) +
                               " is not a node of the main graph");
  for (int r = 1; r < g.n_regions; ++r) {
    const graph::region_info& ri = g.regions[r];
    if (ri.placeholder < 0 || ri.placeholder >= g.size ||
        g[ri.placeholder].op != op_kind::placeholder || g[ri.placeholder].region != r ||
        ri.result < 0 || ri.result >= g.size || g[ri.result].region != r)
      throw graph::graph_error("graph: region " + std::to_string(r) +
                               " has no valid placeholder and result");
    if (!(g[ri.result].shape == g[ri.placeholder].shape) ||
        g[ri.result].type != g[ri.placeholder].type)
      throw graph::graph_error("graph: region " + std::to_string(r) +
                               " returns a tensor unlike its input");
  }
  for (int i = 0; i < g.size; ++i) {
    const graph::node& n = g[i];
    if (std::size_t(n.op) >= graph::op_count ||
        std::size_t(n.type) > std::size_t(dtype::u8))
      throw graph::graph_error("graph: node %" + std::to_string(i) + " has an unknown op or dtype");
    if (!detail::valid_dims(n.shape)) bad_node(g, i, "bad shape");
    if (n.region < 0 || n.region >= g.n_regions) bad_node(g, i, "lies in no region");
    if (n.n_in < 0 || n.n_in > graph::max_operands) bad_node(g, i, "bad operand count");
    for (int k = 0; k < n.n_in; ++k) {
      const int o = n.in[std::size_t(k)];
      if (o < 0 || o >= i) bad_node(g, i, "an operand does not precede the node");
      if (g[o].region != n.region && g[o].region != 0)
        bad_node(g, i, "an operand lies in another block body");
    }
    auto operand = [&](int k) -> const graph::node& { return g[n.in[std::size_t(k)]]; };
    auto expect_operands = [&](int count) {
      if (n.n_in != count) bad_node(g, i, "expects " + std::to_string(count) + " operands");
    };
    auto expect_shape = [&](const shape_result& s) {
      if (!s.ok()) bad_node(g, i, s.error);
      if (!(s.value == n.shape)) bad_node(g, i, "its shape differs from the one its operands give");
    };
    const op_kind k = n.op;
    if (k == op_kind::input || k == op_kind::param || k == op_kind::state ||
        k == op_kind::constant) {
      expect_operands(0);
    } else if (k == op_kind::placeholder) {
      expect_operands(0);
      if (n.region == 0 || g.regions[n.region].placeholder != i)
        bad_node(g, i, "a placeholder outside a block body");
    } else if (k == op_kind::iota) {
      expect_operands(0);
      if (n.axis < 0 || n.axis >= n.shape.rank) bad_node(g, i, "axis out of range");
    } else if (graph::is_unary(k)) {
      expect_operands(1);
      if (!is_floating(n.type) || operand(0).type != n.type)
        bad_node(g, i, "needs a floating-point operand of its dtype");
      expect_shape({operand(0).shape});
    } else if (graph::is_binary(k) || graph::is_compare(k)) {
      expect_operands(2);
      const graph::node &a = operand(0), &b = operand(1);
      if (a.type != b.type && !detail::weak_constant(a) && !detail::weak_constant(b))
        bad_node(g, i, "operands have different dtypes");
      const dtype t = graph::is_compare(k) ? dtype::boolean : detail::compute_type(a, b);
      if (n.type != t) bad_node(g, i, "its dtype differs from the one its operands give");
      expect_shape(broadcast_shapes(a.shape, b.shape));
    } else if (k == op_kind::select) {
      expect_operands(3);
      const graph::node &p = operand(0), &a = operand(1), &b = operand(2);
      if (p.type != dtype::boolean) bad_node(g, i, "the predicate must be pred");
      if (a.type != b.type && !detail::weak_constant(a) && !detail::weak_constant(b))
        bad_node(g, i, "operands have different dtypes");
      if (n.type != detail::compute_type(a, b))
        bad_node(g, i, "its dtype differs from the one its operands give");
      const shape_result ab = broadcast_shapes(a.shape, b.shape);
      if (!ab.ok()) bad_node(g, i, ab.error);
      expect_shape(broadcast_shapes(p.shape, ab.value));
    } else if (k == op_kind::cast) {
      expect_operands(1);
      expect_shape({operand(0).shape});
    } else if (graph::is_reduce(k)) {
      expect_operands(1);
      if (n.type != (k == op_kind::argmax ? dtype::i32 : operand(0).type))
        bad_node(g, i, "its dtype differs from the one its operand gives");
      if (n.axis < 0 || n.axis >= operand(0).shape.rank) bad_node(g, i, "axis out of range");
      expect_shape(reduce_shape(operand(0).shape, n.axis, n.keepdims));
    } else if (k == op_kind::gather) {
      expect_operands(2);
      const dims &t = operand(0).shape, &ix = operand(1).shape;
      if (operand(1).type != dtype::i32) bad_node(g, i, "the indices must be i32");
      if (n.type != operand(0).type) bad_node(g, i, "its dtype differs from the table's");
      dims s;
      s.rank = ix.rank + t.rank - 1;
      if (t.rank < 1 || s.rank > max_rank) bad_node(g, i, "bad table or index rank");
      for (int c = 0; c < ix.rank; ++c) s[c] = ix[c];
      for (int c = 1; c < t.rank; ++c) s[ix.rank + c - 1] = t[c];
      expect_shape({s});
    } else if (k == op_kind::dynamic_slice || k == op_kind::dynamic_update_slice) {
      const bool update = k == op_kind::dynamic_update_slice;
      expect_operands(update ? 3 : 2);
      const graph::node& start = operand(update ? 2 : 1);
      if (start.type != dtype::i32 || start.shape.rank != 0)
        bad_node(g, i, "the start must be an i32 scalar");
      if (n.type != operand(0).type || (update && operand(1).type != n.type))
        bad_node(g, i, "its dtype differs from its operand's");
      const dims& x = operand(0).shape;
      if (n.axis < 0 || n.axis >= x.rank) bad_node(g, i, "axis out of range");
      const dims& part = update ? operand(1).shape : n.shape;
      if (part.rank != x.rank) bad_node(g, i, "its rank differs from its operand's");
      for (int c = 0; c < x.rank; ++c)
        if (c == n.axis ? (part[c] < 1 || part[c] > x[c]) : part[c] != x[c])
          bad_node(g, i, "the window does not fit the operand");
      if (update && !(n.shape == x)) bad_node(g, i, "its shape differs from its operand's");
    } else if (k == op_kind::matmul) {
      expect_operands(2);
      if (operand(0).type != n.type || operand(1).type != n.type)
        bad_node(g, i, "operands differ in dtype");
      expect_shape(matmul_shape(operand(0).shape, operand(1).shape, n.trans_a, n.trans_b));
    } else if (k == op_kind::transpose) {
      expect_operands(1);
      if (n.type != operand(0).type) bad_node(g, i, "its dtype differs from its operand's");
      const dims& in = operand(0).shape;
      if (in.rank != n.shape.rank) bad_node(g, i, "its rank differs from its operand's");
      bool seen[max_rank]{};
      dims s;
      s.rank = in.rank;
      for (int a = 0; a < in.rank; ++a) {
        const int p = n.perm[std::size_t(a)];
        if (p < 0 || p >= in.rank || seen[p]) bad_node(g, i, "not a permutation of the axes");
        seen[p] = true;
        s[a] = in[p];
      }
      expect_shape({s});
    } else if (k == op_kind::reshape) {
      expect_operands(1);
      if (n.type != operand(0).type) bad_node(g, i, "its dtype differs from its operand's");
      expect_shape(reshape_shape(operand(0).shape, n.shape));
    } else if (k == op_kind::broadcast) {
      expect_operands(1);
      if (n.type != operand(0).type) bad_node(g, i, "its dtype differs from its operand's");
      expect_shape(broadcast_shapes(operand(0).shape, n.shape));
    } else if (k == op_kind::slice) {
      expect_operands(1);
      if (n.type != operand(0).type) bad_node(g, i, "its dtype differs from its operand's");
      if (n.axis < 0 || n.axis >= operand(0).shape.rank) bad_node(g, i, "axis out of range");
      expect_shape(slice_shape(operand(0).shape, n.axis, n.begin, n.end));
    } else if (k == op_kind::concat) {
      if (n.n_in < 1) bad_node(g, i, "needs an operand");
      dims parts[graph::max_operands]{};
      for (int o = 0; o < n.n_in; ++o) {
        parts[o] = operand(o).shape;
        if (operand(o).type != n.type) bad_node(g, i, "operands differ in dtype");
      }
      if (n.axis < 0 || n.axis >= parts[0].rank) bad_node(g, i, "axis out of range");
      expect_shape(concat_shape(parts, n.n_in, n.axis));
    } else if (k == op_kind::repeat) {
      expect_operands(1);
      if (n.body <= 0 || n.body >= g.n_regions || n.body == n.region)
        bad_node(g, i, "its body is not a block region");
      if (n.count < 1) bad_node(g, i, "the number of iterations must be positive");
      const graph::node& ph = g[g.regions[n.body].placeholder];
      if (!(ph.shape == operand(0).shape) || ph.type != operand(0).type || !(n.shape == ph.shape) ||
          n.type != ph.type)
        bad_node(g, i, "its input and result differ from the body's");
      if (g.regions[n.body].placeholder > i) bad_node(g, i, "its body does not precede it");
      for (int j = i + 1; j < g.size; ++j)
        if (g[j].region == n.body) bad_node(g, i, "its body does not precede it");
    } else if (!allow_composites) {
      bad_node(g, i, "a row composite; run graph::expand first");
    } else if (k == op_kind::softmax || k == op_kind::log_softmax) {
      expect_operands(1);
      if (!is_floating(n.type) || operand(0).type != n.type)
        bad_node(g, i, "needs a floating-point operand of its dtype");
      if (n.axis < 0 || n.axis >= n.shape.rank) bad_node(g, i, "axis out of range");
      expect_shape({operand(0).shape});
    } else {  // layernorm (x, gamma, beta), rmsnorm (x, gamma)
      expect_operands(k == op_kind::layernorm ? 3 : 2);
      if (!is_floating(n.type) || operand(0).type != n.type)
        bad_node(g, i, "needs a floating-point operand of its dtype");
      if (n.shape.rank < 1) bad_node(g, i, "needs an operand of rank 1 or more");
      for (int o = 1; o < n.n_in; ++o)
        if (!(operand(o).shape == make_dims(n.shape.back())) || operand(o).type != n.type)
          bad_node(g, i, "gamma and beta must be vectors of the last axis, of the operand's dtype");
      expect_shape({operand(0).shape});
    }
  }
}

}  // namespace fusedsl::reference
