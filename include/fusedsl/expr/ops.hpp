#pragma once
// Primitive operations: node types and their front-door functions. Each front door checks its
// operands once (diag::*) and returns a well-formed node type even when a check fails.
#include <tuple>

#include "fusedsl/expr/diagnostics.hpp"
#include "fusedsl/expr/expression.hpp"

namespace fusedsl {
namespace expr {

constexpr bool weak_constant(bool weak_a, bool weak_b, dtype a, dtype b) {
  return a == b || weak_a || weak_b;
}
template <class E> inline constexpr bool is_weak = requires { E::weak; };
template <class A, class B>
inline constexpr dtype common_dtype = is_weak<A> ? B::type : A::type;

template <op_kind K, class A>
struct unary_t : node_base<A> {
  static constexpr dtype type = A::type;
  static constexpr bool well_formed = is_floating(A::type) && node_base<A>::operands_well_formed;
  static constexpr dims shape = A::shape;
  static constexpr int emit(builder& b, std::array<int, 1> x) { return b.unary(K, x[0]); }
};

template <op_kind K, class A, class B>
struct binary_t : node_base<A, B> {
  static constexpr dtype type = graph::is_compare(K) ? dtype::boolean : common_dtype<A, B>;
  static constexpr dims shape = broadcast_shapes(A::shape, B::shape).value;
  static constexpr int emit(builder& b, std::array<int, 2> x) { return b.binary(K, x[0], x[1]); }
  static constexpr bool well_formed = broadcast_shapes(A::shape, B::shape).ok() &&
                                      weak_constant(is_weak<A>, is_weak<B>, A::type, B::type) &&
                                      node_base<A, B>::operands_well_formed;
};

template <class P, class A, class B>
struct select_t : node_base<P, A, B> {
  static constexpr dtype type = common_dtype<A, B>;
  static constexpr dims shape =
      broadcast_shapes(P::shape, broadcast_shapes(A::shape, B::shape).value).value;
  static constexpr int emit(builder& b, std::array<int, 3> x) { return b.select(x[0], x[1], x[2]); }
  static constexpr bool well_formed =
      P::type == dtype::boolean && broadcast_shapes(A::shape, B::shape).ok() &&
      broadcast_shapes(P::shape, broadcast_shapes(A::shape, B::shape).value).ok() &&
      weak_constant(is_weak<A>, is_weak<B>, A::type, B::type) &&
      node_base<P, A, B>::operands_well_formed;
};

template <dtype T, class A>
struct cast_t : node_base<A> {
  static constexpr dtype type = T;
  static constexpr dims shape = A::shape;
  static constexpr int emit(builder& b, std::array<int, 1> x) { return b.cast(x[0], T); }
};

template <op_kind K, int Axis, bool Keep, class A>
struct reduce_t : node_base<A> {
  static constexpr dtype type = K == op_kind::argmax ? dtype::i32 : A::type;
  static constexpr dims shape = reduce_shape(A::shape, Axis, Keep).value;
  static constexpr int emit(builder& b, std::array<int, 1> x) {
    return b.reduce(K, x[0], Axis, Keep);
  }
  static constexpr bool well_formed =
      reduce_shape(A::shape, Axis, Keep).ok() && node_base<A>::operands_well_formed;
};

template <bool TA, bool TB, class A, class B>
struct matmul_t : node_base<A, B> {
  static constexpr dtype type = A::type;
  static constexpr dims shape = matmul_shape(A::shape, B::shape, TA, TB).value;
  static constexpr int emit(builder& b, std::array<int, 2> x) {
    return b.matmul(x[0], x[1], TA, TB);
  }
  static constexpr bool well_formed = matmul_shape(A::shape, B::shape, TA, TB).ok() &&
                                      A::type == B::type && node_base<A, B>::operands_well_formed;
};

template <class A, int... P>
struct permute_t : node_base<A> {
  static constexpr dtype type = A::type;
  static constexpr dims shape = permute_shape(A::shape, std::array<int, sizeof...(P)>{P...}).value;
  static constexpr int emit(builder& b, std::array<int, 1> x) {
    return b.transpose(x[0], std::array<int, sizeof...(P)>{P...});
  }
  static constexpr bool well_formed =
      permute_shape(A::shape, std::array<int, sizeof...(P)>{P...}).ok() &&
      node_base<A>::operands_well_formed;
};

template <class A, std::int64_t... Ds>
struct reshape_t : node_base<A> {
  static constexpr dtype type = A::type;
  static constexpr dims shape = make_dims(Ds...);
  static constexpr int emit(builder& b, std::array<int, 1> x) { return b.reshape(x[0], shape); }
  static constexpr bool well_formed =
      A::shape.size() == shape.size() && node_base<A>::operands_well_formed;
};

template <class A, std::int64_t... Ds>
struct broadcast_t : node_base<A> {
  static constexpr dtype type = A::type;
  static constexpr dims shape = make_dims(Ds...);
  static constexpr int emit(builder& b, std::array<int, 1> x) { return b.broadcast(x[0], shape); }
  static constexpr bool well_formed = broadcast_shapes(A::shape, shape).ok() &&
                                      broadcast_shapes(A::shape, shape).value == shape &&
                                      node_base<A>::operands_well_formed;
};

template <class A, int Axis, std::int64_t Begin, std::int64_t End>
struct slice_t : node_base<A> {
  static constexpr dtype type = A::type;
  static constexpr dims shape = slice_shape(A::shape, Axis, Begin, End).value;
  static constexpr int emit(builder& b, std::array<int, 1> x) {
    return b.slice(x[0], Axis, Begin, End);
  }
  static constexpr bool well_formed =
      slice_shape(A::shape, Axis, Begin, End).ok() && node_base<A>::operands_well_formed;
};

template <int Axis, class... As>
struct concat_t : node_base<As...> {
  static constexpr dtype type = std::tuple_element_t<0, std::tuple<As...>>::type;
  static constexpr dims shape = [] {
    const dims parts[] = {As::shape...};
    return concat_shape(parts, int(sizeof...(As)), Axis).value;
  }();
  static constexpr int emit(builder& b, std::array<int, sizeof...(As)> x) {
    return b.concat(x, Axis);
  }
  static constexpr bool well_formed = [] {
    const dims parts[] = {As::shape...};
    const dtype types[] = {As::type...};
    for (dtype t : types)
      if (t != types[0]) return false;
    return concat_shape(parts, int(sizeof...(As)), Axis).ok();
  }() && node_base<As...>::operands_well_formed;
};

template <class T, class I>
struct gather_t : node_base<T, I> {
  static constexpr dtype type = T::type;
  static constexpr dims shape = [] {
    dims d;
    d.rank = I::shape.rank + T::shape.rank - 1;
    for (int c = 0; c < I::shape.rank; ++c) d[c] = I::shape[c];
    for (int c = 1; c < T::shape.rank; ++c) d[I::shape.rank + c - 1] = T::shape[c];
    return d;
  }();
  static constexpr int emit(builder& b, std::array<int, 2> x) { return b.gather(x[0], x[1]); }
};

template <int Axis, std::int64_t Size, class X, class S>
struct dynamic_slice_t : node_base<X, S> {
  static constexpr dtype type = X::type;
  static constexpr dims shape = [] {
    dims d = X::shape;
    d[normalize_axis(Axis, d.rank)] = Size;
    return d;
  }();
  static constexpr int emit(builder& b, std::array<int, 2> x) {
    return b.dynamic_slice(x[0], x[1], Axis, Size);
  }
};

template <int Axis, class X, class U, class S>
struct dynamic_update_slice_t : node_base<X, U, S> {
  static constexpr dtype type = X::type;
  static constexpr dims shape = X::shape;
  static constexpr int emit(builder& b, std::array<int, 3> x) {
    return b.dynamic_update_slice(x[0], x[1], x[2], Axis);
  }
};

}  // namespace expr

// ---- elementwise ----

#define FUSEDSL_UNARY(fn, kind)                                                               \
  template <expression A>                                                                     \
  constexpr auto fn(A) {                                                                      \
    (void)diag::needs_floating<is_floating(A::type), graph::op_kind::kind, A::type>{};       \
    return expr::unary_t<graph::op_kind::kind, A>{};                                          \
  }
FUSEDSL_UNARY(exp, exp)
FUSEDSL_UNARY(log, log)
FUSEDSL_UNARY(sqrt, sqrt)
FUSEDSL_UNARY(rsqrt, rsqrt)
FUSEDSL_UNARY(tanh, tanh)
FUSEDSL_UNARY(erf, erf)
FUSEDSL_UNARY(sigmoid, sigmoid)
FUSEDSL_UNARY(relu, relu)
FUSEDSL_UNARY(silu, silu)
FUSEDSL_UNARY(abs, abs)
FUSEDSL_UNARY(sin, sin)
FUSEDSL_UNARY(cos, cos)
FUSEDSL_UNARY(floor, floor)
FUSEDSL_UNARY(ceil, ceil)
FUSEDSL_UNARY(trunc, trunc)
FUSEDSL_UNARY(round, round)
FUSEDSL_UNARY(neg, neg)
#undef FUSEDSL_UNARY

// GELU, exact form: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (Hendrycks & Gimpel, 2016).
template <expression A>
constexpr auto gelu(A) {
  (void)diag::needs_floating<is_floating(A::type), graph::op_kind::gelu_erf, A::type>{};
  return expr::unary_t<graph::op_kind::gelu_erf, A>{};
}
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (same paper; GPT-2).
template <expression A>
constexpr auto gelu_tanh(A) {
  (void)diag::needs_floating<is_floating(A::type), graph::op_kind::gelu_tanh, A::type>{};
  return expr::unary_t<graph::op_kind::gelu_tanh, A>{};
}

namespace expr {
// Operators live with the node types so that argument-dependent lookup finds them.
template <expression A>
constexpr auto operator-(A a) { return fusedsl::neg(a); }

template <op_kind K, class A, class B>
constexpr auto make_binary() {
  (void)diag::cannot_broadcast<broadcast_shapes(A::shape, B::shape).ok(), K, shape_t<A>,
                               shape_t<B>>{};
  (void)diag::dtype_mismatch<weak_constant(is_weak<A>, is_weak<B>, A::type, B::type), K, A::type,
                             B::type>{};
  return binary_t<K, A, B>{};
}

template <expression A, expression B>
constexpr auto operator+(A, B) {
  return expr::make_binary<graph::op_kind::add, A, B>();
}
template <expression A, expression B>
constexpr auto operator-(A, B) {
  return expr::make_binary<graph::op_kind::sub, A, B>();
}
template <expression A, expression B>
constexpr auto operator*(A, B) {
  return expr::make_binary<graph::op_kind::mul, A, B>();
}
template <expression A, expression B>
constexpr auto operator/(A, B) {
  return expr::make_binary<graph::op_kind::div, A, B>();
}
}  // namespace expr

template <expression A, expression B>
constexpr auto max(A, B) {
  return expr::make_binary<graph::op_kind::max, A, B>();
}
template <expression A, expression B>
constexpr auto min(A, B) {
  return expr::make_binary<graph::op_kind::min, A, B>();
}
template <expression A, expression B>
constexpr auto pow(A, B) {
  return expr::make_binary<graph::op_kind::pow, A, B>();
}

// Comparisons give boolean tensors, consumed by where().
template <expression A, expression B>
constexpr auto eq(A, B) {
  return expr::make_binary<graph::op_kind::eq, A, B>();
}
template <expression A, expression B>
constexpr auto ne(A, B) {
  return expr::make_binary<graph::op_kind::ne, A, B>();
}
namespace expr {
template <expression A, expression B>
constexpr auto operator<(A, B) {
  return expr::make_binary<graph::op_kind::lt, A, B>();
}
template <expression A, expression B>
constexpr auto operator<=(A, B) {
  return expr::make_binary<graph::op_kind::le, A, B>();
}
template <expression A, expression B>
constexpr auto operator>(A, B) {
  return expr::make_binary<graph::op_kind::gt, A, B>();
}
template <expression A, expression B>
constexpr auto operator>=(A, B) {
  return expr::make_binary<graph::op_kind::ge, A, B>();
}
}  // namespace expr

// where(pred, a, b): a where pred holds, else b (NumPy's where; HLO select).
template <expression P, expression A, expression B>
constexpr auto where(P, A, B) {
  (void)diag::select_predicate<P::type == dtype::boolean, expr::shape_t<P>>{};
  constexpr shape_result ab = broadcast_shapes(A::shape, B::shape);
  (void)diag::cannot_broadcast<ab.ok() && broadcast_shapes(P::shape, ab.value).ok(),
                               graph::op_kind::select, expr::shape_t<A>, expr::shape_t<B>>{};
  (void)diag::dtype_mismatch<expr::weak_constant(expr::is_weak<A>, expr::is_weak<B>, A::type,
                                                 B::type),
                             graph::op_kind::select, A::type, B::type>{};
  return expr::select_t<P, A, B>{};
}

template <element T, expression A>
constexpr auto cast(A) { return expr::cast_t<dtype_of<T>, A>{}; }

// ---- reductions over one axis ----

namespace expr {
template <op_kind K, int Axis, bool Keep, class A>
constexpr auto make_reduce() {
  (void)diag::axis_out_of_range<axis_in_range(Axis, A::shape.rank), Axis, shape_t<A>>{};
  return reduce_t<K, Axis, Keep, A>{};
}
}  // namespace expr

template <int Axis, bool Keep = false, expression A>
constexpr auto sum(A) { return expr::make_reduce<graph::op_kind::reduce_sum, Axis, Keep, A>(); }
template <int Axis, bool Keep = false, expression A>
constexpr auto mean(A) { return expr::make_reduce<graph::op_kind::reduce_mean, Axis, Keep, A>(); }
template <int Axis, bool Keep = false, expression A>
constexpr auto max(A) { return expr::make_reduce<graph::op_kind::reduce_max, Axis, Keep, A>(); }
template <int Axis, bool Keep = false, expression A>
constexpr auto min(A) { return expr::make_reduce<graph::op_kind::reduce_min, Axis, Keep, A>(); }
// The index (i32) of the first maximum along Axis; NaN counts as the maximum (NumPy's argmax).
template <int Axis, bool Keep = false, expression A>
constexpr auto argmax(A) { return expr::make_reduce<graph::op_kind::argmax, Axis, Keep, A>(); }

// ---- data movement at run-time positions ----

// table[ids]: rows of `table` picked by i32 ids (an embedding lookup); the result is
// ids.shape ++ table.shape[1:]. Ids outside the table read its nearest row (XLA clamps them).
template <expression T, expression I>
constexpr auto gather(T, I) {
  static_assert(T::shape.rank >= 1, "gather: the table must have rank 1 or more");
  static_assert(I::type == dtype::i32, "gather: the indices must be an i32 tensor");
  static_assert(I::shape.rank + T::shape.rank - 1 <= max_rank,
                "gather: the result has more than 6 axes");
  return expr::gather_t<T, I>{};
}

// x[start : start + Size] along Axis, start an i32 scalar (a run-time position), clamped to
// [0, dim - Size] as XLA's dynamic-slice.
template <int Axis, std::int64_t Size, expression X, expression S>
constexpr auto dynamic_slice(X, S) {
  static_assert(axis_in_range(Axis, X::shape.rank), "dynamic_slice: axis out of range");
  static_assert(Size >= 1 && Size <= X::shape[normalize_axis(Axis, X::shape.rank)],
                "dynamic_slice: the size must be between 1 and the axis' length");
  static_assert(S::type == dtype::i32 && S::shape.rank == 0,
                "dynamic_slice: the start must be an i32 scalar");
  return expr::dynamic_slice_t<Axis, Size, X, S>{};
}

// x with update written at [start, start + len) along Axis (start clamped as XLA's
// dynamic-update-slice).
template <int Axis, expression X, expression U, expression S>
constexpr auto dynamic_update_slice(X, U, S) {
  static_assert(axis_in_range(Axis, X::shape.rank), "dynamic_update_slice: axis out of range");
  constexpr bool fits = [] {
    if (U::shape.rank != X::shape.rank) return false;
    const int a = normalize_axis(Axis, X::shape.rank);
    for (int c = 0; c < X::shape.rank; ++c)
      if (c == a ? U::shape[c] > X::shape[c] : U::shape[c] != X::shape[c]) return false;
    return true;
  }();
  static_assert(
      fits, "dynamic_update_slice: the update must match the operand off Axis and fit along it");
  static_assert(U::type == X::type,
                "dynamic_update_slice: the update's dtype differs from the operand's");
  static_assert(S::type == dtype::i32 && S::shape.rank == 0,
                "dynamic_update_slice: the start must be an i32 scalar");
  return expr::dynamic_update_slice_t<Axis, X, U, S>{};
}

// ---- matmul ----

// NumPy matmul over the last two axes, batch axes broadcast. TA/TB read an operand transposed.
template <bool TA = false, bool TB = false, expression A, expression B>
constexpr auto matmul(A, B) {
  constexpr bool ranks = A::shape.rank >= 2 && B::shape.rank >= 2;
  (void)diag::matmul_rank<ranks, expr::shape_t<A>, expr::shape_t<B>>{};
  if constexpr (ranks) {
    constexpr dims a = A::shape, b = B::shape;
    constexpr std::int64_t ka = TA ? a[a.rank - 2] : a[a.rank - 1];
    constexpr std::int64_t kb = TB ? b[b.rank - 1] : b[b.rank - 2];
    (void)diag::matmul_inner_dimensions<ka == kb, expr::shape_t<A>, expr::shape_t<B>>{};
    (void)diag::matmul_batch_dimensions<ka != kb || matmul_shape(a, b, TA, TB).ok(),
                                        expr::shape_t<A>, expr::shape_t<B>>{};
  }
  (void)diag::matmul_dtype<A::type == B::type, A::type, B::type>{};
  return expr::matmul_t<TA, TB, A, B>{};
}

// ---- structure ----

template <int... P, expression A>
constexpr auto permute(A) {
  (void)diag::bad_permutation<permute_shape(A::shape, std::array<int, sizeof...(P)>{P...}).ok(),
                              expr::shape_t<A>>{};
  return expr::permute_t<A, P...>{};
}

namespace expr {
template <class A, std::size_t... I>
constexpr auto swap_last_two(std::index_sequence<I...>) {
  constexpr int r = A::shape.rank;
  return permute_t<A, (int(I) < r - 2 ? int(I) : (int(I) == r - 2 ? r - 1 : r - 2))...>{};
}
}  // namespace expr

// Swap the last two axes.
template <expression A>
constexpr auto transpose(A) {
  static_assert(A::shape.rank >= 2,
                "transpose: the operand must have rank 2 or more (use permute)");
  return expr::swap_last_two<A>(std::make_index_sequence<std::size_t(A::shape.rank)>{});
}

template <std::int64_t... Ds, expression A>
constexpr auto reshape(A) {
  (void)diag::reshape_size<A::shape.size() == (std::int64_t(1) * ... * Ds), expr::shape_t<A>,
                           shape<Ds...>>{};
  return expr::reshape_t<A, Ds...>{};
}

template <std::int64_t... Ds, expression A>
constexpr auto broadcast_to(A) {
  constexpr shape_result r = broadcast_shapes(A::shape, make_dims(Ds...));
  (void)diag::broadcast_to_shape<r.ok() && r.value == make_dims(Ds...), expr::shape_t<A>,
                                 shape<Ds...>>{};
  return expr::broadcast_t<A, Ds...>{};
}

template <int Axis, std::int64_t Begin, std::int64_t End, expression A>
constexpr auto slice(A) {
  (void)diag::slice_range<slice_shape(A::shape, Axis, Begin, End).ok(), Axis, Begin, End,
                          expr::shape_t<A>>{};
  return expr::slice_t<A, Axis, Begin, End>{};
}

template <int Axis, expression... As>
constexpr auto concat(As...) {
  static_assert(sizeof...(As) >= 1 && sizeof...(As) <= graph::max_operands,
                "concat: takes 1 to 8 operands");
  constexpr bool ok = [] {
    const dims parts[] = {As::shape...};
    const dtype types[] = {As::type...};
    for (dtype t : types)
      if (t != types[0]) return false;
    return concat_shape(parts, int(sizeof...(As)), Axis).ok();
  }();
  (void)diag::concat_shapes<ok, Axis>{};
  return expr::concat_t<Axis, As...>{};
}

}  // namespace fusedsl
