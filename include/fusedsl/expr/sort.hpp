#pragma once
// Order along an axis: top_k, sort, argsort and top_k_mask, written as comparisons and reductions
// (so every backend and the HLO export compute them with the ops they already have).
//
//   top_k<K, Axis = -1>(x)        .values (x's dtype) and .indices (i32): the K largest along
//                                 Axis, largest first; equal values by the lower index first (as
//                                 jax.lax.top_k)
//   sort<Axis = -1>(x)            ascending, stable
//   argsort<Axis = -1>(x)         the i32 indices that sort x, stable (equal values keep their
//                                 order, as numpy.argsort(kind="stable"))
//   top_k_mask<K, Axis = -1>(x)   boolean, x's shape: true at the K elements top_k picks
//
// The order is a total one: NaN is larger than every number (top_k picks it first, sort puts it
// last, as numpy.sort), and -0 equals +0 (the lower index first; XLA's total order puts -0 first).
// Each element's position in the order is counted, rank(i) = #{j : x[j] comes before x[i]}: a
// reduction whose [.., n, n] comparisons fuse into it (no [n, n] buffer); each output position
// finds the index of the element of its rank with a max-reduction, and the values are gathered
// from x at those indices (exact: NaN, infinities and the sign of a zero as they are in x).
// The work is quadratic in the axis' length: made for routing gates, beams and small axes.
#include <cstdint>
#include <limits>

#include "fusedsl/expr/ops.hpp"

