#pragma once
// Vectorised transcendental functions on one lane (float) or a full vector (xsimd batch).
//
// Vector lanes use xsimd's polynomial approximations, except exp on AVX-512, which is our own
// (below); one-lane calls use the C library. Maximum error against the exact value (std:: in
// double), in float ulps, measured by tests/cpu/vmath_test.cpp on 2^20 evenly spaced points; the
// test bounds are the next whole ulp (a correctly rounded result is itself up to 0.5 ulp off):
//   exp      1.00 ulp (AVX-512), 1.51 ulp (AVX2, xsimd) on [-87, 88] (bound 2); +inf above 88.72,
//            NaN -> NaN; AVX-512: 0 below -87.34 (where the result would be subnormal: one
//            subnormal result costs a ~70 ns microcode assist per vector, 40x an exp); AVX2:
//            subnormal results down to -103.9
//   erf      2.29 ulp on [-6, 6]     (bound 3); +-1 at +-inf
//   tanh     1.22 ulp on [-10, 10]   (bound 2); +-1 at +-inf
//   sigmoid  2.29 ulp on [-80, 80]   (bound 3); 1 / (1 + exp(-x))
// The activations used by GEMM epilogues and elementwise groups live here too, so every
// kernel applies them identically.
#include <cmath>
#include <limits>

#include "fusedsl/backend/cpu/kernels/simd.hpp"

namespace fusedsl::cpu::kernels {

inline float vexp(float x) {
  return std::exp(x);
}
template <class A>
xsimd::batch<float, A> vexp(const xsimd::batch<float, A>& x) {
  return xsimd::exp(x);
}

// exp for arguments known to lie in [ln(FLT_MIN), 88.7] (finite, normal result): the range
// handling of vexp left out. Generic paths: vexp itself.
template <class V>
V vexp_in_range(const V& x) {
  return vexp(x);
}

// exp for arguments that are <= 0, -inf or NaN (softmax's x - max): 0 where the result would be
// subnormal, like vexp. Generic paths: vexp itself.
template <class V>
V vexp_nonpositive(const V& x) {
  return vexp(x);
}

#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
namespace detail {
// AVX-512: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2) and exp(r) by a degree-6
// polynomial fitted to minimise the relative error on that interval (1.7e-8 with these float
// coefficients; the degree-7 Taylor polynomial it replaces needs one more FMA for 4e-9);
// exp(x) = p * 2^n, left to the caller.
inline void exp_reduced(__m512 x, __m512& n, __m512& p) {
  // n = round(x / ln2) by adding and subtracting 1.5 * 2^23 (two FMA-port ops where VRNDSCALEPS
  // takes port 0 only); exact for |x / ln2| < 2^22, and every caller's x is clamped or masked.
  const __m512 shifter = _mm512_set1_ps(12582912.0f);
  n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shifter), shifter);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  p = _mm512_set1_ps(1.3836845755577087e-3f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.374815806746483e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.166822507977486e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666419804096222e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.9999991059303284e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
}

// p * 2^n for the lanes in `normal`, 0 in the others (no subnormal results).
inline __m512 exp_masked(__m512 x, __mmask16 normal) {
  __m512 n, p;
  exp_reduced(x, n, p);
  return _mm512_maskz_scalef_ps(normal, p, n);
}
}  // namespace detail

// AVX-512 exp: the 2^n scaling by VSCALEFPS, which also gives +inf on overflow. Lanes below
// ln(FLT_MIN) are zeroed by the scaling's mask and computed at ln(FLT_MIN), so no lane ever
// produces a subnormal (masked -inf scores are common).
inline xsimd::batch<float, xsimd::avx512f> vexp(const xsimd::batch<float, xsimd::avx512f>& xb) {
  const __m512 lo = _mm512_set1_ps(-87.33654f);  // ln(FLT_MIN)
  __m512 x = xb;
  const __mmask16 normal = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ);  // x >= lo, or NaN
  // Clamp so n stays finite; VMAXPS/VMINPS return the second source for NaN, so NaN passes.
  x = _mm512_max_ps(lo, x);
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  return detail::exp_masked(x, normal);
}

// No clamps: a non-positive argument cannot overflow, and lanes below ln(FLT_MIN) (-inf
// included, whose reduction gives NaN) are zeroed by the scaling's mask; NaN stays NaN.
inline xsimd::batch<float, xsimd::avx512f> vexp_nonpositive(
    const xsimd::batch<float, xsimd::avx512f>& xb) {
  const __m512 x = xb;
  return detail::exp_masked(x, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_NLT_UQ));
}

inline xsimd::batch<float, xsimd::avx512f> vexp_in_range(
    const xsimd::batch<float, xsimd::avx512f>& x) {
  __m512 n, p;
  detail::exp_reduced(x, n, p);
  return _mm512_scalef_ps(p, n);
}
#endif

inline float verf(float x) {
  return std::erf(x);
}
template <class A>
xsimd::batch<float, A> verf(const xsimd::batch<float, A>& x) {
  return xsimd::erf(x);
}

inline float vtanh(float x) {
  return std::tanh(x);
}
template <class A>
xsimd::batch<float, A> vtanh(const xsimd::batch<float, A>& x) {
  return xsimd::tanh(x);
}

