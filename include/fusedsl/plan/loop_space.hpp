#pragma once
// The iteration space of one loop segment, simplified for code generation.
//
// The lowering builds a loop group's iteration space from the root's shape and the views in the
// group (plan/affine.hpp), so it keeps whatever axes the program wrote: a slice to [58, 4, 8, 1]
// has an innermost axis of extent 1, an interleaved pair split to [..., 8, 2] one of extent 2,
// and a transposed operand may be contiguous along an outer axis. A code generator that
// vectorises the innermost axis (backend/cpu/kernels/codegen.hpp) then runs one lane at a time.
// `simplify_loop_segment` rewrites one segment's box and the affine offsets of the accesses it
// uses, without changing which element any iteration reads or writes:
//
//   1. the box's lower corner is folded into every access's base (the box starts at 0);
//   2. axes of extent 1 are dropped;
//   3. adjacent axes t, t+1 are merged where every access used steps over them as one axis
//      (coef[t] == coef[t+1] * extent[t+1]);
//   4. the axis the vectors run along is chosen by the strides of the accesses: the one with the
//      fewest loads and stores that are neither contiguous (stride 1) nor broadcast (stride 0),
//      among the axes at least `vector_lanes` long if there are any; ties keep the innermost.
//      It becomes the innermost axis, and step 3 runs again.
//
// Every element of a loop group is written once and computed on its own, so the order of the
// outer axes does not change a result. Only the segment asked for is rewritten; the other
// segments keep theirs (each is generated with its own simplified space).
#include <array>
#include <cstdint>

#include "fusedsl/plan/lower.hpp"

