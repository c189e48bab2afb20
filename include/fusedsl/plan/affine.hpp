#pragma once
// Index maps for the lowering (plan/lower.hpp): how a kernel's iteration index reaches the index of
// each value it reads.
//
// A kernel iterates over an iteration space: the shape of the value it writes, with some axes
// split further (a refinement), so that every index it reads is an affine function of the
// iteration index. A node reached from the kernel's root has the index map
//   idx_node[c] = base[c] + sum_t coef[c][t] * iter[t]
// Elementwise operands (NumPy broadcasting), broadcast, transpose and slice keep maps affine. A
// reshape merges and splits axes; a merge is affine, a split of an affine row is affine when its
// terms fall on the new axes without carries, and otherwise the iteration axis that carries is
// split (the caller re-lowers with the refined space). A concat picks one operand per part of the
// iteration space: the space is cut into boxes (segments) where the choice is constant.
// constexpr, like the plans that use it.
#include <array>
#include <cstdint>

#include "fusedsl/core/shape.hpp"

namespace fusedsl::plan {

inline constexpr int max_iter_rank = 8;

using iter_vec = std::array<std::int64_t, max_iter_rank>;

// An iteration space with a box in it (a segment): iter[t] in [lo[t], hi[t]).
struct iter_space {
  int rank = 0;
  iter_vec extent{};
  iter_vec lo{}, hi{};

  constexpr std::int64_t size() const {
    std::int64_t s = 1;
    for (int t = 0; t < rank; ++t) s *= hi[std::size_t(t)] - lo[std::size_t(t)];
    return s;
  }
  constexpr bool full() const {
    for (int t = 0; t < rank; ++t)
      if (lo[std::size_t(t)] != 0 || hi[std::size_t(t)] != extent[std::size_t(t)]) return false;
    return true;
  }
};

// One row of an index map: base + sum_t coef[t] * iter[t].
struct affine_row {
  iter_vec coef{};
  std::int64_t base = 0;
  constexpr bool operator==(const affine_row&) const = default;
};

struct index_map {
  int rank = 0;
  std::array<affine_row, max_rank> row{};
  constexpr bool operator==(const index_map&) const = default;
};

// Do maps a and b give the same index at every point of box s? (They may differ in the
// coefficients of axes of extent 1 there, which one reshape folds into a neighbouring row.)
constexpr bool same_on(const index_map& a, const index_map& b, const iter_space& s) {
  if (a.rank != b.rank) return false;
  for (int c = 0; c < a.rank; ++c) {
    const affine_row &x = a.row[std::size_t(c)], &y = b.row[std::size_t(c)];
    std::int64_t vx = x.base, vy = y.base;
    for (int t = 0; t < s.rank; ++t) {
      const std::size_t i = std::size_t(t);
      vx += x.coef[i] * s.lo[i];
      vy += y.coef[i] * s.lo[i];
      if (s.hi[i] - s.lo[i] > 1 && x.coef[i] != y.coef[i]) return false;
    }
    if (vx != vy) return false;
  }
  return true;
}

// What a lowering attempt asks for instead of a result.
struct refine_request {
  enum kind_t : std::uint8_t { none, split_axis, split_box, fail } kind = none;
  int axis = -1;            // the iteration axis
  std::int64_t at = 0;      // split_axis: the inner extent; split_box: the cut coordinate
  const char* why = nullptr;  // fail: the reason
  constexpr bool ok() const { return kind == none; }
};

// The refinement of a root shape: root axis c is covered by iteration axes [first[c], first[c] +
// count[c]), outermost first.
struct refinement {
  int root_rank = 0;
  std::array<int, max_rank> first{}, count{};
  iter_vec extent{};
  int rank = 0;

