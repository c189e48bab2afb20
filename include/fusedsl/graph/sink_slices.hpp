#pragma once
// graph::sink_slices: a slice moves toward the leaves, through the op that computes its operand,
// when the slice is that operand's only reader, so that rows and columns nobody reads are never
// computed:
//   slice(layernorm(y))          -> layernorm(slice(y))          the slice off the normalised axis
//   slice(matmul(a, b)) on rows  -> matmul(slice(a), b)          on columns: matmul(a, slice(b))
//   slice(x + y)                 -> slice(x) + slice(y)          a broadcast operand is not sliced
// and on through unary ops, casts, selects, reductions and softmaxes over other axes, transposes,
// broadcasts, reshapes that keep the sliced axis whole, slices, concats, gathers and dynamic slices
// on other axes. It stops at a node that something else reads as well (computing that node twice
// would cost more than the rows it saves), at leaves and block boundaries, and at the ops it does
// not know; there the slice stays a slice (a view of its consumer, docs/fusion.md). Every rewrite
// computes exactly the values the slice read: the same ops on the same elements.
#include <cstdint>
#include <vector>

#include "fusedsl/graph/builder.hpp"
#include "fusedsl/graph/prune.hpp"

namespace fusedsl::graph {
namespace detail {

struct slice_sinker {
  const std::vector<node>& old;  // the table before
  std::vector<int> readers;      // per old node: nodes, outputs and block ends that read it
  std::vector<int> id;           // per old node: its node in the new table
  builder& b;                    // the new table
  bool sank = false;             // a slice moved into the op computing its operand

  // Old node x sliced to [lo, hi) along axis, as a node of the new table.
  constexpr int slice_of(int x, int axis, std::int64_t lo, std::int64_t hi) {
    const node& p = old[std::size_t(x)];
    if (lo == 0 && hi == p.shape[axis]) return id[std::size_t(x)];
    if (readers[std::size_t(x)] == 1 && p.region == b.region) {
      const int r = sunk(x, axis, lo, hi);
      if (r >= 0) {
        sank = true;
        return r;
      }
    }
    return b.slice(id[std::size_t(x)], axis, lo, hi);
  }

  // Old node x computed on [lo, hi) of axis only, or -1 where the slice cannot pass it.
  constexpr int sunk(int x, int a, std::int64_t lo, std::int64_t hi) {
    node n = old[std::size_t(x)];
    const int rank = n.shape.rank;
    // The axis of operand k that lines up with the result's axis a (NumPy broadcasting, also the
    // batch axes of a matmul), or -1 where the operand is broadcast along it.
    const auto aligned = [&](int k) {
      const node& o = old[std::size_t(n.in[std::size_t(k)])];
      const int oa = a - (rank - o.shape.rank);
      return oa < 0 || o.shape[oa] == 1 ? -1 : oa;
    };
    // Operand k sliced along its axis ka (-1: read whole).
    const auto take = [&](int k, int ka, std::int64_t l, std::int64_t h) {
      const int o = n.in[std::size_t(k)];
      n.in[std::size_t(k)] = ka < 0 ? id[std::size_t(o)] : slice_of(o, ka, l, h);
    };
    const auto keep = [&](int k) { take(k, -1, 0, 0); };
    const op_kind k = n.op;
    if (is_elementwise(k)) {
      for (int i = 0; i < n.n_in; ++i) take(i, aligned(i), lo, hi);
    } else if (k == op_kind::softmax || k == op_kind::log_softmax) {
      if (n.axis == a) return -1;
      take(0, a, lo, hi);
    } else if (k == op_kind::layernorm || k == op_kind::rmsnorm) {
      if (a == rank - 1) return -1;
      take(0, a, lo, hi);
      for (int i = 1; i < n.n_in; ++i) keep(i);
    } else if (is_reduce(k)) {
      if (n.keepdims && a == n.axis) return -1;
      take(0, n.keepdims || a < n.axis ? a : a + 1, lo, hi);
    } else if (k == op_kind::matmul) {
      const int ra = old[std::size_t(n.in[0])].shape.rank;
      const int rb = old[std::size_t(n.in[1])].shape.rank;
      if (a == rank - 2) {
        take(0, n.trans_a ? ra - 1 : ra - 2, lo, hi);
        keep(1);
      } else if (a == rank - 1) {
        keep(0);
        take(1, n.trans_b ? rb - 2 : rb - 1, lo, hi);
      } else {
        take(0, aligned(0), lo, hi);
        take(1, aligned(1), lo, hi);
      }
    } else if (k == op_kind::transpose) {
      take(0, n.perm[std::size_t(a)], lo, hi);
    } else if (k == op_kind::broadcast) {
      take(0, aligned(0), lo, hi);
    } else if (k == op_kind::reshape) {
      const int ia = reshape_axis(old[std::size_t(n.in[0])].shape, n.shape, a);
      if (ia < 0) return -1;
      take(0, ia, lo, hi);
    } else if (k == op_kind::slice) {
      if (n.axis == a) return slice_of(n.in[0], a, n.begin + lo, n.begin + hi);
      take(0, a, lo, hi);
    } else if (k == op_kind::concat) {
      if (n.axis == a) return concat_part(n, a, lo, hi);
      for (int i = 0; i < n.n_in; ++i) take(i, a, lo, hi);
    } else if (k == op_kind::gather) {
      const int ids_rank = old[std::size_t(n.in[1])].shape.rank;
      if (a < ids_rank) {
        keep(0);
        take(1, a, lo, hi);
      } else {
        take(0, a - ids_rank + 1, lo, hi);
        keep(1);
      }
    } else if (k == op_kind::dynamic_slice) {
      if (n.axis == a) return -1;
      take(0, a, lo, hi);
      keep(1);
    } else {
      return -1;
    }
    n.shape[a] = hi - lo;
    if (k == op_kind::broadcast && b[n.in[0]].shape == n.shape) return n.in[0];
    return b.add(n);
  }

