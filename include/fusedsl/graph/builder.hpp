#pragma once
// graph::builder appends nodes to a growing table, in constexpr code and at run time alike.
// It merges structurally identical nodes (hash-consing), infers shapes and dtypes with the
// rules of core/shape.hpp, and rejects ill-formed nodes. Composites (attention, blocks, ...) are
// written as ordinary functions over a builder, so their expansion costs no template instances.
#include <span>
#include <string_view>
#include <vector>

#include "fusedsl/core/error.hpp"
#include "fusedsl/graph/node.hpp"

namespace fusedsl::graph {

struct graph_error : fusedsl::error {
  using fusedsl::error::error;
};

// Reaching this in constant evaluation is a compile error that points at the message.
[[noreturn]] inline void fail(const char* what) { throw graph_error(what); }

class builder {
 public:
  std::vector<node> nodes;
  std::vector<int> outputs;
  std::vector<int> output_state;  // per output: -1, or the state node it is the new value of
  std::vector<region_info> regions{region_info{}};
  int region = 0;  // the region new nodes go to

  constexpr const node& operator[](int i) const { return nodes[std::size_t(i)]; }
  constexpr int size() const { return int(nodes.size()); }

  // Append n, or return the id of an identical node already in its region.
  constexpr int add(node n) {
    n.region = region;
    for (int i = 0; i < size(); ++i)
      if (nodes[std::size_t(i)].same_as(n)) return i;
    nodes.push_back(n);
    return size() - 1;
  }

  // ---- leaves ----
  constexpr int leaf(op_kind k, std::string_view name, dtype t, dims s) {
    if (k == op_kind::input || k == op_kind::param) {
      for (const node& o : nodes)
        if (o.op == k && o.region == region && o.name.view() == name &&
            (o.type != t || !(o.shape == s)))
          fail("graph: one name is declared with two different shapes or dtypes");
      for (const node& o : nodes)
        if (o.op != k && (o.op == op_kind::input || o.op == op_kind::param) && o.region == region &&
            o.name.view() == name)
          fail("graph: one name is used both as an input and as a param");
    }
    node n;
    n.op = k;
    n.type = t;
    n.shape = s;
    n.name.assign(name);
    return add(n);
  }
  constexpr int input(std::string_view name, dtype t, dims s) {
    return leaf(op_kind::input, name, t, s);
  }
  // A tensor the executor keeps across calls (a KV cache): read like an input, given a new value by
  // an output marked with mark_output(value, state).
  constexpr int state(std::string_view name, dtype t, dims s) {
    if (region != 0) fail("graph: a state inside a block body");
    for (const node& o : nodes)
      if (o.name.view() == name && (o.op == op_kind::input || o.op == op_kind::param))
        fail("graph: one name is used both as a state and as an input or param");
    return leaf(op_kind::state, name, t, s);
  }
  constexpr int param(std::string_view name, dtype t, dims s) {
    return leaf(op_kind::param, name, t, s);
  }
  // A scalar constant; weak: it takes the dtype of the tensor it is combined with.
  constexpr int constant(double v, dtype t = dtype::f32, bool weak = true) {
    node n;
    n.op = op_kind::constant;
    n.type = t;
    n.value = v;
    n.weak = weak;
    return add(n);
  }
  constexpr int iota(dtype t, dims s, int axis) {
    if (!axis_in_range(axis, s.rank)) fail("iota: axis out of range");
    node n;
    n.op = op_kind::iota;
    n.type = t;
    n.shape = s;
    n.axis = normalize_axis(axis, s.rank);
    return add(n);
  }

  // ---- elementwise ----
  constexpr int unary(op_kind k, int x) {
    if (!is_unary(k)) fail("graph: not a unary op");
    if (!is_floating(at(x).type)) fail("unary op: operand must be a floating-point tensor");
    node n;
    n.op = k;
    n.type = at(x).type;
    n.shape = at(x).shape;
    n.n_in = 1;
    n.in[0] = x;
    return add(n);
  }
  constexpr int binary(op_kind k, int a, int b) {
    if (!is_binary(k) && !is_compare(k)) fail("graph: not a binary op");
    const node &x = at(a), &y = at(b);
    const shape_result s = broadcast_shapes(x.shape, y.shape);
    if (!s.ok()) fail("binary op: operands cannot be broadcast together");
    node n;
    n.op = k;
    n.type = common_type(x, y);
    n.shape = s.value;
    n.n_in = 2;
    n.in[0] = a;
    n.in[1] = b;
    if (is_compare(k)) n.type = dtype::boolean;
    return add(n);
  }
  constexpr int select(int pred, int a, int b) {
    if (at(pred).type != dtype::boolean) fail("select: the predicate must be a boolean tensor");
    const shape_result s1 = broadcast_shapes(at(a).shape, at(b).shape);
    if (!s1.ok()) fail("select: operands cannot be broadcast together");
    const shape_result s = broadcast_shapes(at(pred).shape, s1.value);
    if (!s.ok()) fail("select: predicate cannot be broadcast with the operands");
    node n;
    n.op = op_kind::select;
    n.type = common_type(at(a), at(b));
    n.shape = s.value;
    n.n_in = 3;
    n.in[0] = pred;
    n.in[1] = a;
    n.in[2] = b;
    return add(n);
  }
  constexpr int cast(int x, dtype t) {
    if (at(x).type == t) return x;
    node n;
    n.op = op_kind::cast;
    n.type = t;
    n.shape = at(x).shape;
    n.n_in = 1;
    n.in[0] = x;
    return add(n);
  }

