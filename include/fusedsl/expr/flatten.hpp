#pragma once
// expr::flatten: expression types -> the constexpr node table (graph::graph).
//
// The walk is memoised per type: topo<T> lists the distinct subexpression types of T, operands
// first, and each class template instance is made once by the compiler, so a DAG whose tree form
// is exponential (x feeding q, k, v and the residual) costs time linear in its distinct nodes.
// The node table is then filled by ordinary constexpr code over that list.
#include <array>
#include <cstddef>

#include "fusedsl/expr/expression.hpp"
#include "fusedsl/graph/prune.hpp"
#include "fusedsl/graph/sink_slices.hpp"

namespace fusedsl {
namespace expr {

using graph::builder;
using graph::prune;

namespace detail {

template <class T, class L> inline constexpr bool contains = false;
template <class T, class... Ls>
inline constexpr bool contains<T, type_list<Ls...>> = (__is_same(T, Ls) || ...);

template <class L, class T> struct push_unique;
template <class... Ls, class T> struct push_unique<type_list<Ls...>, T> {
  using type =
      std::conditional_t<contains<T, type_list<Ls...>>, type_list<Ls...>, type_list<Ls..., T>>;
};

template <class L, class M> struct merge;
template <class L> struct merge<L, type_list<>> { using type = L; };
template <class L, class M0, class... Ms> struct merge<L, type_list<M0, Ms...>> {
  using type = typename merge<typename push_unique<L, M0>::type, type_list<Ms...>>::type;
};

template <class... Lists> struct merge_all { using type = type_list<>; };
template <class L0, class... Ls> struct merge_all<L0, Ls...> {
  using type = typename merge<L0, typename merge_all<Ls...>::type>::type;
};

template <class T, class Operands = typename T::operands> struct topo;
template <class T, class... Os> struct topo<T, type_list<Os...>> {
  using type = typename push_unique<typename merge_all<typename topo<Os>::type...>::type, T>::type;
};

template <class T, class L> struct index_of;
template <class T, class... Ls> struct index_of<T, type_list<Ls...>> {
  static constexpr std::size_t value = [] {
    constexpr bool same[] = {__is_same(T, Ls)...};
    for (std::size_t i = 0; i < sizeof...(Ls); ++i)
      if (same[i]) return i;
    return sizeof...(Ls);
  }();
};

template <class T> inline constexpr bool is_placeholder = false;
template <dtype D, dims S> inline constexpr bool is_placeholder<expr::placeholder_t<D, S>> = true;

// Emit every type of `Order` into b; placeholders map to `placeholder_id`.
template <class Order> struct emitter;
template <class... Ts> struct emitter<type_list<Ts...>> {
  using order = type_list<Ts...>;

  template <class T, class... Os>
  static constexpr int emit_one(builder& b, const std::array<int, sizeof...(Ts) + 1>& ids,
                                int placeholder_id, type_list<Os...>) {
    if constexpr (is_placeholder<T>) {
      if (placeholder_id < 0) graph::fail("graph: a placeholder outside a block body");
      return placeholder_id;
    } else {
      return T::emit(b, std::array<int, sizeof...(Os)>{ids[index_of<Os, order>::value]...});
    }
  }

  static constexpr std::array<int, sizeof...(Ts) + 1> run(builder& b, int placeholder_id = -1) {
    std::array<int, sizeof...(Ts) + 1> ids{};
    std::size_t i = 0;
    ((ids[i++] = emit_one<Ts>(b, ids, placeholder_id, typename Ts::operands{})), ...);
    return ids;
  }
};

}  // namespace detail

// Append the nodes of expression type E to b (placeholders -> placeholder_id); returns E's id.
template <expression E>
constexpr int emit_expression(builder& b, int placeholder_id = -1) {
  using order = typename detail::topo<E>::type;
  const auto ids = detail::emitter<order>::run(b, placeholder_id);
  return ids[detail::index_of<E, order>::value];
}

// An output that is the new value of a state (fd::update): compiled like any output, written into
// the state's memory instead of the caller's.
template <class S, class V>
struct update_t {
  using fusedsl_expression = void;
  using operands = type_list<S, V>;
  using state_type = S;
  using value_type = V;
  static constexpr dtype type = V::type;
  static constexpr dims shape = V::shape;
};
template <class E> inline constexpr bool is_update = false;
template <class S, class V> inline constexpr bool is_update<update_t<S, V>> = true;

template <class E>
constexpr void emit_output(builder& b) {
  if constexpr (is_update<E>) {
    const int v = emit_expression<typename E::value_type>(b);
    b.mark_output(v, emit_expression<typename E::state_type>(b));
  } else {
    b.mark_output(emit_expression<E>(b));
  }
}

template <expression... Outs>
struct flattened {
  static_assert(sizeof...(Outs) >= 1, "flatten: needs at least one output");
  // A program with a failed front-door check flattens to an empty table (the check has already
  // said what is wrong; building it would only add errors).
  static constexpr bool well_formed = (expr::well_formed_of<Outs>() && ...);
  static constexpr void build(builder& b) {
    if constexpr (well_formed) {
      (emit_output<Outs>(b), ...);
      prune(b);
      graph::sink_slices(b);
    }
  }
  static constexpr std::size_t size = [] {
    builder b;
    build(b);
    return b.nodes.size();
  }();
  static constexpr graph::graph<size> value = [] {
    builder b;
    build(b);
    return b.template freeze<size>();
  }();
};

}  // namespace expr

// `state` takes `value` as its value after the call: an output of the program that the executor
// writes into the state's memory. A value that is dynamic_update_slice(state, ...) writes only its
// window there.
template <class S, class V>
  requires expression<S> && expression<V>
constexpr expr::update_t<S, V> update(S, V) {
  static_assert(S::shape == V::shape && S::type == V::type,
                "update: the new value differs from the state in shape or dtype");
  return {};
}

// The node table of one or more outputs: merged, pruned, topologically ordered.
template <expression... Outs>
constexpr const auto& flatten(Outs...) { return expr::flattened<Outs...>::value; }

}  // namespace fusedsl
