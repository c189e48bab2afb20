#pragma once
// The op table: what fusedsl knows about each op kind, in one place.
//
// FUSEDSL_OPS lists every op kind once with its metadata (name, category, arity, HLO opcode,
// whether it may sit in a GEMM or row epilogue); op_kind, name_of and the category predicates are
// generated from it. op_traits<K> adds the op's body for the computed categories: one generic
// function over a math policy M and a value type V,
//
//   unary    template <class M, class V> static V apply(const V& x)
//   binary   template <class M, class V> static V apply(const V& x, const V& y)
//   compare  template <class M, class V> static V apply(const V& x, const V& y)   (1 or 0)
//   select   template <class M, class V> static V apply(const V& p, const V& a, const V& b)
//   reduce   identity<M, V>(), combine<M>(acc, x), finish<M>(acc, length)
//
// instantiated with the scalar policy (graph/scalar.hpp: float and the C library), with the CPU
// kernels' policy (backend/cpu/kernels/vec_math.hpp: xsimd batches and kernels/vmath.hpp) and with
// the CUDA device policy (backend/cuda/device_math.cuh). A body is the op's definition in
// primitives; a policy that has a tuned form of a whole op (M::gelu_tanh, ...) provides it and the
// body uses it (`if constexpr (requires ...)`). Booleans are carried in values as 1 and 0.
// The reference backend does not use these bodies: it keeps formulas of its own (std:: and Eigen),
// so that comparing a backend with it compares two implementations.
//
// Adding an op: docs/ops.md, "Adding an op".
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "fusedsl/core/config.hpp"

