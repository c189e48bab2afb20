#pragma once
// Strided views: how a kernel reads a value through the layout ops (reshape, transpose,
// broadcast, slice) fused into its group, without copying. Also the inverse: where a kernel
// writes an element when its result leaves the group through layout ops (attention's merge of
// heads). constexpr, like the plan it reads; every backend's kernels take these views.
#include <array>

#include "fusedsl/plan/groups.hpp"

namespace fusedsl::plan {

using graph::node;
using graph::op_kind;

struct strided_view {
  bool ok = false;
  int base = -1;             // the node whose buffer is read
  dims shape{};
  std::array<std::int64_t, max_rank> stride{};  // in elements; 0 for broadcast axes
  std::int64_t offset = 0;

  constexpr std::int64_t at_last(int from_end) const {
    return stride[std::size_t(shape.rank - from_end)];
  }
};

constexpr strided_view contiguous_view(int base, const dims& s) {
  strided_view v;
  v.ok = true;
  v.base = base;
  v.shape = s;
  for (int i = 0; i < s.rank; ++i) v.stride[std::size_t(i)] = s.stride(i);
  return v;
}

// Reshape a strided view without copying, if possible (the algorithm of NumPy's
// _attempt_nocopy_reshape): old and new axes are matched in chunks of equal extent; inside a
// chunk the old axes must be contiguous with respect to each other.
constexpr strided_view reshape_view(const strided_view& v, const dims& to) {
  strided_view r;
  if (!v.ok || v.shape.size() != to.size()) return r;
  r = v;
  r.shape = to;
  // Drop size-1 axes of the source: they carry no stride information.
  std::array<std::int64_t, max_rank> od{}, os{};
  int on = 0;
  for (int i = 0; i < v.shape.rank; ++i)
    if (v.shape[i] != 1) {
      od[std::size_t(on)] = v.shape[i];
      os[std::size_t(on++)] = v.stride[std::size_t(i)];
    }
  int oi = 0, oj = 1, ni = 0, nj = 1;
  const int nn = to.rank;
  while (ni < nn && oi < on) {
    std::int64_t np = to[ni], op = od[std::size_t(oi)];
    while (np != op) {
      if (np < op) np *= to[nj++];
      else op *= od[std::size_t(oj++)];
    }
    for (int ok = oi; ok < oj - 1; ++ok)
      if (os[std::size_t(ok)] != od[std::size_t(ok + 1)] * os[std::size_t(ok + 1)])
        return strided_view{};
    r.stride[std::size_t(nj - 1)] = os[std::size_t(oj - 1)];
    for (int nk = nj - 1; nk > ni; --nk)
      r.stride[std::size_t(nk - 1)] = r.stride[std::size_t(nk)] * to[nk];
    ni = nj++;
    oi = oj++;
  }
  for (int i = 0; i < nn; ++i)
    if (to[i] == 1) r.stride[std::size_t(i)] = 0;  // size-1 axes: any stride; 0 keeps it simple
  return r;
}

constexpr strided_view permute_view(const strided_view& v, const std::array<int, max_rank>& perm) {
  strided_view r = v;
  for (int i = 0; i < v.shape.rank; ++i) {
    r.shape[i] = v.shape[perm[std::size_t(i)]];
    r.stride[std::size_t(i)] = v.stride[std::size_t(perm[std::size_t(i)])];
  }
  return r;
}

constexpr strided_view broadcast_view(const strided_view& v, const dims& to) {
  strided_view r;
  if (!v.ok || to.rank < v.shape.rank) return r;
  r = v;
  r.shape = to;
  for (int i = 0; i < to.rank; ++i) {
    const int j = i - (to.rank - v.shape.rank);
    r.stride[std::size_t(i)] = (j < 0 || v.shape[j] == 1) ? 0 : v.stride[std::size_t(j)];
  }
  return r;
}

// How group gi reads node id: through its member layout ops down to a materialised buffer. A
// member cast widening a narrow float to f32 reads the narrow buffer when it is a parameter (its
// consumer widens it once, when bound) or, with any_narrow, any buffer (the consumer reads the
// narrow type: an attention's bf16 keys and values); one widening an int8 parameter (a quantized
// weight's values) reads the parameter.
template <std::size_t N>
constexpr strided_view read_view(const graph::graph<N>& g, const fusion_plan<N>& f, int gi,
                                 int id, bool any_narrow = false) {
  const node& n = g[id];
  if (f.group_of[std::size_t(id)] != gi || graph::is_leaf(n.op))
    return contiguous_view(id, n.shape);
  if (n.op == op_kind::reshape)
    return reshape_view(read_view(g, f, gi, n.in[0], any_narrow), n.shape);
  if (n.op == op_kind::transpose)
    return permute_view(read_view(g, f, gi, n.in[0], any_narrow), n.perm);
  if (n.op == op_kind::broadcast)
    return broadcast_view(read_view(g, f, gi, n.in[0], any_narrow), n.shape);
  if (n.op == op_kind::cast && n.type == dtype::f32 && is_floating(g[n.in[0]].type)) {
    strided_view v = read_view(g, f, gi, n.in[0], any_narrow);
    return (v.ok && (any_narrow || g[v.base].op == op_kind::param)) ? v : strided_view{};
  }
  if (n.op == op_kind::cast && n.type == dtype::f32 && g[n.in[0]].type == dtype::i8) {
    strided_view v = read_view(g, f, gi, n.in[0], any_narrow);
    return (v.ok && g[v.base].op == op_kind::param) ? v : strided_view{};
  }
  if (n.op == op_kind::slice) {
    strided_view v = read_view(g, f, gi, n.in[0], any_narrow);
    if (!v.ok) return v;
    v.offset += n.begin * v.stride[std::size_t(n.axis)];
    v.shape = n.shape;
    return v;
  }
  return strided_view{};  // computed inside the group: not a view of a buffer
}

// Where group gi writes the value of member `inner` when the group's result `root` is reached
// from it through layout ops only: a view of root's (contiguous) buffer with inner's shape.
template <std::size_t N>
constexpr strided_view write_view(const graph::graph<N>& g, int root, int inner) {
  strided_view v = contiguous_view(root, g[root].shape);
  int cur = root;
  while (cur != inner) {
    const node& n = g[cur];
    const dims from = g[n.in[0]].shape;
    if (n.op == op_kind::reshape) {
      v = reshape_view(v, from);
    } else if (n.op == op_kind::transpose) {
      std::array<int, max_rank> inv{};
      for (int i = 0; i < n.shape.rank; ++i) inv[std::size_t(n.perm[std::size_t(i)])] = i;
      v = permute_view(v, inv);
    } else {
      return strided_view{};
    }
    if (!v.ok) return v;
    cur = n.in[0];
  }
  v.base = root;
  return v;
}

}  // namespace fusedsl::plan