namespace fusedsl {
namespace expr {

enum class order_part { values, indices, mask };

// The permutation of R axes that moves `axis` last, and its inverse.
template <int R>
constexpr std::array<int, R> axis_last(int axis) {
  std::array<int, R> p{};
  int c = 0;
  for (int i = 0; i < R; ++i)
    if (i != axis) p[std::size_t(c++)] = i;
  p[std::size_t(R - 1)] = axis;
  return p;
}
template <int R>
constexpr std::array<int, R> inverse(const std::array<int, R>& p) {
  std::array<int, R> q{};
  for (int i = 0; i < R; ++i) q[std::size_t(p[std::size_t(i)])] = i;
  return q;
}

// Per element of x (axis last, [.., n]): how many elements come before it, in f32, [.., n].
// descending: larger first; else smaller first. NaN is the largest; ties by the lower index. The
// ascending order compares -x, so that no [.., n, n] value is common to both orders of one x (it
// would be materialised for the two).
constexpr int order_rank(builder& b, int x, bool descending) {
  using graph::op_kind;
  const dims s = b.at(x).shape;
  const int r = s.rank;
  const std::int64_t n = s[r - 1];
  dims si = s, sj = s;  // element i along axis r - 1, element j along axis r
  si.rank = sj.rank = r + 1;
  si[r] = 1;
  sj[r - 1] = 1;
  sj[r] = n;
  const int key = descending ? x : b.unary(op_kind::neg, x);
  const int ki = b.reshape(key, si), kj = b.reshape(key, sj);
  const auto flag = [&](int pred) { return b.cast(pred, dtype::f32); };
  const int nan_i = flag(b.binary(op_kind::ne, ki, ki));
  const int nan_j = flag(b.binary(op_kind::ne, kj, kj));
  const int one = b.constant(1.0);
  // j strictly before i: a larger key, or NaN against a number (first when descending, last
  // when ascending)
  const int cmp = flag(b.binary(op_kind::gt, kj, ki));
  const int nan_first = descending
                            ? b.binary(op_kind::mul, nan_j, b.binary(op_kind::sub, one, nan_i))
                            : b.binary(op_kind::mul, nan_i, b.binary(op_kind::sub, one, nan_j));
  const int strictly = b.binary(op_kind::max, cmp, nan_first);
  // or equal (both NaN included) with a lower index
  const int equal = b.binary(op_kind::max, flag(b.binary(op_kind::eq, kj, ki)),
                             b.binary(op_kind::mul, nan_j, nan_i));
  const dims nn = make_dims(n, n);
  const int lower =
      flag(b.binary(op_kind::lt, b.iota(dtype::i32, nn, 1), b.iota(dtype::i32, nn, 0)));
  const int before = b.binary(op_kind::max, strictly, b.binary(op_kind::mul, equal, lower));
  return b.reduce(op_kind::reduce_sum, before, r, false);
}

// The graph of one part of an order along axis of x0 (rank R): K positions (values, indices) or
// x's shape (mask).
template <int R>
constexpr int emit_order(builder& b, int x0, int axis, std::int64_t k, bool descending,
                         order_part part) {
  constexpr int r = R;
  const std::array<int, R> to_last = axis_last<R>(axis), back = inverse<R>(to_last);
  const int x = b.transpose(x0, to_last);
  const int rank = order_rank(b, x, descending);
  if (part == order_part::mask) {
    const int kept = b.binary(graph::op_kind::lt, rank, b.constant(double(k)));
    return b.transpose(kept, back);
  }
  // the index of the element at position p: the one whose rank is p
  const dims s = b.at(x).shape;
  const std::int64_t n = s[r - 1];
  dims one_row = s;
  one_row.rank = r + 1;
  one_row[r - 1] = 1;
  one_row[r] = n;
  const int at_position = b.iota(dtype::f32, make_dims(k, 1), 0);
  const int sel = b.binary(graph::op_kind::eq, b.reshape(rank, one_row), at_position);
  const int index = b.iota(dtype::f32, make_dims(1, n), 1);
  const int found =
      b.reduce(graph::op_kind::reduce_max, b.select(sel, index, b.constant(-1.0)), r, false);
  int picked = b.cast(found, dtype::i32);  // [.., k]
  if (part == order_part::values) {
    // x's element at that index, read from x flattened: row o's element i is at o * n + i
    const std::int64_t rows = s.size() / n;
    const dims flat = make_dims(rows, k);
    const int offset = b.binary(graph::op_kind::mul, b.iota(dtype::i32, flat, 0),
                                b.constant(double(n), dtype::i32));
    const int ids = b.binary(graph::op_kind::add, b.reshape(picked, flat), offset);
    dims out = s;
    out[r - 1] = k;
    picked = b.reshape(b.gather(b.reshape(x, make_dims(rows * n)), ids), out);
  }
  return b.transpose(picked, back);
}

template <class X, int Axis, std::int64_t K, bool Descending, order_part Part>
struct order_t : node_base<X> {
  static constexpr int axis = normalize_axis(Axis, X::shape.rank);
  static constexpr dtype type = Part == order_part::values ? X::type
                                : Part == order_part::mask ? dtype::boolean
                                                           : dtype::i32;
  static constexpr dims shape = [] {
    dims s = X::shape;
    if (Part != order_part::mask) s[axis] = K;
    return s;
  }();
  static constexpr int emit(builder& b, std::array<int, 1> x) {
    return emit_order<X::shape.rank>(b, x[0], axis, K, Descending, Part);
  }
  static constexpr bool well_formed = node_base<X>::operands_well_formed;
};

template <class V, class I>
struct top_k_result {
  V values;
  I indices;
};

// K: the positions asked for (top_k's k; the axis' length for sort and argsort).
template <class X, int Axis, std::int64_t K>
constexpr void check_order_operand() {
  static_assert(axis_in_range(Axis, X::shape.rank),
                "sort: axis out of range for the operand's rank");
  static_assert(is_floating(X::type), "sort: the operand must be a floating-point tensor");
  static_assert(K >= 1 && K <= X::shape[normalize_axis(Axis, X::shape.rank)],
                "top_k: k must be between 1 and the axis' length");
}

}  // namespace expr

template <std::int64_t K, int Axis = -1, expression X>
constexpr auto top_k(X) {
  expr::check_order_operand<X, Axis, K>();
  return expr::top_k_result<expr::order_t<X, Axis, K, true, expr::order_part::values>,
                            expr::order_t<X, Axis, K, true, expr::order_part::indices>>{};
}

template <std::int64_t K, int Axis = -1, expression X>
constexpr auto top_k_mask(X) {
  expr::check_order_operand<X, Axis, K>();
  return expr::order_t<X, Axis, K, true, expr::order_part::mask>{};
}

template <int Axis = -1, expression X>
constexpr auto sort(X) {
  constexpr std::int64_t n = X::shape[normalize_axis(Axis, X::shape.rank)];
  expr::check_order_operand<X, Axis, n>();
  return expr::order_t<X, Axis, n, false, expr::order_part::values>{};
}

template <int Axis = -1, expression X>
constexpr auto argsort(X) {
  constexpr std::int64_t n = X::shape[normalize_axis(Axis, X::shape.rank)];
  expr::check_order_operand<X, Axis, n>();
  return expr::order_t<X, Axis, n, false, expr::order_part::indices>{};
}

}  // namespace fusedsl