  // ---- reductions and structure ----
  constexpr int reduce(op_kind k, int x, int axis, bool keepdims) {
    if (!is_reduce(k)) fail("graph: not a reduction");
    const shape_result s = reduce_shape(at(x).shape, axis, keepdims);
    if (!s.ok()) fail("reduce: axis out of range");
    node n;
    n.op = k;
    n.type = k == op_kind::argmax ? dtype::i32 : at(x).type;
    n.shape = s.value;
    n.axis = normalize_axis(axis, at(x).shape.rank);
    n.keepdims = keepdims;
    n.n_in = 1;
    n.in[0] = x;
    return add(n);
  }
  constexpr int matmul(int a, int b, bool ta = false, bool tb = false) {
    // Canonical form: a transpose of an operand's last two axes is folded into how it is read.
    if (swaps_last_two(a)) { ta = !ta; a = at(a).in[0]; }
    if (swaps_last_two(b)) { tb = !tb; b = at(b).in[0]; }
    const shape_result s = matmul_shape(at(a).shape, at(b).shape, ta, tb);
    if (!s.ok()) fail("matmul: operand shapes do not agree");
    node n;
    n.op = op_kind::matmul;
    n.type = common_type(at(a), at(b));
    n.shape = s.value;
    n.trans_a = ta;
    n.trans_b = tb;
    n.n_in = 2;
    n.in[0] = a;
    n.in[1] = b;
    return add(n);
  }
  template <std::size_t R>
  constexpr int transpose(int x, const std::array<int, R>& perm) {
    const shape_result s = permute_shape(at(x).shape, perm);
    if (!s.ok()) fail("transpose: not a permutation of the axes");
    bool identity = true;
    for (std::size_t i = 0; i < R; ++i) identity = identity && perm[i] == int(i);
    if (identity) return x;
    node n;
    n.op = op_kind::transpose;
    n.type = at(x).type;
    n.shape = s.value;
    for (std::size_t i = 0; i < R; ++i) n.perm[i] = perm[i];
    n.n_in = 1;
    n.in[0] = x;
    return add(n);
  }
  constexpr int reshape(int x, dims to) {
    const shape_result s = reshape_shape(at(x).shape, to);
    if (!s.ok()) fail("reshape: the number of elements changes");
    if (at(x).shape == to) return x;
    node n;
    n.op = op_kind::reshape;
    n.type = at(x).type;
    n.shape = to;
    n.n_in = 1;
    n.in[0] = x;
    return add(n);
  }
  constexpr int broadcast(int x, dims to) {
    const shape_result s = broadcast_shapes(at(x).shape, to);
    if (!s.ok() || !(s.value == to)) fail("broadcast: operand cannot be broadcast to the shape");
    if (at(x).shape == to) return x;
    node n;
    n.op = op_kind::broadcast;
    n.type = at(x).type;
    n.shape = to;
    n.n_in = 1;
    n.in[0] = x;
    return add(n);
  }
  constexpr int slice(int x, int axis, std::int64_t begin, std::int64_t end) {
    const shape_result s = slice_shape(at(x).shape, axis, begin, end);
    if (!s.ok()) fail("slice: range is empty or out of bounds");
    node n;
    n.op = op_kind::slice;
    n.type = at(x).type;
    n.shape = s.value;
    n.axis = normalize_axis(axis, at(x).shape.rank);
    n.begin = begin;
    n.end = end;
    n.n_in = 1;
    n.in[0] = x;
    return add(n);
  }
  constexpr int concat(std::span<const int> xs, int axis) {
    if (xs.empty() || xs.size() > std::size_t(max_operands)) fail("concat: takes 1 to 8 operands");
    dims parts[max_operands]{};
    for (std::size_t i = 0; i < xs.size(); ++i) {
      parts[i] = at(xs[i]).shape;
      if (at(xs[i]).type != at(xs[0]).type) fail("concat: operands differ in dtype");
    }
    const shape_result s = concat_shape(parts, int(xs.size()), axis);
    if (!s.ok()) fail("concat: operand shapes do not agree");
    node n;
    n.op = op_kind::concat;
    n.type = at(xs[0]).type;
    n.shape = s.value;
    n.axis = normalize_axis(axis, parts[0].rank);
    n.n_in = int(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) n.in[i] = xs[i];
    return add(n);
  }