  // The operand axis of a reshape from `from` to `to` that is the result's axis a, whole: the
  // elements before it and after it are the same in number (so slicing it commutes with the
  // reshape); -1 if there is none.
  static constexpr int reshape_axis(const dims& from, const dims& to, int a) {
    std::int64_t before = 1, after = 1;
    for (int i = 0; i < a; ++i) before *= to[i];
    for (int i = a + 1; i < to.rank; ++i) after *= to[i];
    std::int64_t seen = 1;
    for (int i = 0; i < from.rank; ++i) {
      if (seen == before && from[i] == to[a]) {
        std::int64_t rest = 1;
        for (int j = i + 1; j < from.rank; ++j) rest *= from[j];
        if (rest == after) return i;
      }
      seen *= from[i];
    }
    return -1;
  }

  // [lo, hi) of a concat along its own axis: the operands' pieces in that range.
  constexpr int concat_part(const node& n, int a, std::int64_t lo, std::int64_t hi) {
    int parts[max_operands]{};
    int count = 0;
    std::int64_t off = 0;
    for (int i = 0; i < n.n_in; ++i) {
      const int o = n.in[std::size_t(i)];
      const std::int64_t e = old[std::size_t(o)].shape[a];
      const std::int64_t l = lo > off ? lo : off, h = hi < off + e ? hi : off + e;
      if (l < h) parts[count++] = slice_of(o, a, l - off, h - off);
      off += e;
    }
    if (count == 1) return parts[0];
    return b.concat(std::span<const int>(parts, std::size_t(count)), a);
  }
};

}  // namespace detail

// One pass: rewrites g's table with every slice sunk as far as it goes; merged, pruned, in
// topological order. Outputs, states and regions keep their meaning. Returns whether a slice moved.
// A pass can make a new single reader (two slices of one node merged into one by the rewrite of
// their readers), so sink_slices runs passes until none moves a slice.
constexpr bool sink_slices_once(builder& g) {
  const int size = g.size();
  std::vector<int> readers(std::size_t(size), 0);
  for (int i = 0; i < size; ++i) {
    const node& n = g[i];
    for (int k = 0; k < n.n_in; ++k) {
      bool first = true;  // a node reading x twice (x * x) is one reader
      for (int j = 0; j < k; ++j) first = first && n.in[std::size_t(j)] != n.in[std::size_t(k)];
      if (first) ++readers[std::size_t(n.in[std::size_t(k)])];
    }
  }
  for_each_root(g, [&](int id) { ++readers[std::size_t(id)]; });
  bool any = false;
  for (int i = 0; i < size && !any; ++i)
    any = g[i].op == op_kind::slice && readers[std::size_t(g[i].in[0])] == 1 &&
          !is_leaf(g[g[i].in[0]].op);
  if (!any) return false;

  builder b;
  b.regions = g.regions;
  b.outputs = g.outputs;
  b.output_state = g.output_state;
  detail::slice_sinker s{g.nodes, readers, std::vector<int>(std::size_t(size), -1), b};
  for (int i = 0; i < size; ++i) {
    node n = g[i];
    b.region = n.region;
    if (n.op == op_kind::slice) {
      s.id[std::size_t(i)] = s.slice_of(n.in[0], n.axis, n.begin, n.end);
      continue;
    }
    for (int k = 0; k < n.n_in; ++k) n.in[std::size_t(k)] = s.id[std::size_t(n.in[std::size_t(k)])];
    s.id[std::size_t(i)] = b.add(n);
  }
  b.region = 0;
  remap_roots(b, [&](int id) { return s.id[std::size_t(id)]; });
  prune(b);
  g = b;
  return s.sank;
}

// Passes of sink_slices_once until a pass moves no slice. Every move takes a slice strictly
// closer to the leaves, so this ends; the bound is a guard for the constant evaluator only.
constexpr void sink_slices(builder& g) {
  for (int pass = 0; pass < 16 && sink_slices_once(g); ++pass) {
  }
}

}  // namespace fusedsl::graph
