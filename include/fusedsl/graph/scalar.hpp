#pragma once
// The op table's bodies (graph/ops.hpp) on one f32 value, with the C library's functions: what the
// CPU interpreter and the kernels' one-lane tails compute. The reference backend keeps formulas of
// its own (backend/reference/kernels.hpp).
#include <cmath>
#include <stdexcept>
#include <string>

#include "fusedsl/graph/node.hpp"

namespace fusedsl::graph::scalar {

// maximum/minimum propagate NaN, as XLA's do.
inline float nan_max(float x, float y) { return (x != x || y != y) ? x + y : (x > y ? x : y); }
inline float nan_min(float x, float y) { return (x != x || y != y) ? x + y : (x < y ? x : y); }

// The primitives of the op table for one float lane.
struct math {
  static float neg(float x) { return -x; }
  static float abs(float x) { return std::fabs(x); }
  static float exp(float x) { return std::exp(x); }
  static float log(float x) { return std::log(x); }
  static float sqrt(float x) { return std::sqrt(x); }
  static float tanh(float x) { return std::tanh(x); }
  static float erf(float x) { return std::erf(x); }
  static float erfc(float x) { return std::erfc(x); }
  static float sin(float x) { return std::sin(x); }
  static float cos(float x) { return std::cos(x); }
  static float floor(float x) { return std::floor(x); }
  static float ceil(float x) { return std::ceil(x); }
  static float trunc(float x) { return std::trunc(x); }
  // nearbyint rounds in the current rounding mode: to nearest, ties to even, unless a caller
  // changed it (fesetround), as every kernel of the library assumes.
  static float round_even(float x) { return std::nearbyint(x); }
  static float pow(float x, float y) { return std::pow(x, y); }
  static float max(float x, float y) { return nan_max(x, y); }
  static float min(float x, float y) { return nan_min(x, y); }
  static float eq(float x, float y) { return x == y ? 1.0f : 0.0f; }
  static float ne(float x, float y) { return x != y ? 1.0f : 0.0f; }
  static float lt(float x, float y) { return x < y ? 1.0f : 0.0f; }
  static float le(float x, float y) { return x <= y ? 1.0f : 0.0f; }
  static float select(float p, float a, float b) { return p != 0.0f ? a : b; }
};

inline float unary(op_kind k, float x) {
  if (!is_unary(k) && k != op_kind::cast)
    throw std::invalid_argument(std::string("not a unary op: ") + std::string(name_of(k)));
  return visit_op(k, [&](auto c) -> float {
    using T = op_traits<decltype(c)::value>;
    if constexpr (is_unary(decltype(c)::value) || decltype(c)::value == op_kind::cast)
      return T::template apply<math>(x);
    else
      return 0.0f;
  });
}

// IEEE comparisons: every one but ne is false when an operand is NaN.
inline bool compare(op_kind k, float x, float y) {
  if (!is_compare(k))
    throw std::invalid_argument(std::string("not a comparison: ") + std::string(name_of(k)));
  return visit_op(k, [&](auto c) -> float {
    if constexpr (is_compare(decltype(c)::value))
      return op_traits<decltype(c)::value>::template apply<math>(x, y);
    else
      return 0.0f;
  }) != 0.0f;
}

// A binary op or a comparison (1 or 0).
inline float binary(op_kind k, float x, float y) {
  if (!is_binary(k) && !is_compare(k))
    throw std::invalid_argument(std::string("not a binary op: ") + std::string(name_of(k)));
  return visit_op(k, [&](auto c) -> float {
    constexpr op_kind K = decltype(c)::value;
    if constexpr (is_binary(K) || is_compare(K))
      return op_traits<K>::template apply<math>(x, y);
    else
      return 0.0f;
  });
}

}  // namespace fusedsl::graph::scalar