  // ---- data movement at run-time positions ----
  // table[ids]: rows of `table` (axis 0) picked by the i32 `ids`; result ids.shape ++
  // table.shape[1:]. An id outside [0, rows) reads the nearest row (XLA's gather clamps its
  // indices).
  constexpr int gather(int table, int ids) {
    const dims t = at(table).shape, i = at(ids).shape;
    if (t.rank < 1) fail("gather: the table must have rank 1 or more");
    if (at(ids).type != dtype::i32) fail("gather: the indices must be i32");
    if (i.rank + t.rank - 1 > max_rank) fail("gather: the result has more than 6 axes");
    node n;
    n.op = op_kind::gather;
    n.type = at(table).type;
    n.shape.rank = i.rank + t.rank - 1;
    for (int c = 0; c < i.rank; ++c) n.shape[c] = i[c];
    for (int c = 1; c < t.rank; ++c) n.shape[i.rank + c - 1] = t[c];
    n.n_in = 2;
    n.in[0] = table;
    n.in[1] = ids;
    return add(n);
  }
  // x[start : start + size] along axis, start an i32 scalar clamped to [0, dim - size] (XLA's
  // dynamic-slice).
  constexpr int dynamic_slice(int x, int start, int axis, std::int64_t size) {
    const dims xs = at(x).shape;
    if (!axis_in_range(axis, xs.rank)) fail("dynamic_slice: axis out of range");
    const int a = normalize_axis(axis, xs.rank);
    if (size < 1 || size > xs[a])
      fail("dynamic_slice: the size must be between 1 and the axis' length");
    if (at(start).type != dtype::i32 || at(start).shape.rank != 0)
      fail("dynamic_slice: the start must be an i32 scalar");
    node n;
    n.op = op_kind::dynamic_slice;
    n.type = at(x).type;
    n.shape = xs;
    n.shape[a] = size;
    n.axis = a;
    n.n_in = 2;
    n.in[0] = x;
    n.in[1] = start;
    return add(n);
  }
  // x with x[start : start + len] along axis replaced by `update` (len its extent there), start an
  // i32 scalar clamped to [0, dim - len] (XLA's dynamic-update-slice).
  constexpr int dynamic_update_slice(int x, int update, int start, int axis) {
    const dims xs = at(x).shape, us = at(update).shape;
    if (!axis_in_range(axis, xs.rank)) fail("dynamic_update_slice: axis out of range");
    const int a = normalize_axis(axis, xs.rank);
    if (us.rank != xs.rank || us[a] > xs[a])
      fail("dynamic_update_slice: the update does not fit the operand");
    for (int c = 0; c < xs.rank; ++c)
      if (c != a && us[c] != xs[c])
        fail("dynamic_update_slice: the update differs from the operand off its axis");
    if (at(update).type != at(x).type)
      fail("dynamic_update_slice: the update's dtype differs from the operand's");
    if (at(start).type != dtype::i32 || at(start).shape.rank != 0)
      fail("dynamic_update_slice: the start must be an i32 scalar");
    node n;
    n.op = op_kind::dynamic_update_slice;
    n.type = at(x).type;
    n.shape = xs;
    n.axis = a;
    n.n_in = 3;
    n.in[0] = x;
    n.in[1] = update;
    n.in[2] = start;
    return add(n);
  }

  // ---- row composites ----
  constexpr int softmax(int x, int axis, bool log = false) {
    if (!axis_in_range(axis, at(x).shape.rank)) fail("softmax: axis out of range");
    if (!is_floating(at(x).type)) fail("softmax: operand must be a floating-point tensor");
    node n;
    n.op = log ? op_kind::log_softmax : op_kind::softmax;
    n.type = at(x).type;
    n.shape = at(x).shape;
    n.axis = normalize_axis(axis, at(x).shape.rank);
    n.n_in = 1;
    n.in[0] = x;
    return add(n);
  }
  // layernorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta.
  // rmsnorm: x / rms * gamma.
  constexpr int norm(op_kind k, int x, int gamma, int beta, double eps) {
    const node& xn = at(x);
    const dims row = make_dims(xn.shape.back());
    if (!(at(gamma).shape == row) || (beta >= 0 && !(at(beta).shape == row)))
      fail("layernorm: gamma and beta must have the shape of the last axis");
    node n;
    n.op = k;
    n.type = xn.type;
    n.shape = xn.shape;
    n.axis = xn.shape.rank - 1;
    n.value = eps;
    n.n_in = beta >= 0 ? 3 : 2;
    n.in[0] = x;
    n.in[1] = gamma;
    if (beta >= 0) n.in[2] = beta;
    return add(n);
  }

