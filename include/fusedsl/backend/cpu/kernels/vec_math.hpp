#pragma once
// The CPU kernels' math policy for the op table (graph/ops.hpp): the table's primitives on one
// float lane and on xsimd batches (same names, overloads), with the tuned whole-op forms of
// vmath.hpp (GELUs, SiLU, sigmoid, ReLU) where the table's body would be slower. Every CPU kernel
// computes an elementwise op through graph::op_traits<K>::apply<vec_math>, so the GEMM and row
// epilogues, the loop and reduce kernels and their one-lane tails agree with each other.
#include <cmath>
#include <limits>

#include "fusedsl/backend/cpu/kernels/simd.hpp"
#include "fusedsl/backend/cpu/kernels/vmath.hpp"
#include "fusedsl/graph/ops.hpp"

namespace fusedsl::cpu::kernels {

namespace detail {
inline float log_of(float x) { return std::log(x); }
template <class A>
xsimd::batch<float, A> log_of(const xsimd::batch<float, A>& x) {
  return xsimd::log(x);
}
inline float pow_of(float x, float y) { return std::pow(x, y); }
// xsimd::pow with the special cases of C's pow (C11 F.10.4.4), which xsimd 8 gets wrong: x ** +-0
// and 1 ** y are 1 (NaN operands included), (-1) ** +-inf is 1, (-inf) ** y is +-inf or +-0 by
// the sign and parity of y, +-0 ** NaN is NaN and +-0 ** y for y < 0 is +-inf.
template <class A>
xsimd::batch<float, A> pow_of(const xsimd::batch<float, A>& x, const xsimd::batch<float, A>& y) {
  using B = xsimd::batch<float, A>;
  const B inf(std::numeric_limits<float>::infinity());
  const auto odd = (xsimd::trunc(y) == y) & (xsimd::trunc(y * B(0.5f)) * B(2.0f) != y);
  B r = xsimd::pow(x, y);
  r = xsimd::select((x == -inf) & (y > B(0.0f)), xsimd::select(odd, -inf, inf), r);
  r = xsimd::select((x == -inf) & (y < B(0.0f)), xsimd::select(odd, B(-0.0f), B(0.0f)), r);
  r = xsimd::select((x == B(0.0f)) & xsimd::isnan(y), y, r);
  r = xsimd::select((x == B(0.0f)) & (y < B(0.0f)),
                    xsimd::select(odd, xsimd::copysign(inf, x), inf), r);
  const auto one = (y == B(0.0f)) | (x == B(1.0f)) | ((x == B(-1.0f)) & (xsimd::abs(y) == inf));
  return xsimd::select(one, B(1.0f), r);
}
inline float sin_of(float x) { return std::sin(x); }
template <class A>
xsimd::batch<float, A> sin_of(const xsimd::batch<float, A>& x) {
  return xsimd::sin(x);
}
inline float cos_of(float x) { return std::cos(x); }
template <class A>
xsimd::batch<float, A> cos_of(const xsimd::batch<float, A>& x) {
  return xsimd::cos(x);
}
// trunc, floor and ceil with x's sign put back: a result has x's sign whenever it is 0
// (trunc(-0.7) = floor(-0) = ceil(-0.3) = -0), which xsimd's SSE2 forms (a conversion to int and
// back, then a correction) lose.
inline float trunc_of(float x) { return std::trunc(x); }
template <class A>
xsimd::batch<float, A> trunc_of(const xsimd::batch<float, A>& x) {
  return xsimd::copysign(xsimd::trunc(x), x);
}
inline float floor_of(float x) {
  return std::floor(x);
}
template <class A>
xsimd::batch<float, A> floor_of(const xsimd::batch<float, A>& x) {
  return xsimd::copysign(xsimd::floor(x), x);
}
inline float ceil_of(float x) {
  return std::ceil(x);
}
template <class A>
xsimd::batch<float, A> ceil_of(const xsimd::batch<float, A>& x) {
  return xsimd::copysign(xsimd::ceil(x), x);
}
}  // namespace detail

struct vec_math {
  template <class V>
  static V neg(const V& x) {
    return -x;
  }
  template <class V>
  static V abs(const V& x) {
    return absolute(x);
  }
  template <class V>
  static V exp(const V& x) {
    return vexp(x);
  }
  template <class V>
  static V log(const V& x) {
    return detail::log_of(x);
  }
  template <class V>
  static V sqrt(const V& x) {
    return square_root(x);
  }
  template <class V>
  static V div(const V& x, const V& y) {
    return quotient(x, y);
  }
  template <class V>
  static V tanh(const V& x) {
    return vtanh(x);
  }
  template <class V>
  static V erf(const V& x) {
    return verf(x);
  }
  template <class V>
  static V erfc(const V& x) {
    return verfc(x);
  }
  template <class V>
  static V sin(const V& x) {
    return detail::sin_of(x);
  }
  template <class V>
  static V cos(const V& x) {
    return detail::cos_of(x);
  }
  template <class V>
  static V pow(const V& x, const V& y) {
    return detail::pow_of(x, y);
  }
  // NaN-propagating, as XLA's maximum and minimum.
  template <class V>
  static V max(const V& x, const V& y) {
    return where(lane_nan(x) | lane_nan(y), x + y, maximum(x, y));
  }
  template <class V>
  static V min(const V& x, const V& y) {
    return where(lane_nan(x) | lane_nan(y), x + y, minimum(x, y));
  }
  template <class V>
  static V eq(const V& x, const V& y) {
    return where(x == y, V(1.0f), V(0.0f));
  }
  template <class V>
  static V ne(const V& x, const V& y) {
    return where(x == y, V(0.0f), V(1.0f));  // not `!=`: see lane_nan (simd.hpp)
  }
  template <class V>
  static V lt(const V& x, const V& y) {
    return where(x < y, V(1.0f), V(0.0f));
  }
  template <class V>
  static V le(const V& x, const V& y) {
    return where(x <= y, V(1.0f), V(0.0f));
  }
  // select on a carried boolean (1 or 0)
  template <class V>
  static V select(const V& p, const V& a, const V& b) {
    return where(p == V(0.0f), b, a);
  }
  template <class V>
  static V trunc(const V& x) {
    return detail::trunc_of(x);
  }
  template <class V>
  static V floor(const V& x) {
    return detail::floor_of(x);
  }
  template <class V>
  static V ceil(const V& x) {
    return detail::ceil_of(x);
  }
  template <class V>
  static V round_even(const V& x) {
    return kernels::round_even(x);  // simd.hpp
  }
  // tuned whole ops (vmath.hpp)
  template <class V>
  static V relu(const V& x) {
    return kernels::relu(x);
  }
  template <class V>
  static V sigmoid(const V& x) {
    return vsigmoid(x);
  }
  template <class V>
  static V gelu_erf(const V& x) {
    return kernels::gelu_erf(x);
  }
  template <class V>
  static V gelu_tanh(const V& x) {
    return kernels::gelu_tanh(x);
  }
  template <class V>
  static V silu(const V& x) {
    return kernels::silu(x);
  }
};

// The unary op K of the table on x (a lane or a batch).
template <graph::op_kind K, class V>
V apply_unary(const V& x) {
  return graph::op_traits<K>::template apply<vec_math>(x);
}

// A transcendental op: its vector form needs many registers (GEMM epilogues stage the tile
// before applying one, so that the accumulators need not spill).
constexpr bool is_transcendental(graph::op_kind k) {
  using graph::op_kind;
  switch (k) {
    case op_kind::exp: case op_kind::log: case op_kind::tanh: case op_kind::erf:
    case op_kind::sigmoid: case op_kind::gelu_erf: case op_kind::gelu_tanh: case op_kind::silu:
    case op_kind::pow: case op_kind::sin: case op_kind::cos:
      return true;
    default:
      return false;
  }
}

}  // namespace fusedsl::cpu::kernels