  static constexpr refinement of(const dims& root) {
    refinement r;
    r.root_rank = root.rank;
    for (int c = 0; c < root.rank; ++c) {
      r.first[std::size_t(c)] = c;
      r.count[std::size_t(c)] = 1;
      r.extent[std::size_t(c)] = root[c];
    }
    r.rank = root.rank;
    return r;
  }
  // Split iteration axis t into (extent / inner, inner). False when the space is full.
  constexpr bool split(int t, std::int64_t inner) {
    if (rank >= max_iter_rank || inner <= 1 || extent[std::size_t(t)] % inner != 0 ||
        inner == extent[std::size_t(t)])
      return false;
    for (int u = rank; u > t + 1; --u) extent[std::size_t(u)] = extent[std::size_t(u - 1)];
    extent[std::size_t(t + 1)] = inner;
    extent[std::size_t(t)] /= inner;
    ++rank;
    for (int c = 0; c < root_rank; ++c) {
      int& f = first[std::size_t(c)];
      if (t >= f && t < f + count[std::size_t(c)])
        count[std::size_t(c)] += 1;
      else if (f > t)
        f += 1;
    }
    return true;
  }
  constexpr iter_space space() const {
    iter_space s;
    s.rank = rank;
    for (int t = 0; t < rank; ++t) {
      s.extent[std::size_t(t)] = extent[std::size_t(t)];
      s.hi[std::size_t(t)] = extent[std::size_t(t)];
    }
    return s;
  }
  // The root's map: root axis c = its iteration axes read as digits.
  constexpr index_map root_map() const {
    index_map m;
    m.rank = root_rank;
    for (int c = 0; c < root_rank; ++c) {
      std::int64_t s = 1;
      for (int k = count[std::size_t(c)] - 1; k >= 0; --k) {
        const int t = first[std::size_t(c)] + k;
        m.row[std::size_t(c)].coef[std::size_t(t)] = s;
        s *= extent[std::size_t(t)];
      }
    }
    return m;
  }
};

// ---- maps through ops ----

// An operand of shape `in` broadcast (NumPy rules) to a consumer of shape `out` with map m.
constexpr index_map broadcast_map(const index_map& m, const dims& in, const dims& out) {
  index_map r;
  r.rank = in.rank;
  for (int c = 0; c < in.rank; ++c) {
    const int oc = c + (out.rank - in.rank);
    if (in[c] != 1) r.row[std::size_t(c)] = m.row[std::size_t(oc)];
  }
  return r;
}

// transpose: out[i] = in[perm[i]].
constexpr index_map transpose_map(const index_map& m, const std::array<int, max_rank>& perm) {
  index_map r;
  r.rank = m.rank;
  for (int i = 0; i < m.rank; ++i) r.row[std::size_t(perm[std::size_t(i)])] = m.row[std::size_t(i)];
  return r;
}

constexpr index_map slice_map(const index_map& m, int axis, std::int64_t begin) {
  index_map r = m;
  r.row[std::size_t(axis)].base += begin;
  return r;
}

// The smallest and largest value of row over the box.
constexpr std::int64_t row_min(const affine_row& a, const iter_space& s) {
  std::int64_t v = a.base;
  for (int t = 0; t < s.rank; ++t) {
    const std::int64_t c = a.coef[std::size_t(t)];
    v += c >= 0 ? c * s.lo[std::size_t(t)] : c * (s.hi[std::size_t(t)] - 1);
  }
  return v;
}

// Split the affine value `v` into digits (d_0, ..., d_{q-1}) of extents `ext` (row-major), each
// digit affine. On a carry, asks to split the iteration axis that causes it.
struct digits_result {
  refine_request req{};
  std::array<affine_row, max_rank> digit{};
};
constexpr digits_result split_digits(const affine_row& v, const std::int64_t* ext, int q,
                                     const iter_space& s) {
  digits_result r;
  std::array<std::int64_t, max_rank> stride{};
  std::int64_t total = 1;
  for (int k = q - 1; k >= 0; --k) {
    stride[std::size_t(k)] = total;
    total *= ext[k];
  }
  // Rebase at the box's corner so that every term counts from 0.
  std::int64_t b = v.base;
  for (int t = 0; t < s.rank; ++t) b += v.coef[std::size_t(t)] * s.lo[std::size_t(t)];
  if (b < 0 || row_min(v, s) < 0) {
    r.req = {refine_request::fail, -1, 0, "a reshape reads outside its operand"};
    return r;
  }
  std::array<std::int64_t, max_rank> top{};  // the largest value each digit reaches
  for (int k = 0; k < q; ++k) {
    top[std::size_t(k)] = (b / stride[std::size_t(k)]) % ext[k];
    r.digit[std::size_t(k)].base = top[std::size_t(k)];
  }
  for (int t = 0; t < s.rank; ++t) {
    const std::int64_t c = v.coef[std::size_t(t)];
    if (c == 0) continue;
    const std::int64_t range = s.hi[std::size_t(t)] - s.lo[std::size_t(t)];
    if (c < 0) {
      r.req = {refine_request::fail, -1, 0, "a reshape of a reversed index"};
      return r;
    }
    // The digit this term lands on: the outermost of extent > 1 whose stride divides c.
    int k = -1;
    for (int j = 0; j < q; ++j)
      if (ext[j] > 1 && c % stride[std::size_t(j)] == 0) {
        k = j;
        break;
      }
    if (k < 0) {
      if (range == 1) continue;  // a constant term over this box: the rebased base holds it
      r.req = {refine_request::fail, -1, 0, "a reshape reads outside its operand"};
      return r;
    }
    const std::int64_t m = c / stride[std::size_t(k)];
    if (m * (range - 1) + top[std::size_t(k)] >= ext[k]) {
      // Carries into the next digit: split iteration axis t so that its inner part fills digit k.
      const std::int64_t inner = ext[k] % m == 0 ? ext[k] / m : 0;
      if (inner > 1 && s.full() && range % inner == 0 && top[std::size_t(k)] == 0)
        r.req = {refine_request::split_axis, t, inner, nullptr};
      else
        r.req = {refine_request::fail, -1, 0, "a reshape that splits an axis the kernel cannot"};
      return r;
    }
    top[std::size_t(k)] += m * (range - 1);
    r.digit[std::size_t(k)].coef[std::size_t(t)] = m;
    r.digit[std::size_t(k)].base -= m * s.lo[std::size_t(t)];
  }
  return r;
}

// reshape: the operand (shape `in`) of a node of shape `out` with map m.
struct map_result {
  refine_request req{};
  index_map map{};
};
constexpr map_result reshape_map(const index_map& m, const dims& out, const dims& in,
                                 const iter_space& s) {
  map_result r;
  r.map.rank = in.rank;
  // Chunks: runs of out axes and in axes with equal products (trailing size-1 axes join the
  // chunk; size-1 axes left over at the end read index 0).
  int oi = 0, ii = 0;
  while (oi < out.rank && ii < in.rank) {
    int oj = oi + 1, ij = ii + 1;
    std::int64_t po = out[oi], pi = in[ii];
    while (po != pi) {
      if (po < pi)
        po *= out[oj++];
      else
        pi *= in[ij++];
    }
    while (oj < out.rank && out[oj] == 1) ++oj;
    while (ij < in.rank && in[ij] == 1) ++ij;
    // The chunk's linear index from the out axes, then its digits on the in axes.
    affine_row lin;
    std::int64_t ls = 1;
    for (int c = oj - 1; c >= oi; --c) {
      const affine_row& a = m.row[std::size_t(c)];
      lin.base += a.base * ls;
      for (int t = 0; t < s.rank; ++t) lin.coef[std::size_t(t)] += a.coef[std::size_t(t)] * ls;
      ls *= out[c];
    }
    std::int64_t ext[max_rank]{};
    for (int c = ii; c < ij; ++c) ext[c - ii] = in[c];
    const digits_result d = split_digits(lin, ext, ij - ii, s);
    if (!d.req.ok()) {
      r.req = d.req;
      return r;
    }
    for (int c = ii; c < ij; ++c) r.map.row[std::size_t(c)] = d.digit[std::size_t(c - ii)];
    oi = oj;
    ii = ij;
  }
  return r;
}

// The offset of element `m` in a row-major buffer of shape `sh`, as an affine row.
constexpr affine_row offset_row(const index_map& m, const dims& sh) {
  affine_row o;
  for (int c = 0; c < sh.rank; ++c) {
    const std::int64_t st = sh.stride(c);
    const affine_row& a = m.row[std::size_t(c)];
    o.base += a.base * st;
    for (int t = 0; t < max_iter_rank; ++t) o.coef[std::size_t(t)] += a.coef[std::size_t(t)] * st;
  }
  return o;
}

// The iteration axis a row reads alone with coefficient 1 (idx = base + iter[t]), or -1.
constexpr int unit_axis(const affine_row& a, int rank) {
  int axis = -1;
  for (int t = 0; t < rank; ++t) {
    const std::int64_t c = a.coef[std::size_t(t)];
    if (c == 0) continue;
    if (c != 1 || axis >= 0) return -1;
    axis = t;
  }
  return axis;
}

}  // namespace fusedsl::plan