namespace fusedsl::graph {

enum class op_category : std::uint8_t {
  leaf,     // input, param, state, constant, iota, placeholder
  unary,    // elementwise, one operand
  binary,   // elementwise, two operands (NumPy broadcasting)
  compare,  // elementwise, two operands, boolean result
  select,   // elementwise, where(pred, a, b)
  cast,     // elementwise dtype conversion
  reduce,   // one axis reduced
  matmul,   // batched matrix product over the last two axes
  layout,   // data movement: transpose, reshape, slice, concat, broadcast
  index,    // data movement at run-time positions: gather, dynamic_slice, dynamic_update_slice
  row,      // row composites over one axis (softmax, log_softmax, layernorm, rmsnorm)
  repeat,   // a block body applied `count` times
};

// id, category, arity (-1: variadic), HLO opcode ("composite": the exporter writes the op as
// several instructions; "": no HLO mapping), its place in a GEMM or row group's epilogue (none;
// member: any elementwise epilogue; activation: also one of the activations the GEMM's standard
// epilogue compiles in, cpu::kernels::gemm_epilogue::act).
enum class op_epilogue : std::uint8_t { none, member, activation };

#define FUSEDSL_OPS(X)                                            \
  X(input, leaf, 0, "parameter", none)                            \
  X(param, leaf, 0, "parameter", none)                            \
  X(constant, leaf, 0, "constant", none)                          \
  X(iota, leaf, 0, "iota", none)                                  \
  X(placeholder, leaf, 0, "parameter", none)                      \
  X(state, leaf, 0, "parameter", none)                            \
  X(neg, unary, 1, "negate", member)                              \
  X(abs, unary, 1, "abs", member)                                 \
  X(exp, unary, 1, "exponential", member)                         \
  X(log, unary, 1, "log", member)                                 \
  X(sqrt, unary, 1, "sqrt", member)                               \
  X(rsqrt, unary, 1, "rsqrt", member)                             \
  X(tanh, unary, 1, "tanh", activation)                           \
  X(erf, unary, 1, "erf", member)                                 \
  X(sigmoid, unary, 1, "logistic", activation)                    \
  X(relu, unary, 1, "composite", activation)                      \
  X(gelu_erf, unary, 1, "composite", activation)                  \
  X(gelu_tanh, unary, 1, "composite", activation)                 \
  X(silu, unary, 1, "composite", activation)                      \
  X(sin, unary, 1, "sine", member)                                \
  X(cos, unary, 1, "cosine", member)                              \
  X(floor, unary, 1, "floor", member)                             \
  X(ceil, unary, 1, "ceil", member)                               \
  X(trunc, unary, 1, "composite", member)                         \
  X(round, unary, 1, "round-nearest-even", member)                \
  X(add, binary, 2, "add", member)                                \
  X(sub, binary, 2, "subtract", member)                           \
  X(mul, binary, 2, "multiply", member)                           \
  X(div, binary, 2, "divide", member)                             \
  X(max, binary, 2, "maximum", member)                            \
  X(min, binary, 2, "minimum", member)                            \
  X(pow, binary, 2, "power", member)                              \
  X(eq, compare, 2, "compare", member)                            \
  X(ne, compare, 2, "compare", member)                            \
  X(lt, compare, 2, "compare", member)                            \
  X(le, compare, 2, "compare", member)                            \
  X(gt, compare, 2, "compare", member)                            \
  X(ge, compare, 2, "compare", member)                            \
  X(select, select, 3, "select", member)                          \
  X(cast, cast, 1, "convert", member)                             \
  X(reduce_sum, reduce, 1, "reduce", none)                        \
  X(reduce_mean, reduce, 1, "composite", none)                    \
  X(reduce_max, reduce, 1, "reduce", none)                        \
  X(reduce_min, reduce, 1, "reduce", none)                        \
  X(argmax, reduce, 1, "composite", none)                         \
  X(matmul, matmul, 2, "dot", none)                               \
  X(transpose, layout, 1, "transpose", none)                      \
  X(reshape, layout, 1, "reshape", none)                          \
  X(slice, layout, 1, "slice", none)                              \
  X(concat, layout, -1, "concatenate", none)                      \
  X(broadcast, layout, 1, "broadcast", none)                      \
  X(gather, index, 2, "gather", none)                             \
  X(dynamic_slice, index, 2, "dynamic-slice", none)               \
  X(dynamic_update_slice, index, 3, "dynamic-update-slice", none) \
  X(softmax, row, 1, "composite", none)                           \
  X(log_softmax, row, 1, "composite", none)                       \
  X(layernorm, row, -1, "composite", none)                        \
  X(rmsnorm, row, 2, "composite", none)                           \
  X(repeat, repeat, 1, "composite", none)

enum class op_kind : std::uint8_t {
#define FUSEDSL_X(id, cat, arity, hlo, epi) id,
  FUSEDSL_OPS(FUSEDSL_X)
#undef FUSEDSL_X
};

inline constexpr std::size_t op_count = 0
#define FUSEDSL_X(id, cat, arity, hlo, epi) +1
    FUSEDSL_OPS(FUSEDSL_X)
#undef FUSEDSL_X
    ;

// The metadata of one op kind, as FUSEDSL_OPS gives it.
struct op_info {
  op_kind kind;
  std::string_view name;
  op_category category;
  int arity;
  std::string_view hlo;
  op_epilogue epilogue;
};

inline constexpr op_info op_infos[] = {
#define FUSEDSL_X(id, cat, arity, hlo, epi) \
  {op_kind::id, #id, op_category::cat, arity, hlo, op_epilogue::epi},
    FUSEDSL_OPS(FUSEDSL_X)
#undef FUSEDSL_X
};

constexpr const op_info& info_of(op_kind k) { return op_infos[std::size_t(k)]; }
constexpr std::string_view name_of(op_kind k) { return info_of(k).name; }
constexpr op_category category_of(op_kind k) { return info_of(k).category; }

constexpr bool is_leaf(op_kind k) { return category_of(k) == op_category::leaf; }
constexpr bool is_unary(op_kind k) { return category_of(k) == op_category::unary; }
constexpr bool is_binary(op_kind k) { return category_of(k) == op_category::binary; }
constexpr bool is_compare(op_kind k) { return category_of(k) == op_category::compare; }
constexpr bool is_reduce(op_kind k) { return category_of(k) == op_category::reduce; }
constexpr bool is_row_composite(op_kind k) { return category_of(k) == op_category::row; }
constexpr bool is_layout(op_kind k) { return category_of(k) == op_category::layout; }
constexpr bool is_index(op_kind k) { return category_of(k) == op_category::index; }
// Elementwise: each output element depends on the same-index (broadcast) elements of the operands.
constexpr bool is_elementwise(op_kind k) {
  const op_category c = category_of(k);
  return c == op_category::unary || c == op_category::binary || c == op_category::compare ||
         c == op_category::select || c == op_category::cast;
}
// May be a member of a GEMM or row group's epilogue (computed on the tile in registers).
constexpr bool may_be_epilogue(op_kind k) { return info_of(k).epilogue != op_epilogue::none; }
// One of the activations the CPU GEMM's standard epilogue compiles in (relu, the GELUs, silu,
// sigmoid, tanh; cpu::kernels::with_standard_epilogue).
constexpr bool is_gemm_activation(op_kind k) {
  return info_of(k).epilogue == op_epilogue::activation;
}
// Has an HLO lowering (one opcode, or a composite the exporter writes).
constexpr bool has_hlo_lowering(op_kind k) { return !info_of(k).hlo.empty(); }

// ---- bodies ----

// op_traits<K>: the body of K (see the top of this file); leaves, layout ops, matmul, row
// composites and repeat have none (their kernels are specialised).
template <op_kind K>
struct op_traits {
  static constexpr bool has_body = false;
};

namespace detail {
template <op_kind K>
struct body_base {
  static constexpr bool has_body = true;
  static constexpr op_kind kind = K;
};
// V(c) for a policy's value type (a float, an xsimd batch, a device float).
template <class V>
constexpr V splat(double c) {
  return V(float(c));
}
// x / y by the policy's division where it has one (M::div), else by V's operator/.
template <class M, class V>
FUSEDSL_HD constexpr V quot(const V& x, const V& y) {
  if constexpr (requires { M::div(x, y); })
    return M::div(x, y);
  else
    return x / y;
}
}  // namespace detail

#define FUSEDSL_UNARY_BODY(id, expr)                 \
  template <>                                        \
  struct op_traits<op_kind::id> : detail::body_base<op_kind::id> { \
    template <class M, class V>                      \
    FUSEDSL_HD static V apply(const V& x) {          \
      if constexpr (requires { M::id(x); })          \
        return M::id(x);                             \
      else                                           \
        return expr;                                 \
    }                                                \
  };
#define FUSEDSL_BINARY_BODY(id, expr)                \
  template <>                                        \
  struct op_traits<op_kind::id> : detail::body_base<op_kind::id> { \
    template <class M, class V>                      \
    FUSEDSL_HD static V apply(const V& x, const V& y) { \
      if constexpr (requires { M::id(x, y); })       \
        return M::id(x, y);                          \
      else                                           \
        return expr;                                 \
    }                                                \
  };

using detail::quot;
using detail::splat;

// Primitives every policy provides: neg, abs, exp, log, sqrt, tanh, erf, erfc, sin, cos, floor,
// ceil, trunc, round_even (to the nearest integer, ties to even; each of the four keeps NaN, ±inf
// and the sign of zero), max, min (both NaN-propagating, as XLA's), pow, the comparisons, select.
FUSEDSL_UNARY_BODY(neg, M::neg(x))
FUSEDSL_UNARY_BODY(abs, M::abs(x))
FUSEDSL_UNARY_BODY(exp, M::exp(x))
FUSEDSL_UNARY_BODY(log, M::log(x))
FUSEDSL_UNARY_BODY(sqrt, M::sqrt(x))
FUSEDSL_UNARY_BODY(rsqrt, quot<M>(splat<V>(1.0), M::sqrt(x)))
FUSEDSL_UNARY_BODY(tanh, M::tanh(x))
FUSEDSL_UNARY_BODY(erf, M::erf(x))
FUSEDSL_UNARY_BODY(sigmoid, quot<M>(splat<V>(1.0), splat<V>(1.0) + M::exp(M::neg(x))))
// relu keeps NaN (NaN < 0 is false) and maps -inf to 0.
FUSEDSL_UNARY_BODY(relu, M::select(M::lt(x, splat<V>(0.0)), splat<V>(0.0), x))
// Both GELUs in forms that do not cancel for negative x, where 1 + erf and 1 + tanh lose every
// digit of a small result (6.5e5 and 4.8e6 ulp at x = -5 in float): x/2 (1 + erf(x / sqrt 2)) =
// x/2 erfc(-x / sqrt 2) (Hendrycks & Gimpel, 2016, eq. 1), and x/2 (1 + tanh(u)) = x / (1 +
// e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3) (the same paper, sec. 2; GPT-2).
// At -inf all three are 0, the limit (x times a factor that vanishes faster), not the NaN of
// -inf * 0; gelu_tanh is 0 once its exp would overflow (x below about -9.5, where its exact value
// is below 2e-34 in magnitude).
FUSEDSL_UNARY_BODY(gelu_erf,
                   M::select(M::eq(x, splat<V>(-std::numeric_limits<double>::infinity())),
                             splat<V>(0.0),
                             splat<V>(0.5) * x * M::erfc(x * splat<V>(-0.70710678118654752))))
FUSEDSL_UNARY_BODY(gelu_tanh,
                   M::select(M::lt(x, splat<V>(-9.5)), splat<V>(0.0),
                             quot<M>(x, splat<V>(1.0) +
                                            M::exp(splat<V>(-2.0 * 0.79788456080286536) *
                                                   (x + splat<V>(0.044715) * x * x * x)))))
FUSEDSL_UNARY_BODY(silu, M::select(M::eq(x, splat<V>(-std::numeric_limits<double>::infinity())),
                                   splat<V>(0.0), quot<M>(x, splat<V>(1.0) + M::exp(M::neg(x)))))
FUSEDSL_UNARY_BODY(sin, M::sin(x))
FUSEDSL_UNARY_BODY(cos, M::cos(x))
FUSEDSL_UNARY_BODY(floor, M::floor(x))
FUSEDSL_UNARY_BODY(ceil, M::ceil(x))
FUSEDSL_UNARY_BODY(trunc, M::trunc(x))
// round: half to even (IEEE 754 roundTiesToEven, XLA's round-nearest-even, NumPy's round), not
// C's round (half away from zero).
FUSEDSL_UNARY_BODY(round, M::round_even(x))

FUSEDSL_BINARY_BODY(add, x + y)
FUSEDSL_BINARY_BODY(sub, x - y)
FUSEDSL_BINARY_BODY(mul, x * y)
FUSEDSL_BINARY_BODY(div, x / y)
FUSEDSL_BINARY_BODY(max, M::max(x, y))
FUSEDSL_BINARY_BODY(min, M::min(x, y))
FUSEDSL_BINARY_BODY(pow, M::pow(x, y))
// IEEE comparisons: every one but ne is false when an operand is NaN.
FUSEDSL_BINARY_BODY(eq, M::eq(x, y))
FUSEDSL_BINARY_BODY(ne, M::ne(x, y))
FUSEDSL_BINARY_BODY(lt, M::lt(x, y))
FUSEDSL_BINARY_BODY(le, M::le(x, y))
FUSEDSL_BINARY_BODY(gt, M::lt(y, x))
FUSEDSL_BINARY_BODY(ge, M::le(y, x))
#undef FUSEDSL_UNARY_BODY
#undef FUSEDSL_BINARY_BODY

template <>
struct op_traits<op_kind::select> : detail::body_base<op_kind::select> {
  template <class M, class V>
  FUSEDSL_HD static V apply(const V& p, const V& a, const V& b) {
    return M::select(M::ne(p, splat<V>(0.0)), a, b);
  }
};

// A cast between carried values changes nothing but the stored type: values are carried in f32
// (integers exactly below 2^24), and the store rounds to the destination dtype.
template <>
struct op_traits<op_kind::cast> : detail::body_base<op_kind::cast> {
  template <class M, class V>
  FUSEDSL_HD static V apply(const V& x) {
    return x;
  }
};

// Reductions: acc = identity; acc = combine(acc, x) over the axis; result = finish(acc, length).
template <op_kind K>
struct reduce_body : detail::body_base<K> {
  template <class M, class V>
  FUSEDSL_HD static V identity() {
    if constexpr (K == op_kind::reduce_max)
      return splat<V>(-std::numeric_limits<double>::infinity());
    else if constexpr (K == op_kind::reduce_min)
      return splat<V>(std::numeric_limits<double>::infinity());
    else
      return splat<V>(0.0);
  }
  template <class M, class V>
  FUSEDSL_HD static V combine(const V& acc, const V& x) {
    if constexpr (K == op_kind::reduce_max)
      return M::max(acc, x);
    else if constexpr (K == op_kind::reduce_min)
      return M::min(acc, x);
    else
      return acc + x;
  }
  template <class M, class V>
  FUSEDSL_HD static V finish(const V& acc, std::int64_t length) {
    if constexpr (K == op_kind::reduce_mean)
      return quot<M>(acc, splat<V>(double(length)));
    else
      return acc;
  }
};
template <>
struct op_traits<op_kind::reduce_sum> : reduce_body<op_kind::reduce_sum> {};
template <>
struct op_traits<op_kind::reduce_mean> : reduce_body<op_kind::reduce_mean> {};
template <>
struct op_traits<op_kind::reduce_max> : reduce_body<op_kind::reduce_max> {};
template <>
struct op_traits<op_kind::reduce_min> : reduce_body<op_kind::reduce_min> {};
// argmax: the index of the first maximum along the axis (NaN counts as the maximum, the first NaN
// wins, as NumPy's). A kernel carries (best value, its index): take(x, best) says whether x
// replaces best as it meets x at a later index.
template <>
struct op_traits<op_kind::argmax> : detail::body_base<op_kind::argmax> {
  template <class M, class V>
  static V take(const V& x, const V& best) {
    // x > best, or x is NaN and best is not
    return M::select(
        M::lt(best, x), splat<V>(1.0),
        M::select(M::ne(x, x), M::select(M::ne(best, best), splat<V>(0.0), splat<V>(1.0)),
                  splat<V>(0.0)));
  }
};

// A computed op: an elementwise, cast or reduce row, which has a body.
constexpr bool is_computed(op_kind k) {
  const op_category c = category_of(k);
  return c == op_category::unary || c == op_category::binary || c == op_category::compare ||
         c == op_category::select || c == op_category::cast || c == op_category::reduce;
}

// The table's computed ops.
constexpr int computed_ops() {
  int n = 0;
  for (const op_info& o : op_infos) n += is_computed(o.kind);
  return n;
}

// Every computed elementwise and reduce kind has a body; every table row names its own kind.
namespace detail {
template <std::size_t... I>
constexpr bool table_complete(std::index_sequence<I...>) {
  constexpr op_kind kinds[] = {op_kind(I)...};
  for (std::size_t i = 0; i < sizeof...(I); ++i) {
    if (op_infos[i].kind != kinds[i]) return false;
    const bool bodies[] = {op_traits<op_kind(I)>::has_body...};
    if (is_computed(kinds[i]) != bodies[i]) return false;
  }
  return true;
}

// 1 when K is computed and its body instantiates with policy M on values of type V (a primitive
// M lacks stops the build here, the error naming op_traits<op_kind::...> and M); 0 otherwise.
template <class M, class V, op_kind K>
constexpr int body_on() {
  using T = op_traits<K>;
  if constexpr (K == op_kind::argmax) {
    (void)&T::template take<M, V>;
  } else if constexpr (category_of(K) == op_category::reduce) {
    (void)&T::template identity<M, V>;
    (void)&T::template combine<M, V>;
    (void)&T::template finish<M, V>;
  } else if constexpr (T::has_body) {
    (void)&T::template apply<M, V>;
  } else {
    return 0;
  }
  return 1;
}
template <class M, class V, std::size_t... I>
constexpr int bodies_on(std::index_sequence<I...>) {
  return (body_on<M, V, op_kind(I)>() + ...);
}
}  // namespace detail

// How many computed ops math policy M (graph/scalar.hpp, the CPU kernels' vec_math, CUDA's
// device_math) has the body of, for values of type V; every body is instantiated, so a primitive
// M lacks is a compile error naming the op and M. A complete policy gives computed_ops().
template <class M, class V>
constexpr int bodies_on() {
  return detail::bodies_on<M, V>(std::make_index_sequence<op_count>{});
}
static_assert(detail::table_complete(std::make_index_sequence<op_count>{}),
              "graph::op_traits: every elementwise and reduce op needs a body, and only those");

// Calls f(std::integral_constant<op_kind, K>{}) for the K == k (run-time dispatch onto the
// compile-time bodies, for the interpreter and other run-time code).
template <class F>
constexpr decltype(auto) visit_op(op_kind k, F&& f) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) -> decltype(auto) {
    using R = decltype(f(std::integral_constant<op_kind, op_kind(0)>{}));
    if constexpr (std::is_void_v<R>) {
      ((std::size_t(k) == I ? (f(std::integral_constant<op_kind, op_kind(I)>{}), true) : false) ||
       ...);
    } else {
      R r{};
      ((std::size_t(k) == I ? (r = f(std::integral_constant<op_kind, op_kind(I)>{}), true)
                            : false) ||
       ...);
      return r;
    }
  }(std::make_index_sequence<op_count>{});
}

}  // namespace fusedsl::graph