  // ---- regions ----
  // Start a block body: nodes go to a new region whose input is a placeholder of the given shape.
  constexpr int begin_region(dtype t, dims s) {
    if (int(regions.size()) >= max_regions)
      fail("graph: too many distinct repeated blocks (max 7)");
    regions.push_back(region_info{});
    region = int(regions.size()) - 1;
    node n;
    n.op = op_kind::placeholder;
    n.type = t;
    n.shape = s;
    const int id = add(n);
    regions.back().placeholder = id;
    return id;
  }
  constexpr int end_region(int result) {
    const int r = region;
    if (!(at(result).shape == at(regions[std::size_t(r)].placeholder).shape) ||
        at(result).type != at(regions[std::size_t(r)].placeholder).type)
      fail("stack: a repeated block must return a tensor of its input's shape and dtype");
    regions[std::size_t(r)].result = result;
    region = 0;
    return r;
  }
  constexpr int repeat(int x, int body, int count, std::string_view prefix) {
    if (count < 1) fail("stack: the number of layers must be positive");
    node n;
    n.op = op_kind::repeat;
    n.type = at(x).type;
    n.shape = at(x).shape;
    n.body = body;
    n.count = count;
    n.name.assign(prefix);
    n.n_in = 1;
    n.in[0] = x;
    return add(n);
  }

  // Outputs keep their positions: the same node returned twice is two outputs.
  // state: -1, or the state node whose new value id is (written into the state's memory).
  constexpr void mark_output(int id, int state = -1) {
    if (int(outputs.size()) >= max_outputs) fail("graph: too many outputs (max 8)");
    if (state >= 0) {
      if (at(state).op != op_kind::state) fail("update: the target is not a state");
      if (!(at(state).shape == at(id).shape) || at(state).type != at(id).type)
        fail("update: the new value differs from the state in shape or dtype");
      for (int s : output_state)
        if (s == state) fail("update: a state is given two new values");
    }
    outputs.push_back(id);
    output_state.push_back(state);
  }

  template <std::size_t N>
  constexpr graph<N> freeze() const {
    if (nodes.size() > N) fail("graph: the table has more nodes than its capacity");
    graph<N> g;  // a larger capacity leaves unused constant slots at the end
    for (std::size_t i = 0; i < nodes.size(); ++i) g.nodes[i] = nodes[i];
    g.n_outputs = int(outputs.size());
    for (std::size_t i = 0; i < outputs.size(); ++i) g.outputs[i] = outputs[i];
    for (std::size_t i = 0; i < output_state.size(); ++i) g.output_state[i] = output_state[i];
    g.n_regions = int(regions.size());
    for (std::size_t i = 0; i < regions.size(); ++i) g.regions[i] = regions[i];
    return g;
  }

  constexpr bool swaps_last_two(int id) const {
    const node& n = at(id);
    if (n.op != op_kind::transpose || n.shape.rank < 2) return false;
    for (int i = 0; i < n.shape.rank - 2; ++i)
      if (n.perm[std::size_t(i)] != i) return false;
    return n.perm[std::size_t(n.shape.rank - 2)] == n.shape.rank - 1 &&
           n.perm[std::size_t(n.shape.rank - 1)] == n.shape.rank - 2;
  }

  constexpr const node& at(int id) const {
    if (id < 0 || id >= size()) fail("graph: operand id out of range");
    return nodes[std::size_t(id)];
  }

 private:
  static constexpr dtype common_type(const node& x, const node& y) {
    if (x.type == y.type) return x.type;
    if (x.op == op_kind::constant && x.weak) return y.type;
    if (y.op == op_kind::constant && y.weak) return x.type;
    fail("graph: operands have different dtypes; cast one of them");
  }
};

// The ids b's table is read through from outside its nodes: the outputs, the states they give new
// values, the regions' results and placeholders; f(id) for each (a rewrite's roots).
template <class F>
constexpr void for_each_root(const builder& b, F f) {
  for (int o : b.outputs) f(o);
  for (int st : b.output_state)
    if (st >= 0) f(st);
  for (const region_info& r : b.regions) {
    if (r.result >= 0) f(r.result);
    if (r.placeholder >= 0) f(r.placeholder);
  }
}
// Each of those ids replaced by f(id) (after a rewrite renumbered the nodes).
template <class F>
constexpr void remap_roots(builder& b, F f) {
  for (int& o : b.outputs) o = f(o);
  for (int& st : b.output_state)
    if (st >= 0) st = f(st);
  for (region_info& r : b.regions) {
    if (r.result >= 0) r.result = f(r.result);
    if (r.placeholder >= 0) r.placeholder = f(r.placeholder);
  }
}

}  // namespace fusedsl::graph
