#pragma once
// scatter_add(target, ids, updates): target with each row updates[m] added at row ids[m] of its
// first axis; ids repeated add up, an id outside [0, rows) adds nothing (as XLA's scatter, which
// drops out-of-bounds updates, and torch's index_add_ without its bounds error).
//
//   target [N, ...], ids [M] (i32), updates [M, ...]  ->  [N, ...]
//
// Written as comparisons and a reduction: out[n] = target[n] + sum over m of (ids[m] == n ?
// updates[m] : 0), a sum whose [N, M, ...] selects fuse into the reduction (no such buffer), so
// every backend and the HLO export compute it with the ops they already have (not HLO's
// `scatter`). The work is N x M x the row's size: for gradients of small tables, combining routed
// rows and histograms, not a large embedding table.
#include <cstdint>

#include "fusedsl/expr/ops.hpp"

namespace fusedsl {
namespace expr {

constexpr int emit_scatter_add(builder& b, int target, int ids, int updates) {
  using graph::op_kind;
  const dims ts = b.at(target).shape, us = b.at(updates).shape;
  const std::int64_t n = ts[0];
  dims wide = us;  // [1, M, ...]
  wide.rank = us.rank + 1;
  wide[0] = 1;
  for (int c = 0; c < us.rank; ++c) wide[c + 1] = us[c];
  dims id_shape = wide;  // [1, M, 1, ...]
  for (int c = 2; c < id_shape.rank; ++c) id_shape[c] = 1;
  dims rows = id_shape;  // [N, 1, 1, ...]
  rows[0] = n;
  rows[1] = 1;
  const int hit = b.binary(op_kind::eq, b.reshape(ids, id_shape), b.iota(dtype::i32, rows, 0));
  const int zero = b.constant(0.0);
  const int picked = b.select(hit, b.reshape(updates, wide), zero);  // [N, M, ...]
  return b.binary(op_kind::add, target, b.reduce(op_kind::reduce_sum, picked, 1, false));
}

template <class T, class I, class U>
constexpr bool scatter_add_fits() {
  if (T::shape.rank < 1 || I::shape.rank != 1 || U::shape.rank != T::shape.rank) return false;
  for (int c = 1; c < T::shape.rank; ++c)
    if (U::shape[c] != T::shape[c]) return false;
  return I::shape[0] == U::shape[0] && I::type == dtype::i32 && U::type == T::type;
}

template <class T, class I, class U>
struct scatter_add_t : node_base<T, I, U> {
  static constexpr dtype type = T::type;
  static constexpr dims shape = T::shape;
  static constexpr int emit(builder& b, std::array<int, 3> x) {
    return emit_scatter_add(b, x[0], x[1], x[2]);
  }
  static constexpr bool well_formed =
      scatter_add_fits<T, I, U>() && node_base<T, I, U>::operands_well_formed;
};

}  // namespace expr

template <expression T, expression I, expression U>
constexpr auto scatter_add(T, I, U) {
  static_assert(I::type == dtype::i32 && I::shape.rank == 1,
                "scatter_add: the ids must be an i32 vector, one per update row");
  static_assert(U::shape.rank == T::shape.rank && U::shape[0] == I::shape[0],
                "scatter_add: updates must be [ids, the target's row shape...]");
  static_assert(expr::scatter_add_fits<T, I, U>(),
                "scatter_add: an update row differs from the target's rows in shape or dtype");
  return expr::scatter_add_t<T, I, U>{};
}

}  // namespace fusedsl