template <class V>
V vsigmoid(const V& x) {
  return V(1.0f) / (V(1.0f) + vexp(-x));
}

// Activation functions of the GEMM epilogue and the elementwise kernels.
enum class activation { none, relu, gelu_erf, gelu_tanh, silu, sigmoid };

constexpr const char* name_of(activation a) {
  switch (a) {
    case activation::none:
      return "none";
    case activation::relu:
      return "relu";
    case activation::gelu_erf:
      return "gelu_erf";
    case activation::gelu_tanh:
      return "gelu_tanh";
    case activation::silu:
      return "silu";
    case activation::sigmoid:
      return "sigmoid";
  }
  return "?";
}

// relu keeps NaN (NaN < 0 is false) and maps -inf to 0.
template <class V>
V relu(const V& x) {
  return where(x < V(0.0f), V(0.0f), x);
}

// GELU, exact form: x/2 (1 + erf(x / sqrt 2)) (Hendrycks & Gimpel 2016, eq. 1).
template <class V>
V gelu_erf(const V& x) {
  return V(0.5f) * x * (V(1.0f) + verf(x * V(0.70710678118654752f)));
}

// 1 / x: AVX-512 by VRCP14PS and one Newton step (relative error ~2^-27), else a division.
inline float reciprocal(float x) {
  return 1.0f / x;
}
template <class A>
xsimd::batch<float, A> reciprocal(const xsimd::batch<float, A>& x) {
  return xsimd::batch<float, A>(1.0f) / x;
}
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
inline xsimd::batch<float, xsimd::avx512f> reciprocal(
    const xsimd::batch<float, xsimd::avx512f>& xb) {
  const __m512 x = xb, r = _mm512_rcp14_ps(x);
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(x, r, _mm512_set1_ps(2.0f)));
}
#endif

// GELU, tanh form: x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) (same paper, sec. 2),
// computed as x / (1 + exp(-2u)) (the same function: 1 + tanh(u) = 2 / (1 + exp(-2u))): one exp
// and a reciprocal instead of a tanh, and no cancellation in 1 + tanh(u) for negative x. Where
// -2u > 80 (x below about -9.5, -inf included, and x^3 overflowing) the result is 0: its exact
// value is below 2e-34 in magnitude there, and x times the reciprocal would not be (at x = -1e30
// it gave -1.8e5). -2u is kept within [-80, 80] for the exp, so it gives no subnormal (whose
// microcode assists made the epilogue 2x slower for large positive x). NaN stays NaN.
// Accuracy: tests/cpu/vmath_test.cpp.
template <class V>
V gelu_tanh(const V& x) {
  constexpr float c = 0.79788456080286536f;  // sqrt(2 / pi)
  const V z = x * fmadd(x * x, V(-2.0f * c * 0.044715f), V(-2.0f * c));
  const V y = x * reciprocal(V(1.0f) + vexp_in_range(maximum(minimum(z, V(80.0f)), V(-80.0f))));
  return where(z > V(80.0f), V(0.0f), y);
}
#if defined(__AVX512F__) && !defined(FUSEDSL_CPU_FORCE_SCALAR)
// The same function in two fewer vector operations (21): no upper clamp on -2u, since the lanes
// where it exceeds 80 are zeroed anyway (their exp may overflow to +inf and give NaN, which the
// zeroing replaces), and that zeroing folded into the last multiply (a zero-masked VMULPS). The
// lower clamp stays: exp(-2u) must not be subnormal. Results are bitwise those of the generic form.
inline xsimd::batch<float, xsimd::avx512f> gelu_tanh(
    const xsimd::batch<float, xsimd::avx512f>& xb) {
  constexpr float c = 0.79788456080286536f;  // sqrt(2 / pi)
  const __m512 x = xb;
  const __m512 z =
      _mm512_mul_ps(x, _mm512_fmadd_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(-2.0f * c * 0.044715f),
                                       _mm512_set1_ps(-2.0f * c)));
  const __mmask16 keep =
      _mm512_cmp_ps_mask(z, _mm512_set1_ps(80.0f), _CMP_NGT_UQ);  // z <= 80, or NaN
  // VMAXPS returns its second operand for NaN, so a NaN z passes through.
  const __m512 e =
      vexp_in_range(xsimd::batch<float, xsimd::avx512f>(_mm512_max_ps(_mm512_set1_ps(-80.0f), z)));
  const __m512 r =
      reciprocal(xsimd::batch<float, xsimd::avx512f>(_mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  return _mm512_maskz_mul_ps(keep, x, r);
}
#endif

template <class V>
V silu(const V& x) {
  return x * vsigmoid(x);
}

template <activation Act, class V>
V apply_activation(const V& x) {
  if constexpr (Act == activation::none)
    return x;
  else if constexpr (Act == activation::relu)
    return relu(x);
  else if constexpr (Act == activation::gelu_erf)
    return gelu_erf(x);
  else if constexpr (Act == activation::gelu_tanh)
    return gelu_tanh(x);
  else if constexpr (Act == activation::silu)
    return silu(x);
  else
    return vsigmoid(x);
}

}  // namespace fusedsl::cpu::kernels
