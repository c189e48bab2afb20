#pragma once
// Expression types: the user's program as a type. Nodes hold structure, dtype and shape; how to
// compute them lives in the backends. Every node type has
//   operands            a type_list of its operand expression types (each named once),
//   type, shape         its dtype and static shape,
//   emit(b, ids)        appends its graph node(s) to a graph::builder, given its operands' ids.
#include <array>
#include <cstdint>
#include <limits>
#include <utility>

#include "fusedsl/core/dtype.hpp"
#include "fusedsl/core/fixed_string.hpp"
#include "fusedsl/core/shape.hpp"
#include "fusedsl/graph/builder.hpp"

namespace fusedsl {

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

namespace expr {

using graph::builder;
using graph::op_kind;

// A node whose front-door check failed is not well formed: flatten and compile then produce an
// empty program instead of more errors, so a mistake is reported once.
template <class E>
constexpr bool well_formed_of() {
  if constexpr (requires { E::well_formed; }) return E::well_formed;
  else return true;
}

template <class... Operands>
struct node_base {
  using fusedsl_expression = void;
  using operands = type_list<Operands...>;
  static constexpr bool operands_well_formed = (well_formed_of<Operands>() && ...);
};

}  // namespace expr

template <class E>
concept expression = requires { typename E::fusedsl_expression; };

namespace expr {

// dims -> shape<...>, so that diagnostics print shapes in the user's terms.
template <dims D, std::size_t... I>
constexpr shape<D.d[I]...> shape_of_dims_impl(std::index_sequence<I...>) { return {}; }
template <dims D>
struct shape_of_dims {
  using type = decltype(shape_of_dims_impl<D>(std::make_index_sequence<std::size_t(D.rank)>{}));
};
template <expression E>
using shape_t = typename shape_of_dims<E::shape>::type;

// ---- leaves ----

template <fixed_string Name, element T, std::int64_t... Ds>
struct input_t : node_base<> {
  static_assert(Name.size() > 0, "input: the name must not be empty");
  static constexpr dtype type = dtype_of<T>;
  static constexpr dims shape = make_dims(Ds...);
  static constexpr int emit(builder& b, std::array<int, 0>) {
    return b.input(Name.view(), type, shape);
  }
};

template <fixed_string Name, element T, std::int64_t... Ds>
struct param_t : node_base<> {
  static_assert(Name.size() > 0, "param: the name must not be empty");
  static constexpr dtype type = dtype_of<T>;
  static constexpr dims shape = make_dims(Ds...);
  static constexpr int emit(builder& b, std::array<int, 0>) {
    return b.param(Name.view(), type, shape);
  }
};

// A tensor the executor keeps from one call to the next (a KV cache), zero at construction; a
// program gives it a new value with fd::update.
template <fixed_string Name, element T, std::int64_t... Ds>
struct state_t : node_base<> {
  static_assert(Name.size() > 0, "state: the name must not be empty");
  static constexpr dtype type = dtype_of<T>;
  static constexpr dims shape = make_dims(Ds...);
  static constexpr int emit(builder& b, std::array<int, 0>) {
    return b.state(Name.view(), type, shape);
  }
};

// A compile-time scalar. Weakly typed: it takes the dtype of the tensor it meets.
template <double V>
struct constant_t : node_base<> {
  static constexpr dtype type = dtype::f32;
  static constexpr dims shape{};
  static constexpr bool weak = true;
  static constexpr double value = V;
  static constexpr int emit(builder& b, std::array<int, 0>) { return b.constant(V); }
};

// Indices along `Axis` of a tensor of the given shape (for masks).
template <element T, int Axis, std::int64_t... Ds>
struct iota_t : node_base<> {
  static_assert(axis_in_range(Axis, int(sizeof...(Ds))), "iota: axis out of range");
  static constexpr dtype type = dtype_of<T>;
  static constexpr dims shape = make_dims(Ds...);
  static constexpr int emit(builder& b, std::array<int, 0>) { return b.iota(type, shape, Axis); }
};

// The input of a block body (see nn::stack). Emitted by the flattener, never by itself.
template <dtype T, dims S>
struct placeholder_t : node_base<> {
  static constexpr dtype type = T;
  static constexpr dims shape = S;
};

}  // namespace expr

// ---- leaf factories (the user's vocabulary) ----

template <fixed_string Name, element T, std::int64_t... Ds>
constexpr expr::input_t<Name, T, Ds...> input() { return {}; }

template <fixed_string Name, element T, std::int64_t... Ds>
constexpr expr::param_t<Name, T, Ds...> param() { return {}; }

template <fixed_string Name, element T, std::int64_t... Ds>
constexpr expr::state_t<Name, T, Ds...> state() { return {}; }

template <double V>
constexpr expr::constant_t<V> constant() { return {}; }

// fd::lit<0.5> is the scalar 0.5 (a variable template, so it reads like a literal).
template <double V>
inline constexpr expr::constant_t<V> lit{};

inline constexpr expr::constant_t<std::numeric_limits<double>::infinity()> inf{};
inline constexpr expr::constant_t<-std::numeric_limits<double>::infinity()> neg_inf{};

template <element T, int Axis, std::int64_t... Ds>
constexpr expr::iota_t<T, Axis, Ds...> iota() { return {}; }

}  // namespace fusedsl