namespace fusedsl::plan {

// Accesses read by instructions [begin, end) of d's code, and the store.
constexpr std::array<bool, max_accesses> accesses_used(const kernel_desc& d, int begin, int end) {
  std::array<bool, max_accesses> used{};
  for (int i = begin; i < end; ++i) {
    const ins& x = d.c.instr[std::size_t(i)];
    if (x.kind == ins_kind::load || x.kind == ins_kind::iota || x.kind == ins_kind::gather)
      used[std::size_t(x.ref)] = true;
  }
  if (d.store >= 0) used[std::size_t(d.store)] = true;
  return used;
}

namespace detail {

using axis_flags = std::array<bool, max_iter_rank>;

// Removes iteration axis t: the extents, flags and every access's coefficients above it move down.
constexpr void drop_axis(kernel_desc& d, iter_vec& extent, axis_flags& flag, int t) {
  for (int u = t; u + 1 < d.rank; ++u) {
    extent[std::size_t(u)] = extent[std::size_t(u + 1)];
    flag[std::size_t(u)] = flag[std::size_t(u + 1)];
  }
  extent[std::size_t(d.rank - 1)] = 0;
  flag[std::size_t(d.rank - 1)] = false;
  for (int a = 0; a < d.c.n_access; ++a) {
    iter_vec& c = d.c.acc[std::size_t(a)].at.coef;
    for (int u = t; u + 1 < d.rank; ++u) c[std::size_t(u)] = c[std::size_t(u + 1)];
    c[std::size_t(d.rank - 1)] = 0;
  }
  --d.rank;
}

// Merges axis t + 1 into axis t (t outer) where both have the same flag and every used access
// steps over them as one; true if it did.
constexpr bool merge_adjacent(kernel_desc& d, iter_vec& extent, axis_flags& flag,
                              const std::array<bool, max_accesses>& used, int t) {
  if (flag[std::size_t(t)] != flag[std::size_t(t + 1)]) return false;
  const std::int64_t inner = extent[std::size_t(t + 1)];
  for (int a = 0; a < d.c.n_access; ++a)
    if (used[std::size_t(a)] && d.c.acc[std::size_t(a)].at.coef[std::size_t(t)] !=
                                    d.c.acc[std::size_t(a)].at.coef[std::size_t(t + 1)] * inner)
      return false;
  extent[std::size_t(t)] *= inner;
  for (int a = 0; a < d.c.n_access; ++a) {
    iter_vec& c = d.c.acc[std::size_t(a)].at.coef;
    c[std::size_t(t)] = c[std::size_t(t + 1)];
  }
  drop_axis(d, extent, flag, t + 1);
  return true;
}

// Every mergeable pair merged: inner pairs first, a merged axis then tried with the one outside it.
constexpr void merge_all(kernel_desc& d, iter_vec& extent, axis_flags& flag,
                         const std::array<bool, max_accesses>& used) {
  for (int t = d.rank - 2; t >= 0; --t) merge_adjacent(d, extent, flag, used, t);
}

// Loads and stores that step along axis t neither contiguously nor not at all.
constexpr int scattered_accesses(const kernel_desc& d, const std::array<bool, max_accesses>& used,
                                 int t) {
  int n = 0;
  for (int a = 0; a < d.c.n_access; ++a) {
    const access& x = d.c.acc[std::size_t(a)];
    const std::int64_t c = x.at.coef[std::size_t(t)];
    if (used[std::size_t(a)] && x.node >= 0 && c != 0 && c != 1) ++n;
  }
  return n;
}

}  // namespace detail

// d with segment s's box (and the accesses it uses) simplified as described above. The result
// describes segment s only: its rank and extent are that segment's.
constexpr kernel_desc simplify_loop_segment(const kernel_desc& in, int s, int vector_lanes = 8) {
  kernel_desc d = in;
  segment& g = d.seg[std::size_t(s)];
  const std::array<bool, max_accesses> used = accesses_used(d, g.begin, g.end);
  // 1. the box from 0
  for (int a = 0; a < d.c.n_access; ++a) {
    affine_row& r = d.c.acc[std::size_t(a)].at;
    for (int t = 0; t < d.rank; ++t) r.base += r.coef[std::size_t(t)] * g.lo[std::size_t(t)];
  }
  for (int t = 0; t < d.rank; ++t) {
    g.hi[std::size_t(t)] -= g.lo[std::size_t(t)];
    g.lo[std::size_t(t)] = 0;
  }
  // 2. no axes of extent 1
  detail::axis_flags none{};
  for (int t = d.rank - 1; t >= 0; --t)
    if (g.hi[std::size_t(t)] == 1) detail::drop_axis(d, g.hi, none, t);
  // 3. merged axes
  detail::merge_all(d, g.hi, none, used);
  // 4. the vector axis innermost
  if (d.rank > 1) {
    int best = d.rank - 1;
    auto key = [&](int t) {
      const bool short_axis = g.hi[std::size_t(t)] < vector_lanes;
      return std::array<std::int64_t, 2>{short_axis ? 1 : 0,
                                         detail::scattered_accesses(d, used, t)};
    };
    for (int t = d.rank - 2; t >= 0; --t)
      if (key(t) < key(best)) best = t;
    if (best != d.rank - 1) {
      auto rotate = [&](iter_vec& v) {
        const std::int64_t x = v[std::size_t(best)];
        for (int u = best; u + 1 < d.rank; ++u) v[std::size_t(u)] = v[std::size_t(u + 1)];
        v[std::size_t(d.rank - 1)] = x;
      };
      rotate(g.hi);
      for (int a = 0; a < d.c.n_access; ++a) rotate(d.c.acc[std::size_t(a)].at.coef);
      detail::merge_all(d, g.hi, none, used);
    }
  }
  for (int t = 0; t < max_iter_rank; ++t)
    d.extent[std::size_t(t)] = t < d.rank ? g.hi[std::size_t(t)] : 0;
  return d;
}

// Whether simplify_loop_segment changes segment s's space (its rank, extents or box).
constexpr bool loop_segment_simplifies(const kernel_desc& d, int s, int vector_lanes = 8) {
  const kernel_desc r = simplify_loop_segment(d, s, vector_lanes);
  if (r.rank != d.rank) return true;
  const segment& a = d.seg[std::size_t(s)];
  for (int t = 0; t < d.rank; ++t)
    if (a.lo[std::size_t(t)] != 0 ||
        r.seg[std::size_t(s)].hi[std::size_t(t)] != a.hi[std::size_t(t)])
      return true;
  for (int x = 0; x < d.c.n_access; ++x)
    if (!(r.c.acc[std::size_t(x)].at == d.c.acc[std::size_t(x)].at)) return true;
  return false;
}

// A reduce group's space (one segment over the whole space, the reduced axes [reduce_first,
// reduce_first + reduce_count)) with axes of extent 1 dropped and adjacent axes merged where both
// are reduced or both are not and every access used (the reduced operand's, the epilogue's, the
// store) steps over them as one. A reduced axis's position (argmax's index) is the reduced axes'
// digits, which merging keeps. Axes are not reordered: the lanes run along the innermost axis
// left, which is the reduced one when only axes of extent 1 followed it (a sum then adds in lanes
// and then across them, as over a last axis). At least one reduced axis is kept (of extent 1 when
// all are).
constexpr kernel_desc simplify_reduce(const kernel_desc& in) {
  kernel_desc d = in;
  segment& g = d.seg[0];
  std::array<bool, max_accesses> used = accesses_used(d, g.begin, g.end);
  const std::array<bool, max_accesses> epi = accesses_used(d, d.epilogue.begin, d.epilogue.end);
  for (int a = 0; a < max_accesses; ++a)
    used[std::size_t(a)] = used[std::size_t(a)] || epi[std::size_t(a)];
  detail::axis_flags red{};
  for (int t = 0; t < d.rank; ++t)
    red[std::size_t(t)] = t >= d.reduce_first && t < d.reduce_first + d.reduce_count;
  bool all_reduced_unit = true;
  for (int t = 0; t < d.rank; ++t)
    if (red[std::size_t(t)] && d.extent[std::size_t(t)] != 1) all_reduced_unit = false;
  // axes of extent 1 dropped, but the last reduced axis when every reduced axis has extent 1
  const int last_reduced = d.reduce_first + d.reduce_count - 1;
  for (int t = d.rank - 1; t >= 0; --t)
    if (d.extent[std::size_t(t)] == 1 && !(all_reduced_unit && t == last_reduced))
      detail::drop_axis(d, d.extent, red, t);
  detail::merge_all(d, d.extent, red, used);
  d.reduce_first = 0;
  d.reduce_count = 0;
  for (int t = d.rank - 1; t >= 0; --t)
    if (red[std::size_t(t)]) d.reduce_first = t, ++d.reduce_count;
  for (int t = 0; t < max_iter_rank; ++t) {
    g.lo[std::size_t(t)] = 0;
    g.hi[std::size_t(t)] = t < d.rank ? d.extent[std::size_t(t)] : 0;
  }
  return d;
}

// Whether simplify_reduce changes d's space.
constexpr bool reduce_simplifies(const kernel_desc& d) {
  return simplify_reduce(d).rank != d.rank;
}

}  // namespace fusedsl::plan
